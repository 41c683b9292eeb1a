"""The errors every backend raises alike where no answer from the server decides: a closed
handle, a cancelled request, a passed deadline, an untrusted certificate. The gateway's
transport and openpi's client both raise these, so the two read the same to a caller."""

from __future__ import annotations

from ..errors import SequencesError, TLSError, Unavailable


def handle_closed(request_id: str | None) -> SequencesError:
    return SequencesError("policy handle is closed", request_id=request_id)


def request_cancelled(request_id: str | None) -> SequencesError:
    return SequencesError("request aborted by cancel_requests()", request_id=request_id)


def deadline_passed(url: str, timeout_s: float, request_id: str | None) -> Unavailable:
    """No complete answer by the request's absolute deadline (transient: the plan may retry)."""
    return Unavailable(
        f"no complete answer from {url} within the {timeout_s:g} s request deadline",
        warming=False,
        request_id=request_id,
    )


def untrusted_certificate(url: str, why: str, request_id: str | None) -> TLSError:
    """The server's certificate is trusted by nothing configured, and what fixes that."""
    return TLSError(
        f"TLS certificate of {url} not trusted ({why}); hint: set SSL_CERT_FILE to the CA "
        "bundle that signs it, or pass verify=<path>",
        request_id=request_id,
    )
