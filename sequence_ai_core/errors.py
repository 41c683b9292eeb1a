"""Typed errors: every failure this package raises is one of them, so a controller can tell
"wait for a cold worker" from "stop and page someone" by class, never by parsing text.

Each carries the status, the parsed body, the request id, the body's ``code`` and its
``details.reason`` (whatever of them the failure had). What an error quotes of a server's
answer is redacted of the key, then cut, since an error is text that leaves the process.
Which answer becomes which error is the gateway's edge (``gateway/error_map.py``) and
openpi's (``openpi/errors.py``); the hierarchy::

    SequencesError              anything this package raises; a status no rule maps
    ├── AuthError               the key is missing or wrong
    │   └── PermissionDenied    the key is valid, but not for this model or endpoint
    ├── OutOfCredit             credit or budget exhausted
    ├── InvalidRequest          the request must change
    ├── Unavailable             transient; ``warming`` marks a cold worker
    │   └── Stalled             run()'s plan stayed empty past stall_timeout_s
    ├── InvalidResponse         a 200 answer that is not a usable chunk
    ├── ChunkRefused            your check of a whole chunk refused it
    ├── ChunkExhausted          nothing to play and no observation to ask with
    ├── TLSError                the server's certificate is not trusted
    └── ConfigurationError      a setting connect() cannot use (also a ValueError)
"""

from __future__ import annotations

from typing import Any


class SequencesError(Exception):
    """Base of every error this package raises."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Any = None,
        request_id: str | None = None,
        code: str | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body
        self.request_id = request_id
        self.code = code
        #: The newer body shape's ``details.reason`` (``gpu_busy``, ``queue_timeout``,
        #: ``draining``, ...): why the gateway answered so, where ``code`` says what it means.
        self.reason = reason

    def __str__(self) -> str:
        parts = [self.message]
        if self.status is not None:
            parts.append(f"status={self.status}")
        if self.code:
            parts.append(f"code={self.code}")
        if self.reason:
            parts.append(f"reason={self.reason}")
        if self.request_id:
            parts.append(f"request_id={self.request_id}")
        return " ".join(parts) if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.message!r}, status={self.status}, "
            f"request_id={self.request_id!r})"
        )


class AuthError(SequencesError):
    """The key is missing or wrong; also raised before anything is sent when no key is found
    anywhere (the message names where it looked). Retrying will not help."""


class PermissionDenied(AuthError):
    """The key is valid but may not use this model or endpoint."""


class OutOfCredit(SequencesError):
    """Credit or budget exhausted. Stop, hold, top up."""


class InvalidRequest(SequencesError):
    """Deterministic: the request must change. Also raised before anything is sent for an
    observation the model's catalogue entry does not allow (the message names the field)."""


class Unavailable(SequencesError):
    """Transient: a busy or failing gateway, a connection failure, or no complete answer by
    the request deadline (``timeout_s``). ``warming`` marks a cold worker, with
    ``retry_after_s`` the gateway's estimate of the wait."""

    def __init__(
        self,
        message: str,
        *,
        warming: bool = False,
        retry_after_s: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(message, **kwargs)
        self.warming = warming
        self.retry_after_s = retry_after_s


class InvalidResponse(SequencesError):
    """A 200 answer that is not a usable chunk: malformed, over a limit, at a rate or size the
    catalogue does not list, or out of step with its request. Nothing from it reaches the
    robot."""


class ChunkRefused(SequencesError):
    """Your check of a whole chunk (``run(validate_chunk=)``, the node's ``ValidateChunk``
    service) refused it: it returned False or something other than a boolean, raised this
    error with the reason, or did not answer within ``chunk_validator_timeout_s``. No step of
    the chunk reaches the robot; the run ends with reason ``validate``, after the hold."""


class ChunkExhausted(SequencesError):
    """Nothing to play and no observation to ask with: ``next_action()`` without
    ``observation=``, or ``run()`` whose ``observe()`` kept returning None for
    ``stall_timeout_s``."""


class Stalled(Unavailable):
    """``run()``'s plan stayed empty longer than ``stall_timeout_s`` while a request was in
    flight (the arm was held when it ran out)."""


class TLSError(SequencesError):
    """The server's certificate was not trusted. Not transient: retrying will not help."""


class ConfigurationError(SequencesError, ValueError):
    """A setting this client cannot use, from ``connect()``: a missing or non-PEM
    ``SSL_CERT_FILE``, a SOCKS proxy without ``httpx[socks]``, a timeout that is not finite and
    in (0, 3600] s, a credentials file that is not UTF-8. The message names the setting and
    never quotes the file. Also a ``ValueError``, for code that caught the settings errors as
    such."""
