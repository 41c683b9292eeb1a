"""The rules every backend's URL follows, written once: its two schemes, no credentials in it,
and no key in clear text off this machine (docs/architecture.md §2)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit


@dataclass(frozen=True)
class Schemes:
    """A backend's URL shape: ``plain`` and ``plain + "s"`` (``http``/``https``, ``ws``/``wss``)."""

    plain: str
    what: str  # how errors name the URL
    shape: str  # what a valid one looks like

    @property
    def secure(self) -> str:
        return self.plain + "s"


GATEWAY = Schemes("http", "base URL", "http(s)://host[:port][/path]")
OPENPI = Schemes("ws", "openpi URL", "ws(s)://host[:port]")


def is_loopback(host: str) -> bool:
    """Whether a host name is this machine (the plain-text rule allows it)."""
    name = host.lower()
    if name in ("localhost", "localhost.localdomain") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def checked_url(
    url: str, schemes: Schemes, *, sends_key: bool, allow_insecure: bool
) -> SplitResult:
    """``url`` split, or ValueError: a foreign scheme or no host, credentials in the URL, or
    a key (``sends_key``) that would cross the network unencrypted without ``allow_insecure``."""
    parts = urlsplit(url)
    if parts.scheme not in (schemes.plain, schemes.secure) or not parts.hostname:
        raise ValueError(f"{schemes.what} must be {schemes.shape}, got {url!r}")
    if parts.username or parts.password:
        raise ValueError(f"{schemes.what} must not carry credentials; pass api_key= instead")
    plain_text = parts.scheme == schemes.plain and not is_loopback(parts.hostname)
    if plain_text and sends_key and not allow_insecure:
        raise ValueError(
            f"refusing plain {schemes.plain}:// to non-loopback host {parts.hostname!r} with an "
            f"API key: it would travel unencrypted; use {schemes.secure}:// or pass "
            "allow_insecure_http=True"
        )
    return parts
