"""Answer bodies: read within the size cap, decoded without unbounded decompression,
parsed within the item cap. Every refusal is a ``BodyRefused``; its message may quote what the
server sent (a header value), so whoever puts it into outward text redacts it first
(``redaction``), then cuts it.

The client asks for ``Accept-Encoding: identity``; an encoded body (a proxy may compress
anyway) is decoded one layer at a time, each layer's output bounded by ``MAX_BODY_BYTES``,
so 820 bytes of stacked gzip can no longer grow into gigabytes.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from typing import Any

from ..limits import DECODABLE_ENCODINGS, MAX_BODY_BYTES, MAX_ENCODING_LAYERS, MAX_JSON_ITEMS


class BodyRefused(Exception):
    """The body breaks a limit or cannot be decoded; the message says which."""


def declared_length(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        length = int(value.strip())
    except ValueError:
        raise BodyRefused(f"Content-Length {value!r} is not a number") from None
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
            raise BodyRefused(f"content encoding {encoding!r} is not supported")
        data = _inflate(data, encoding, cap)
    return data


def parse_json(text: str) -> Any:
    """Parse ``text`` as it was sent; ``BodyRefused`` for too many items, ``ValueError`` (or
    ``RecursionError``) for text that is not JSON."""
    items = text.count(",")
    if items > MAX_JSON_ITEMS:
        raise BodyRefused(f"body has {items} JSON items (at most {MAX_JSON_ITEMS})")
    return json.loads(text)
