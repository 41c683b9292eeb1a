"""What a gateway's error answer says, read from its body in either shape and from its
``Retry-After`` header; and how much of the server's text an error may quote.

The older shape is ``{"detail": "text"}``, or ``{"detail": {"status", "retry_after_s",
"message", ...}}`` for a cold worker; the newer one is ``{"detail": "text", "code",
"retryable", "retry_after_s", "request_id", "hint", "details": {"reason", ...}}``. A body may
carry both (the newer fields beside an older ``detail`` object, so a 0.1.0 client reads it
too): the newer fields win, and the older object fills what they leave out.
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Mapping
from typing import Any

from ..redaction import redact

#: Characters of the server's text kept on an error, after redaction: its message, its hint,
#: a body that is not JSON, and each of ``code``, ``reason`` and the server's request id.
MESSAGE_CHARS = 500
HINT_CHARS = 200
TEXT_BODY_CHARS = 2000
TOKEN_CHARS = 100

#: The newer shape's fields beside ``detail``, which win over the older ``detail`` object's.
_NEWER_KEYS = ("code", "retry_after_s", "request_id", "hint")

_TEXT_CODE = re.compile(r'"(?:code|status)"\s*:\s*"([a-z_]{1,40})"')
_TEXT_REASON = re.compile(r'"reason"\s*:\s*"([a-z_]{1,40})"')
_TEXT_RETRY = re.compile(r'"retry_after_s"\s*:\s*([0-9]{1,9}(?:\.[0-9]{1,6})?)')


def error_fields(body: Any) -> dict[str, Any]:
    """Both shapes of ``body`` (parsed JSON, or the text of one that is not) flattened into
    one dict of the fields known: message, code, retry_after_s, request_id, hint, reason."""
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


def wait_seconds(value: Any, headers: Mapping[str, str] | None) -> float | None:
    """How long the answer asks to wait: the body's ``retry_after_s`` if it is a usable
    number, else the ``Retry-After`` header; None if neither says."""
    seconds = _non_negative(value)
    if seconds is None and headers is not None:
        lowered = {str(k).lower(): v for k, v in headers.items()}
        seconds = parse_retry_after(lowered.get("retry-after"))
    return seconds


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


def _non_negative(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        seconds = float(value)
    except (ValueError, OverflowError):  # a huge JSON integer overflows float()
        return None
    return seconds if seconds >= 0 and math.isfinite(seconds) else None


def quoted(value: Any, secret: str | None, limit: int) -> str | None:
    """Server text as an error may quote it: redacted of the key, then cut (in that order,
    so a key straddling the cut leaves nothing behind). None for anything but text."""
    if not isinstance(value, str) or not value.strip():
        return None
    return redact(value.strip(), secret)[:limit]
