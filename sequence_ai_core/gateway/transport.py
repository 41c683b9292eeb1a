"""HTTP to the gateway: one kept-alive connection pool, typed errors, never an httpx exception.

A new connection's TCP and TLS handshake is most of a bare request to the real gateway
(docs/performance.md, "Connections"), so a ``Transport`` keeps its connections alive and is
shared by every request of one Policy, including the engine's concurrent refills.

Each request has an absolute deadline (``timeout_s`` from its start): no socket operation
may outlast it (``netguard``), so nothing a server does keeps a worker, ``close()`` or the
interpreter alive past it, and ``close()`` aborts requests in flight at once. Bodies are
read within the limits of ``limits`` and parsed as sent; the key is redacted from what an
error quotes of them (``redaction``), never from the data a valid answer carries.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import ssl
import threading
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from .._version import __version__
from ..endpoints import GATEWAY, checked_url, is_loopback
from ..errors import InvalidResponse, SequencesError, Unavailable
from ..redaction import LOG_REDACTION, redact
from .bodies import BodyRefused, declared_length, decoded, parse_json, read_capped
from .connections import VerifyArg, build_pool, checked_timeout, ssl_context_for
from .error_map import error_for_answer
from .failures import deadline_passed, handle_closed, request_cancelled, untrusted_certificate
from .netguard import GuardedTransport, Scope

__all__ = ["DEFAULT_BASE_URL", "Transport", "VerifyArg", "resolve_base_url", "ssl_context_for"]

DEFAULT_BASE_URL = "https://api.generalsequences.com"
USER_AGENT = f"sequence-ai-ros/{__version__}"
REQUEST_ID_HEADER = "X-Seq-Request-Id"

#: Idle connections are kept this long. Refills come every ~0.8 s while a robot runs; a
#: longer idle gap (between episodes) pays one handshake, which is fine.
KEEPALIVE_EXPIRY_S = 30.0

#: A request's absolute deadline and the connect bound within it, unless connect() says: a
#: cold worker answers 503 at once, so 30 s covers a slow answer, not a model loading.
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
#: Connections kept per handle: the engine's refills in flight plus a catalogue lookup.
DEFAULT_MAX_CONNECTIONS = 8

#: Characters of why a body was refused kept in the error's message, after redaction.
REFUSAL_CHARS = 300

log = logging.getLogger(__name__)


_OUR_ID = re.compile(r"r-[0-9a-f]{8}")


def new_request_id() -> str:
    return f"r-{secrets.token_hex(4)}"


def resolve_base_url(base_url: str | None, *, allow_insecure_http: bool = False) -> str:
    """Argument, else ``$SEQUENCES_BASE_URL``, else the public gateway; checked and normalised."""
    url = (base_url or os.environ.get("SEQUENCES_BASE_URL") or DEFAULT_BASE_URL).strip()
    # Refused off loopback with or without a key: the key may come from the environment later.
    parts = checked_url(url, GATEWAY, sends_key=True, allow_insecure=allow_insecure_http)
    url = url.rstrip("/")
    # Paths below already start with /v1; a base URL copied from API docs often ends with it.
    return url[: -len("/v1")] if parts.path.rstrip("/").endswith("/v1") else url


def _describe_transport_error(exc: BaseException) -> str:
    kind = type(exc).__name__
    text = str(exc).strip()
    return f"{kind}: {text}" if text else kind


def _tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The certificate failure behind an httpx ``ConnectError``, if that is what it is."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ssl.SSLCertVerificationError) or (
            isinstance(seen, ssl.SSLError) and "CERTIFICATE_VERIFY_FAILED" in str(seen)
        ):
            return seen if isinstance(seen, ssl.SSLError) else None
        seen = seen.__cause__ or seen.__context__
    return None


class Transport:
    """A thread-safe JSON-over-HTTP client for one gateway and one key.

    ``timeout_s`` is each request's absolute deadline, from its start to the last byte of
    its answer; ``connect_timeout_s`` bounds connecting (within that deadline).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        verify: VerifyArg = True,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        self.timeout_s = checked_timeout(timeout_s, "timeout_s")
        self._connect_timeout_s = checked_timeout(connect_timeout_s, "connect_timeout_s")
        self.base_url = base_url
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            # No gzip/deflate: a compressed body is a decompression bomb waiting (bodies.py).
            "Accept-Encoding": "identity",
        }
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        pool = build_pool(
            base_url,
            ssl_context_for(verify),
            max_connections=max_connections,
            keepalive_expiry_s=KEEPALIVE_EXPIRY_S,
            loopback=is_loopback(urlsplit(base_url).hostname or ""),
        )
        self._client = httpx.Client(
            base_url=base_url,
            headers=headers,
            transport=GuardedTransport(pool),
            timeout=httpx.Timeout(self.timeout_s, connect=self._connect_timeout_s),
            follow_redirects=False,
            trust_env=False,  # proxies are read in connections.py; no .netrc credentials
        )
        self.has_key = bool(api_key)
        self._secret = api_key or ""
        if self._secret:
            LOG_REDACTION.add(self._secret)
        self._lock = threading.Lock()
        self._requests_sent = 0
        self._closed = False
        self._scopes: set[Scope] = set()

    def __repr__(self) -> str:
        return f"Transport(base_url={self.base_url!r}, key={'set' if self.has_key else 'none'})"

    @property
    def secret(self) -> str:
        """The key ("" without one), for redacting what an error quotes of an answer
        (``wire``); never put into any text."""
        return self._secret

    @property
    def requests_sent(self) -> int:
        with self._lock:
            return self._requests_sent

    @property
    def closed(self) -> bool:
        return self._closed

    def cancel_in_flight(self) -> int:
        """Abort every request under way (its caller gets ``SequencesError``); the handle
        stays usable. Returns how many were aborted."""
        with self._lock:
            scopes = list(self._scopes)
        for scope in scopes:
            scope.cancel()
        return len(scopes)

    def close(self) -> None:
        """Idempotent. Aborts requests in flight, then closes the connections."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.cancel_in_flight()
        self._client.close()
        if self._secret:
            LOG_REDACTION.discard(self._secret)

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Mapping[str, Any] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> tuple[Any, str, float]:
        """Send one request; return (parsed JSON body, request id, latency seconds).

        Raises a typed ``SequencesError`` for every failure, by ``timeout_s`` at the latest.
        """
        request_id = new_request_id()
        with self._lock:
            if self._closed:
                raise SequencesError("policy handle is closed", request_id=request_id)
            self._requests_sent += 1
        content = None if json_body is None else json.dumps(json_body, allow_nan=False)
        started = time.monotonic()
        scope = Scope(started + self.timeout_s)
        with self._lock:
            self._scopes.add(scope)
        failure: tuple[SequencesError, BaseException] | None = None
        try:
            with scope:
                status, headers, raw = self._exchange(method, path, content, params, request_id)
                self._check_in_step(scope, headers, request_id, status)
        except SequencesError:
            raise
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, OSError) as exc:
            failure = (self._failure(exc, scope, method, path, started, request_id), exc)
        except RuntimeError as exc:  # httpx raises this when the client was closed meanwhile
            if self._closed:
                raise SequencesError("policy handle is closed", request_id=request_id) from exc
            raise
        finally:
            with self._lock:
                self._scopes.discard(scope)
        if failure is not None:
            error, cause = failure
            if not self._quotes_secret(cause):
                raise error from cause
            raise error  # outside the handler: the cause quotes the key, so it is dropped
        latency = time.monotonic() - started
        log.debug("%s %s -> %d in %.3fs [%s]", method, path, status, latency, request_id)
        if not 200 <= status < 300:
            raise error_for_answer(status, headers, raw, request_id, self._secret)
        return self._decode_success(status, headers, raw, request_id), request_id, latency

    def _quotes_secret(self, exc: BaseException) -> bool:
        """Whether an exception chain quotes the key (h11 quotes bad header lines, which a
        server may fill with the Authorization header it received)."""
        seen: BaseException | None = exc
        for _ in range(16):
            if seen is None or not self._secret:
                return False
            if self._secret in repr(seen) or self._secret in str(seen):
                return True
            seen = seen.__cause__ or seen.__context__
        return False

    # ------------------------------------------------------------------ the exchange

    def _exchange(
        self,
        method: str,
        path: str,
        content: str | None,
        params: Mapping[str, str] | None,
        request_id: str,
    ) -> tuple[int, httpx.Headers, bytes | BodyRefused]:
        """Status, headers and the raw body (or why it was refused), read within the caps."""
        with self._client.stream(
            method,
            path,
            content=content,
            params=params,
            headers={REQUEST_ID_HEADER: request_id},
        ) as response:
            try:
                declared = declared_length(response.headers.get("content-length"))
                raw: bytes | BodyRefused = read_capped(response.iter_raw(), declared)
            except BodyRefused as refused:
                raw = refused
            return response.status_code, response.headers, raw

    def _check_in_step(
        self, scope: Scope, headers: httpx.Headers, request_id: str, status: int
    ) -> None:
        """An answer that needed no read after the request was written was buffered before
        the request existed; one naming another request id answers another request. Either
        way the connection is out of step: drop it and play nothing from it."""
        echoed = (headers.get(REQUEST_ID_HEADER) or "").strip()
        stale = scope.wrote and scope.reads_after_write == 0
        # only an id of our own format counts: a gateway may label answers with its own ids
        if stale or (_OUR_ID.fullmatch(echoed) and echoed != request_id):
            scope.poison()
            raise InvalidResponse(
                "the gateway's answer does not belong to this request (a kept-alive "
                "connection out of step); the connection was dropped",
                status=status,
                request_id=request_id,
            )

    def _failure(
        self,
        exc: BaseException,
        scope: Scope,
        method: str,
        path: str,
        started: float,
        request_id: str,
    ) -> SequencesError:
        if self._closed:  # aborted under an in-flight request
            return handle_closed(request_id)
        if scope.cancelled:
            return request_cancelled(request_id)
        latency = time.monotonic() - started
        described = redact(_describe_transport_error(exc), self._secret)
        tls = _tls_failure(exc)
        if tls is not None:
            why = redact(getattr(tls, "verify_message", "") or str(tls), self._secret)
            return untrusted_certificate(
                self.base_url, f"CERTIFICATE_VERIFY_FAILED: {why}", request_id
            )
        log.warning(
            "%s %s failed after %.3fs: %s [%s]", method, path, latency, described, request_id
        )
        if isinstance(exc, httpx.TimeoutException) and scope.remaining() <= 0:
            return deadline_passed(self.base_url, self.timeout_s, request_id)
        return Unavailable(
            f"gateway unreachable: {described}", warming=False, request_id=request_id
        )

    # ------------------------------------------------------------------ bodies

    def _decode_success(
        self, status: int, headers: httpx.Headers, raw: bytes | BodyRefused, request_id: str
    ) -> Any:
        """The body as the server sent it: a valid answer is parsed unredacted (a short key
        must not change it); only the text an error quotes is redacted, before it is cut."""

        def refused(why: object) -> InvalidResponse:
            return InvalidResponse(
                f"gateway answered HTTP {status} with a body that "
                f"{redact(str(why), self._secret)[:REFUSAL_CHARS]}",
                status=status,
                request_id=request_id,
            )

        # Raised outside the handlers: a BodyRefused may quote a header, key and all, and
        # would otherwise stay on the error as its __context__.
        if isinstance(raw, BodyRefused):
            raise refused(f"breaks a limit: {raw}")
        problem: str | None = None
        try:
            text = decoded(raw, headers.get("content-encoding")).decode("utf-8")
        except BodyRefused as exc:
            problem = f"breaks a limit: {exc}"
        except UnicodeDecodeError:
            problem = "is not UTF-8 text"
        if problem is not None:
            raise refused(problem)
        try:
            return parse_json(text)
        except BodyRefused as exc:
            problem = f"breaks a limit: {exc}"
        except (ValueError, RecursionError):  # RecursionError: absurdly nested JSON
            problem = "is not JSON"
        error = refused(problem)
        if problem == "is not JSON":
            error.body = redact(text, self._secret)[:500]
        raise error
