"""Answer bodies: read within the size cap, decoded without unbounded decompression,
redacted of the key, parsed within the item cap. Every refusal is a ``BodyRefused``.

The client asks for ``Accept-Encoding: identity``; an encoded body (a proxy may compress
anyway) is decoded one layer at a time, each layer's output bounded by ``MAX_BODY_BYTES``,
so 820 bytes of stacked gzip can no longer grow into gigabytes.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from typing import Any

from .limits import DECODABLE_ENCODINGS, MAX_BODY_BYTES, MAX_ENCODING_LAYERS, MAX_JSON_ITEMS

REDACTED = "***"


class BodyRefused(Exception):
    """The body breaks a limit or cannot be decoded; the message says which."""


def declared_length(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        length = int(value.strip())
    except ValueError:
        raise BodyRefused(f"Content-Length {value[:40]!r} is not a number") from None
    if length < 0:
        raise BodyRefused(f"Content-Length {length} is negative")
    return length


def read_capped(parts: Iterable[bytes], declared: int | None, cap: int = MAX_BODY_BYTES) -> bytes:
    """The raw body, refused as soon as it (or its declared length) passes ``cap``."""
    if declared is not None and declared > cap:
        raise BodyRefused(f"body of {declared} bytes is over the {cap}-byte limit")
    received = bytearray()
    for part in parts:
        received += part
        if len(received) > cap:
            raise BodyRefused(f"body is over the {cap}-byte limit")
    return bytes(received)


def _inflate(data: bytes, encoding: str, cap: int) -> bytes:
    wbits = 16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS
    if encoding == "deflate" and data[:1] and (data[0] & 0x0F) != 8:
        wbits = -zlib.MAX_WBITS  # raw deflate, as some servers send it
    decoder = zlib.decompressobj(wbits)
    try:
        out = decoder.decompress(data, cap + 1)
    except zlib.error as exc:
        raise BodyRefused(f"{encoding} body does not decode: {exc}") from None
    if len(out) > cap or decoder.unconsumed_tail:
        raise BodyRefused(f"{encoding} body decodes to over the {cap}-byte limit")
    return out


def decoded(data: bytes, content_encoding: str | None, cap: int = MAX_BODY_BYTES) -> bytes:
    """Undo ``Content-Encoding`` (applied left to right, so undone right to left)."""
    layers = [e.strip().lower() for e in (content_encoding or "").split(",") if e.strip()]
    layers = [e for e in layers if e != "identity"]
    if len(layers) > MAX_ENCODING_LAYERS:
        raise BodyRefused(
            f"{len(layers)} stacked content encodings (at most {MAX_ENCODING_LAYERS})"
        )
    for encoding in reversed(layers):
        if encoding not in DECODABLE_ENCODINGS:
            raise BodyRefused(f"content encoding {encoding[:40]!r} is not supported")
        data = _inflate(data, encoding, cap)
    return data


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


def parse_json(text: str, secret: str = "") -> Any:
    """Parse redacted ``text``; ``BodyRefused`` for too many items, ``ValueError`` (or
    ``RecursionError``) for text that is not JSON."""
    items = text.count(",")
    if items > MAX_JSON_ITEMS:
        raise BodyRefused(f"body has {items} JSON items (at most {MAX_JSON_ITEMS})")
    value = json.loads(text)
    return redact_parsed(value, secret) if secret and "\\" in text else value
