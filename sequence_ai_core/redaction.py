"""The key in no text the package produces, whatever a server sends back (DESIGN §3):
answers are redacted before they are cut or quoted, and httpx's and httpcore's own log
records are filtered, since they print what the server sent."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

REDACTED = "***"


def redact_text(text: str, secret: str) -> str:
    """``text`` with the key (and a quoted ``Bearer <key>``) replaced. Done before any
    cut, so a key straddling a cut cannot leave its first characters behind."""
    if not secret or secret not in text:
        return text
    return text.replace(f"Bearer {secret}", REDACTED).replace(secret, REDACTED)


def redact_parsed(value: Any, secret: str) -> Any:
    """The key removed from every string and object key of parsed JSON, in place and
    without recursion (a body nested thousands deep must not defeat it). Needed on top of
    ``redact_text`` because JSON escapes (``\\u0073k-...``) hide the key from a text search."""
    if not secret:
        return value
    if isinstance(value, str):
        return redact_text(value, secret)
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = redact_text(item, secret)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
        elif isinstance(node, dict):
            for key in list(node):
                item = node[key]
                if isinstance(key, str) and secret in key:
                    del node[key]
                    key = redact_text(key, secret)
                if isinstance(item, str):
                    item = redact_text(item, secret)
                elif isinstance(item, (list, dict)):
                    stack.append(item)
                node[key] = item
    return value


#: Loggers that print what a server sent (httpcore's DEBUG traces include response headers).
_QUOTING_LOGGERS = ("httpx", "httpcore.http11", "httpcore.connection", "httpcore.proxy")


class _RedactingFilter(logging.Filter):
    """Removes the keys of open transports from httpx's and httpcore's log records, so a
    server echoing the Authorization header in a response header cannot get it logged."""

    def __init__(self) -> None:
        super().__init__()
        #: key -> open transports using it (two Policies may share a key)
        self._users: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def secrets(self) -> list[str]:
        with self._lock:
            return list(self._users)

    def users(self, secret: str) -> int:
        """Open transports whose key is ``secret``."""
        with self._lock:
            return self._users.get(secret, 0)

    def add(self, secret: str) -> None:
        with self._lock:
            self._users[secret] += 1

    def discard(self, secret: str) -> None:
        with self._lock:
            self._users[secret] -= 1
            if self._users[secret] <= 0:
                del self._users[secret]

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self.secrets
        if secrets:
            text = record.getMessage()
            if any(secret in text for secret in secrets):
                for secret in secrets:
                    text = redact_text(text, secret)
                record.msg, record.args = text, None
        return True


LOG_REDACTION = _RedactingFilter()
for _name in _QUOTING_LOGGERS:
    logging.getLogger(_name).addFilter(LOG_REDACTION)
