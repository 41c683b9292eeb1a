"""Typed errors, and the one place where a gateway answer becomes one.

A controller must tell "wait 118 s for a cold worker" from "stop and page someone", so every
failure is a ``SequencesError`` subclass carrying the status, the parsed body, the request
id, the body's ``code`` and its ``details.reason``. No httpx exception escapes this package;
the transport maps them here. What an error means is read from the body as the server sent
it; what it quotes (message, hint, code, reason, the body itself) is redacted of the key
first, then cut, since an error is text that leaves the process.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .redaction import redact, redact_parsed


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


# ---------------------------------------------------------------- what every backend says alike


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


def cold_start_advice(exc: Unavailable, waited_s: float) -> Unavailable:
    """The warming answer that ended a run before its first action, saying what to change."""
    if waited_s > 0:
        advice = f"still warming after startup_timeout_s={waited_s:g}"
    else:  # a cold worker takes ~100 s to load (measured on the real gateway: 100.0 s)
        advice = (
            f"pass startup_timeout_s={math.ceil(1.25 * (exc.retry_after_s or 120.0))} "
            "to run() to wait for a cold worker"
        )
    return Unavailable(
        f"{exc.message}; {advice}",
        warming=True,
        retry_after_s=exc.retry_after_s,
        status=exc.status,
        body=exc.body,
        request_id=exc.request_id,
        code=exc.code,
        reason=exc.reason,
    )


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


INVALID_REQUEST_STATUSES = frozenset({400, 404, 409, 410, 413, 422})
TRANSIENT_STATUSES = frozenset({429, 502, 503, 504})
_CREDIT_CODES = frozenset({"insufficient_credit", "budget_exhausted"})
_WARMING_CODES = frozenset({"warming", "warming_up"})  # the newer body's code, the older's status


@dataclass(frozen=True)
class StatusRule:
    """Which error a non-2xx answer becomes: its HTTP status or its body's ``code`` matches
    (either one; a ``warming`` rule needs both, a 503 whose code says the worker is cold)."""

    error: type[SequencesError]
    statuses: frozenset[int]
    codes: frozenset[str] = frozenset()
    warming: bool = False

    def matches(self, status: int, code: str | None) -> bool:
        by_status, by_code = status in self.statuses, code in self.codes
        return (by_status and by_code) if self.warming else (by_status or by_code)


#: The one mapping from a gateway answer to its error, read in order: the first rule that
#: matches decides; an answer no rule matches is a plain ``SequencesError``.
STATUS_RULES: tuple[StatusRule, ...] = (
    StatusRule(AuthError, frozenset({401}), frozenset({"unauthenticated"})),
    StatusRule(PermissionDenied, frozenset({403}), frozenset({"forbidden"})),
    StatusRule(OutOfCredit, frozenset({402}), _CREDIT_CODES),
    StatusRule(InvalidRequest, INVALID_REQUEST_STATUSES),
    StatusRule(Unavailable, frozenset({503}), _WARMING_CODES, warming=True),
    StatusRule(Unavailable, TRANSIENT_STATUSES),
)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: delta-seconds or an HTTP date; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return max(0.0, seconds) if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


#: Characters of the server's text kept on an error, after redaction: its message, its hint,
#: a body that is not JSON, and each of ``code``, ``reason`` and the server's request id.
MESSAGE_CHARS = 500
HINT_CHARS = 200
TEXT_BODY_CHARS = 2000
TOKEN_CHARS = 100

_TEXT_CODE = re.compile(r'"(?:code|status)"\s*:\s*"([a-z_]{1,40})"')
_TEXT_REASON = re.compile(r'"reason"\s*:\s*"([a-z_]{1,40})"')
_TEXT_RETRY = re.compile(r'"retry_after_s"\s*:\s*([0-9]{1,9}(?:\.[0-9]{1,6})?)')


def _text_fields(text: str) -> dict[str, Any]:
    """The fields of a body JSON could not parse (nested past the parser's depth): the
    first ``code``/``status``, ``reason`` and ``retry_after_s`` found, so it keeps its
    meaning."""
    out: dict[str, Any] = {"message": text}
    code, reason = _TEXT_CODE.search(text), _TEXT_REASON.search(text)
    retry = _TEXT_RETRY.search(text)
    if code:
        out["code"] = code.group(1)
    if reason:
        out["reason"] = reason.group(1)
    if retry:
        out["retry_after_s"] = retry.group(1)
    return out


def _fields(body: Any) -> dict[str, Any]:
    """Flatten both error body shapes into one dict of known fields.

    older: {"detail": "text"} or {"detail": {"status", "retry_after_s", "message", ...}}
    newer: {"detail": "text", "code", "retryable", "retry_after_s", "request_id", "hint",
            "details": {"reason", ...}}
    A body may carry both (the newer fields beside an older ``detail`` object, so a 0.1.0
    client reads it too); the newer fields win, the older object fills what they leave out.
    """
    if not isinstance(body, Mapping):
        return _text_fields(body) if isinstance(body, str) else {}
    out = {key: body[key] for key in _NEWER_KEYS if body.get(key) is not None}
    if not isinstance(out.get("code"), str):
        out.pop("code", None)
    for key, value in _detail_fields(body.get("detail")).items():
        if value is not None and out.get(key) is None:
            out[key] = value
    if out.get("message") is None and body.get("message") is not None:
        out["message"] = body["message"]
    details = body.get("details")
    if isinstance(details, Mapping):
        out["reason"] = details.get("reason")
    return out


#: The newer shape's fields beside ``detail``, which win over the older ``detail`` object's.
_NEWER_KEYS = ("code", "retry_after_s", "request_id", "hint")


def _detail_fields(detail: Any) -> dict[str, Any]:
    """What ``detail`` says: the message as text, or the older object's fields."""
    if isinstance(detail, Mapping):
        code = detail.get("code") or detail.get("status")
        return {
            "message": detail.get("message") or detail.get("detail"),
            "code": code if isinstance(code, str) else None,
            "retry_after_s": detail.get("retry_after_s"),
        }
    if isinstance(detail, str):
        return {"message": detail}
    if isinstance(detail, list):  # FastAPI validation errors: [{"loc", "msg", "type"}, ...]
        texts = [str(i["msg"]) for i in detail if isinstance(i, Mapping) and i.get("msg")]
        return {"message": "; ".join(texts) or None}
    return {}


def _outward(value: Any, secret: str | None, limit: int) -> str | None:
    """Server text as an error may quote it: redacted of the key, then cut (in that order,
    so a key straddling the cut leaves nothing behind). None for anything but text."""
    if not isinstance(value, str) or not value.strip():
        return None
    return redact(value.strip(), secret)[:limit]


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        seconds = float(value)
    except (ValueError, OverflowError):  # a huge JSON integer overflows float()
        return None
    return seconds if seconds >= 0 and math.isfinite(seconds) else None


def error_from_response(
    status: int,
    body: Any,
    *,
    headers: Mapping[str, str] | None = None,
    request_id: str | None = None,
    secret: str | None = None,
) -> SequencesError:
    """Map a non-2xx gateway answer (``body``: parsed JSON, or the text of one that is not)
    to its typed error. The server's message passes through, redacted of ``secret``.

    The type, ``warming`` and ``retry_after_s`` come from the body as sent (with a short key,
    a redacted ``"warming"`` would no longer read as one); everything the error carries as
    text is redacted: message, hint, ``code``, ``reason``, ``request_id`` and ``body``."""
    info = _fields(body)
    code = info.get("code") if isinstance(info.get("code"), str) else None
    # Only text is quoted (str() of a deeply nested value would recurse), cut after redaction.
    message = _outward(info.get("message"), secret, MESSAGE_CHARS)
    message = message or f"gateway answered HTTP {status}"
    hint = _outward(info.get("hint"), secret, HINT_CHARS)
    if hint:
        message = f"{message} (hint: {hint})"
    # Our own X-Seq-Request-Id wins: it is the id our logs carry. The body keeps the server's.
    rid = request_id or _outward(info.get("request_id"), secret, TOKEN_CHARS)
    kept = (
        redact(body, secret)[:TEXT_BODY_CHARS]
        if isinstance(body, str)
        else redact_parsed(body, secret)
    )
    common: dict[str, Any] = {
        "status": status,
        "body": kept,
        "request_id": rid,
        "code": _outward(code, secret, TOKEN_CHARS),
        "reason": _outward(info.get("reason"), secret, TOKEN_CHARS),
    }

    rule = next((rule for rule in STATUS_RULES if rule.matches(status, code)), None)
    if rule is None:
        return SequencesError(message, **common)
    if rule.error is Unavailable:
        retry_after = _seconds(info.get("retry_after_s"))
        if retry_after is None and headers is not None:
            lowered = {str(k).lower(): v for k, v in headers.items()}
            retry_after = parse_retry_after(lowered.get("retry-after"))
        return Unavailable(message, warming=rule.warming, retry_after_s=retry_after, **common)
    return rule.error(message, **common)
