"""HTTP to the gateway: one kept-alive connection pool, typed errors, never an httpx exception.

Connection setup costs ~185 ms of TCP+TLS handshake per call on the real gateway (60 % of a
bare request), so a ``Transport`` keeps its connections alive and is shared by every request
of one Policy, including the engine's concurrent refills.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import secrets
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from ._version import __version__
from .errors import InvalidResponse, SequencesError, Unavailable, error_from_response

DEFAULT_BASE_URL = "https://api.generalsequences.com"
USER_AGENT = f"sequence-ai-ros/{__version__}"
REQUEST_ID_HEADER = "X-Seq-Request-Id"

#: Idle connections are kept this long. Refills come every ~0.8 s while a robot runs; a
#: longer idle gap (between episodes) pays one handshake, which is fine.
KEEPALIVE_EXPIRY_S = 30.0

VerifyArg = bool | str | ssl.SSLContext

log = logging.getLogger(__name__)


def new_request_id() -> str:
    return f"r-{secrets.token_hex(4)}"


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(
        ".localhost"
    ):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_base_url(base_url: str | None, *, allow_insecure_http: bool = False) -> str:
    """Argument, else ``$SEQUENCES_BASE_URL``, else the public gateway; checked and normalised."""
    url = (base_url or os.environ.get("SEQUENCES_BASE_URL") or DEFAULT_BASE_URL).strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base URL must be http(s)://host[:port][/path], got {url!r}")
    if parts.username or parts.password:
        raise ValueError("base URL must not carry credentials; pass api_key= instead")
    if parts.scheme == "http" and not allow_insecure_http and not _is_loopback(parts.hostname):
        raise ValueError(
            f"refusing plain http:// to non-loopback host {parts.hostname!r}: the API key "
            "would travel unencrypted; use https:// or pass allow_insecure_http=True"
        )
    url = url.rstrip("/")
    # Paths below already start with /v1; a base URL copied from API docs often ends with it.
    return url[: -len("/v1")] if parts.path.rstrip("/").endswith("/v1") else url


def ssl_context_for(verify: VerifyArg) -> ssl.SSLContext | bool:
    """What httpx gets for ``verify``. ``True`` stays ``True`` so httpx keeps honouring
    ``SSL_CERT_FILE``/``SSL_CERT_DIR``; a path becomes a context; disabling is refused."""
    if verify is True:
        return True
    if verify is False:
        raise ValueError(
            "TLS verification cannot be disabled; pass verify=<CA bundle path> or an SSLContext "
            "that trusts your gateway's certificate"
        )
    if isinstance(verify, ssl.SSLContext):
        if verify.verify_mode != ssl.CERT_REQUIRED or not verify.check_hostname:
            raise ValueError(
                "TLS verification cannot be disabled: the SSLContext must have "
                "verify_mode=CERT_REQUIRED and check_hostname=True"
            )
        return verify
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        if not os.path.isfile(verify):
            raise ValueError(f"verify= CA bundle not found: {verify!r}")
        return ssl.create_default_context(cafile=verify)
    raise TypeError(f"verify must be True, a CA bundle path or an ssl.SSLContext, not {verify!r}")


def _describe_transport_error(exc: BaseException) -> str:
    kind = type(exc).__name__
    text = str(exc).strip()
    return f"{kind}: {text}" if text else kind


class Transport:
    """A thread-safe JSON-over-HTTP client for one gateway and one key."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        verify: VerifyArg = True,
        max_connections: int = 8,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        if not timeout_s > 0 or not connect_timeout_s > 0:
            raise ValueError("timeout_s and connect_timeout_s must be > 0")
        self.base_url = base_url
        headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            base_url=base_url,
            headers=headers,
            verify=ssl_context_for(verify),
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
                keepalive_expiry=KEEPALIVE_EXPIRY_S,
            ),
            follow_redirects=False,
        )
        self.has_key = bool(api_key)
        self._secret = api_key or ""
        self._lock = threading.Lock()
        self._requests_sent = 0
        self._closed = False

    def __repr__(self) -> str:
        return f"Transport(base_url={self.base_url!r}, key={'set' if self.has_key else 'none'})"

    @property
    def requests_sent(self) -> int:
        with self._lock:
            return self._requests_sent

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> tuple[Any, str, float]:
        """Send one request; return (parsed JSON body, request id, latency seconds).

        Raises a typed ``SequencesError`` for every failure; a 2xx body that is not JSON
        raises ``InvalidResponse`` via ``decode_json``.
        """
        request_id = new_request_id()
        with self._lock:
            if self._closed:
                raise SequencesError("policy handle is closed", request_id=request_id)
            self._requests_sent += 1
        content = None if json_body is None else json.dumps(json_body, allow_nan=False)
        started = time.monotonic()
        try:
            response = self._client.request(
                method,
                path,
                content=content,
                params=params,
                headers={REQUEST_ID_HEADER: request_id},
            )
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError) as exc:
            if self._closed:  # closed under an in-flight request: say so, not "unreachable"
                raise SequencesError("policy handle is closed", request_id=request_id) from exc
            latency = time.monotonic() - started
            log.warning(
                "%s %s failed after %.3fs: %s [%s]",
                method,
                path,
                latency,
                _describe_transport_error(exc),
                request_id,
            )
            raise Unavailable(
                f"gateway unreachable: {_describe_transport_error(exc)}",
                warming=False,
                request_id=request_id,
            ) from exc
        except RuntimeError as exc:  # httpx raises this when the client was closed meanwhile
            if self._closed:
                raise SequencesError("policy handle is closed", request_id=request_id) from exc
            raise
        latency = time.monotonic() - started
        log.debug(
            "%s %s -> %d in %.3fs [%s]", method, path, response.status_code, latency, request_id
        )
        if not response.is_success:
            raise _typed_error(response, request_id, secret=self._secret)
        return decode_json(response, request_id), request_id, latency


def _redacted(value: Any, secret: str) -> Any:
    """``value`` with every occurrence of ``secret`` in its strings replaced by ``***``."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, "***")
    if isinstance(value, list):
        return [_redacted(item, secret) for item in value]
    if isinstance(value, dict):
        return {key: _redacted(item, secret) for key, item in value.items()}
    return value


def _typed_error(response: httpx.Response, request_id: str, *, secret: str = "") -> SequencesError:
    body = _error_body(response)
    try:
        # A gateway may quote the key it refused; it must not travel on into logs and tracebacks.
        body = _redacted(body, secret)
        return error_from_response(
            response.status_code, body, headers=response.headers, request_id=request_id
        )
    except Exception:  # a hostile error body must still end as a typed error
        log.warning("unreadable error body for HTTP %d [%s]", response.status_code, request_id)
        return SequencesError(
            f"gateway answered HTTP {response.status_code}",
            status=response.status_code,
            body=body,
            request_id=request_id,
        )


def _error_body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):  # includes JSONDecodeError, UnicodeDecodeError
        return response.text[:2000]


def decode_json(response: httpx.Response, request_id: str) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly nested JSON
        raise InvalidResponse(
            f"gateway answered HTTP {response.status_code} with a body that is not JSON",
            status=response.status_code,
            body=response.text[:500],
            request_id=request_id,
        ) from exc
