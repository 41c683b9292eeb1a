"""The one mapping from a gateway's non-2xx answer to its typed error, at the transport's
edge: no status or body reaches a caller any other way.

The type, ``warming`` and ``retry_after_s`` come from the body as sent (with a short key, a
redacted ``"warming"`` would no longer read as one); everything the error carries as text is
redacted: message, hint, ``code``, ``reason``, ``request_id`` and ``body``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import (
    AuthError,
    InvalidRequest,
    OutOfCredit,
    PermissionDenied,
    SequencesError,
    Unavailable,
)
from ..redaction import redact, redact_parsed
from .bodies import BodyRefused, decoded, parse_json
from .error_bodies import (
    HINT_CHARS,
    MESSAGE_CHARS,
    TEXT_BODY_CHARS,
    TOKEN_CHARS,
    error_fields,
    quoted,
    wait_seconds,
)

log = logging.getLogger(__name__)

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


def error_for_answer(
    status: int,
    headers: Mapping[str, str],
    raw: bytes | BodyRefused,
    request_id: str,
    secret: str | None,
) -> SequencesError:
    """The typed error for a non-2xx answer as read off the wire (``raw``: its body, or why
    it was refused). A body that cannot be read, however hostile, still ends as an error."""
    body: Any = None
    if not isinstance(raw, BodyRefused):
        try:
            text = decoded(raw, headers.get("content-encoding")).decode("utf-8", errors="replace")
        except BodyRefused:
            text = ""
        try:
            body = parse_json(text) if text else None
        except (ValueError, RecursionError, BodyRefused):
            body = text  # quoted on the error only redacted, then cut
    try:
        return error_from_response(
            status, body, headers=headers, request_id=request_id, secret=secret
        )
    except Exception:
        log.warning("unreadable error body for HTTP %d [%s]", status, request_id)
        return error_from_response(
            status, None, headers=headers, request_id=request_id, secret=secret
        )


def error_from_response(
    status: int,
    body: Any,
    *,
    headers: Mapping[str, str] | None = None,
    request_id: str | None = None,
    secret: str | None = None,
) -> SequencesError:
    """Map a non-2xx answer (``body``: parsed JSON, or the text of one that is not) to its
    typed error. The server's message passes through, redacted of ``secret``; our own
    request id wins over the body's, since it is the one our logs carry."""
    info = error_fields(body)
    code = info.get("code") if isinstance(info.get("code"), str) else None
    # Only text is quoted (str() of a deeply nested value would recurse), cut after redaction.
    message = quoted(info.get("message"), secret, MESSAGE_CHARS)
    message = message or f"gateway answered HTTP {status}"
    hint = quoted(info.get("hint"), secret, HINT_CHARS)
    if hint:
        message = f"{message} (hint: {hint})"
    kept = (
        redact(body, secret)[:TEXT_BODY_CHARS]
        if isinstance(body, str)
        else redact_parsed(body, secret)
    )
    common: dict[str, Any] = {
        "status": status,
        "body": kept,
        "request_id": request_id or quoted(info.get("request_id"), secret, TOKEN_CHARS),
        "code": quoted(code, secret, TOKEN_CHARS),
        "reason": quoted(info.get("reason"), secret, TOKEN_CHARS),
    }
    rule = next((rule for rule in STATUS_RULES if rule.matches(status, code)), None)
    if rule is None:
        return SequencesError(message, **common)
    if rule.error is Unavailable:
        retry_after = wait_seconds(info.get("retry_after_s"), headers)
        return Unavailable(message, warming=rule.warming, retry_after_s=retry_after, **common)
    return rule.error(message, **common)
