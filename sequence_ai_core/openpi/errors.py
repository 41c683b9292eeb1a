"""The one place a websocket, socket or TLS failure of the openpi backend becomes a typed
``SequencesError``; every text is redacted of the key before it is quoted."""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

import websockets.exceptions
from websockets.frames import CloseCode

from ..errors import ConfigurationError, InvalidResponse, SequencesError, Unavailable
from ..gateway.error_map import error_from_response
from ..gateway.failures import (
    deadline_passed,
    handle_closed,
    request_cancelled,
    untrusted_certificate,
)
from ..redaction import redact

log = logging.getLogger(__name__)

#: Characters of a server traceback kept on the error (after redaction).
TRACEBACK_CHARS = 2000
#: Close codes we send when a frame breaks the protocol or a limit: the answer is invalid,
#: not the server unreachable.
_INVALID_CLOSES = frozenset(
    {CloseCode.MESSAGE_TOO_BIG, CloseCode.PROTOCOL_ERROR, CloseCode.INVALID_DATA}
)


class ServerRaised(SequencesError):
    """The policy server's ``infer`` raised: a traceback frame, then close code 1011."""


@dataclass(frozen=True)
class Failure:
    """Where a request stood when it failed."""

    url: str
    timeout_s: float
    secret: str
    request_id: str
    closed: bool = False
    cancelled: bool = False
    timed_out: bool = False


def server_raised(text: str, close_code: int | None, secret: str, request_id: str) -> ServerRaised:
    """The error for a traceback frame: its last line as the message, itself as the body."""
    trace = redact(text, secret)
    last = next((line for line in reversed(trace.strip().splitlines()) if line.strip()), "")
    return ServerRaised(
        f"openpi server raised during inference: {last[:300] or 'no message'}"
        f" (close code {close_code})",
        body=trace[-TRACEBACK_CHARS:],
        request_id=request_id or None,
        code="policy_error",
    )


def typed_error(exc: BaseException, failure: Failure) -> SequencesError:
    """``exc`` (anything the websocket client, the socket or TLS raised) as a typed error;
    ``KeyboardInterrupt`` and ``SystemExit`` are raised again, not mapped."""
    request_id, url = failure.request_id, failure.url
    if failure.closed:
        return handle_closed(request_id)
    if failure.cancelled:
        return request_cancelled(request_id)
    described = redact(f"{type(exc).__name__}: {exc}".strip(), failure.secret)
    if failure.timed_out or isinstance(exc, TimeoutError):
        return deadline_passed(url, failure.timeout_s, request_id)
    if isinstance(exc, websockets.exceptions.ConnectionClosed):
        sent, ours_first = exc.sent, exc.rcvd is None or exc.rcvd_then_sent is False
        if sent is not None and ours_first and sent.code in _INVALID_CLOSES:
            return InvalidResponse(
                f"invalid frame from openpi server: {sent.reason or sent.code}",
                request_id=request_id,
            )
    if isinstance(exc, websockets.exceptions.InvalidStatus):
        status = exc.response.status_code
        if status in (401, 403):
            error = error_from_response(status, None, request_id=request_id)
            error.message = f"openpi server refused the connection: HTTP {status}"
            return error
        return Unavailable(
            f"openpi server answered the handshake with HTTP {status}",
            status=status,
            warming=False,
            request_id=request_id,
        )
    if isinstance(exc, websockets.exceptions.InvalidURI):
        return ConfigurationError(f"not a websocket URL: {url!r}")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return untrusted_certificate(url, described, request_id)
    if isinstance(exc, websockets.exceptions.InvalidHandshake):
        return InvalidResponse(
            f"openpi server's handshake is invalid: {described}", request_id=request_id
        )
    if isinstance(exc, (OSError, websockets.exceptions.WebSocketException, EOFError)):
        log.warning("openpi request failed: %s [%s]", described, request_id)
        return Unavailable(
            f"openpi server unreachable: {described}", warming=False, request_id=request_id
        )
    if isinstance(exc, Exception):
        return SequencesError(f"openpi request failed: {described}", request_id=request_id)
    raise exc
