"""The key in no text the package produces, whatever a server sends back (docs/architecture.md §2).

One function, ``redact``, with one rule: every occurrence of the key (and a quoted
``Bearer <key>``) is replaced, whatever the key's length. It is applied where text leaves
the process (exception messages and the bodies kept on errors, log records, diagnostics),
before that text is cut, never to data the client parses: a short key must not change a
valid answer. ``redact_parsed`` applies it to every string of a parsed body that is kept on
an error; httpx's and httpcore's own log records are filtered, since they print what the
server sent.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

REDACTED = "***"


def redact(text: str, secret: str | None) -> str:
    """``text`` with the key (and a quoted ``Bearer <key>``) replaced. Call it before any
    cut, so a key straddling a cut cannot leave its first characters behind."""
    if not secret or secret not in text:
        return text
    return text.replace(f"Bearer {secret}", REDACTED).replace(secret, REDACTED)


def redact_parsed(value: Any, secret: str | None) -> Any:
    """A copy of parsed JSON with ``redact`` applied to every string and object key, built
    without recursion (a body nested thousands deep must not defeat it); ``value`` itself is
    left as it was. For parsed bodies that leave the process on an error: JSON escapes
    (``\\u0073k-...``) hide the key from a search of the text, not from the decoded strings."""
    if not secret:
        return value
    if isinstance(value, str):
        return redact(value, secret)
    if not isinstance(value, (list, dict)):
        return value
    root: list[Any] | dict[Any, Any] = [] if isinstance(value, list) else {}
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        pairs = enumerate(source) if isinstance(source, list) else source.items()
        for key, item in pairs:
            if isinstance(item, str):
                item = redact(item, secret)
            elif isinstance(item, (list, dict)):
                copy: list[Any] | dict[Any, Any] = [] if isinstance(item, list) else {}
                stack.append((item, copy))
                item = copy
            if isinstance(target, list):
                target.append(item)
            else:
                target[redact(key, secret) if isinstance(key, str) else key] = item
    return root


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
                    text = redact(text, secret)
                record.msg, record.args = text, None
        return True


LOG_REDACTION = _RedactingFilter()
for _name in _QUOTING_LOGGERS:
    logging.getLogger(_name).addFilter(LOG_REDACTION)
