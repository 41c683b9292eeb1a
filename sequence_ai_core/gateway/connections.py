"""The connection pool under a ``Transport``: TLS trust, proxies from the environment, and
the deadline-guarded sockets of ``netguard``. Every setting it cannot use is a
``ConfigurationError`` naming the setting, never an ``ssl``, ``OSError`` or ``ImportError``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import ssl
import urllib.request
from typing import Any
from urllib.parse import urlsplit

import httpcore

from ..errors import ConfigurationError
from .netguard import GuardedBackend

VerifyArg = bool | str | ssl.SSLContext

#: Longest request deadline accepted: an hour is already far past any useful answer, and a
#: larger (or infinite) one overflows the socket layer.
MAX_TIMEOUT_S = 3600.0


def checked_timeout(value: float, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}")
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_S):
        raise ConfigurationError(
            f"{name} must be a finite number of seconds in (0, {MAX_TIMEOUT_S:g}], got {value!r}"
        )
    return float(value)


def _load(cafile: str | None = None, capath: str | None = None, *, what: str) -> ssl.SSLContext:
    try:
        try:
            return ssl.create_default_context(cafile=cafile, capath=capath)
        except ssl.SSLError:
            # Once in a few dozen loaded test runs the system bundle failed to load right
            # after a TLS exchange on the same thread, and loaded on the next call; a bundle
            # that is really unreadable fails both times.
            return ssl.create_default_context(cafile=cafile, capath=capath)
    except FileNotFoundError:
        raise ConfigurationError(f"{what} does not exist") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigurationError(
            f"{what} is not a readable PEM CA bundle ({type(exc).__name__}); point it at a "
            "PEM file of the CA certificates that sign your gateway's certificate"
        ) from None


def default_ssl_context() -> ssl.SSLContext:
    """What ``verify=True`` trusts: ``$SSL_CERT_FILE`` / ``$SSL_CERT_DIR`` when set (as
    httpx and OpenSSL honour them), else certifi's bundle, else the system store."""
    cert_file, cert_dir = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cert_file:
        return _load(cafile=cert_file, what=f"SSL_CERT_FILE={cert_file!r}")
    if cert_dir:
        if not os.path.isdir(cert_dir):
            raise ConfigurationError(f"SSL_CERT_DIR={cert_dir!r} is not a directory")
        return _load(capath=cert_dir, what=f"SSL_CERT_DIR={cert_dir!r}")
    try:
        import certifi  # httpx depends on it
    except ImportError:  # pragma: no cover - httpx installs certifi
        return ssl.create_default_context()
    return _load(cafile=certifi.where(), what=f"certifi bundle {certifi.where()!r}")


def ssl_context_for(verify: VerifyArg) -> ssl.SSLContext:
    """The context for ``verify``: ``True`` is the default trust above; a path is a CA
    bundle (file or directory); a context must verify; disabling is refused."""
    if verify is True:
        return default_ssl_context()
    if verify is False:
        raise ConfigurationError(
            "TLS verification cannot be disabled; pass verify=<CA bundle path> or an SSLContext "
            "that trusts your gateway's certificate"
        )
    if isinstance(verify, ssl.SSLContext):
        if verify.verify_mode != ssl.CERT_REQUIRED or not verify.check_hostname:
            raise ConfigurationError(
                "TLS verification cannot be disabled: the SSLContext must have "
                "verify_mode=CERT_REQUIRED and check_hostname=True"
            )
        return verify
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return _load(capath=verify, what=f"verify={verify!r}")
        if not os.path.isfile(verify):
            raise ConfigurationError(f"verify= CA bundle not found: {verify!r}")
        return _load(cafile=verify, what=f"verify={verify!r}")
    raise TypeError(f"verify must be True, a CA bundle path or an ssl.SSLContext, not {verify!r}")


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def proxy_for(base_url: str, *, loopback: bool) -> str | None:
    """The proxy URL the environment sets for ``base_url`` (``HTTPS_PROXY``, ``ALL_PROXY``,
    ``NO_PROXY``, as urllib reads them); never for loopback."""
    if loopback:
        return None
    parts = urlsplit(base_url)
    proxies = urllib.request.getproxies_environment()
    url = proxies.get(parts.scheme) or proxies.get("all")
    bypass = getattr(urllib.request, "proxy_bypass_environment", None)
    if not url or (bypass is not None and bypass(parts.hostname or "", proxies)):
        return None
    return url if "://" in url else f"http://{url}"


def build_pool(
    base_url: str,
    ssl_context: ssl.SSLContext,
    *,
    max_connections: int,
    keepalive_expiry_s: float,
    loopback: bool,
) -> httpcore.ConnectionPool:
    """A pool whose sockets obey each request's deadline, through the environment's proxy
    for ``base_url`` if it sets one."""
    pool: dict[str, Any] = {
        "ssl_context": ssl_context,
        "max_connections": max_connections,
        "max_keepalive_connections": max_connections,
        "keepalive_expiry": keepalive_expiry_s,
        "network_backend": GuardedBackend(),
    }
    proxy = proxy_for(base_url, loopback=loopback)
    if proxy is None:
        return httpcore.ConnectionPool(**pool)
    scheme = urlsplit(proxy).scheme.lower()
    shown = _without_credentials(proxy)
    if scheme.startswith("socks"):
        if importlib.util.find_spec("socksio") is None:
            raise ConfigurationError(
                f"the environment routes {base_url} through the SOCKS proxy {shown} "
                "(ALL_PROXY/HTTPS_PROXY), which needs `pip install 'httpx[socks]'`; "
                "or unset the variable, or add the host to NO_PROXY"
            )
        return httpcore.SOCKSProxy(proxy_url=proxy, **pool)
    if scheme not in ("http", "https"):
        raise ConfigurationError(f"proxy {shown} has an unsupported scheme {scheme!r}")
    parts = urlsplit(proxy)
    auth = (parts.username or "", parts.password or "") if parts.username else None
    return httpcore.HTTPProxy(proxy_url=shown, proxy_auth=auth, **pool)
