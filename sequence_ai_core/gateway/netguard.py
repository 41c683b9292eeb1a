"""Sockets under an absolute deadline: what keeps a hostile server from holding a thread.

httpx's timeouts are per operation. A body trickled one byte per read never times out, and a
worker stuck in such a read keeps ``close()`` and the interpreter waiting without bound. Here
every socket operation of a request gets the time left until that request's deadline as its
timeout, so a request ends by its deadline whatever the server does; ``Scope.cancel`` shuts
the request's sockets down, so a blocked read returns at once when the handle closes.

The same layer sees every read and write, which is how a desynchronised connection is found:
an answer that needed no read after the request was written was already buffered before the
request existed (a stale or unsolicited response on a kept-alive connection).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpcore
import httpx

_local = threading.local()


class Scope:
    """One request: its deadline, its sockets, whether it was cancelled."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.cancelled = False
        self.reads_after_write = 0
        self.wrote = False
        self._streams: list[GuardedStream] = []
        self._lock = threading.Lock()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def touch(self, stream: GuardedStream) -> None:
        with self._lock:
            if stream not in self._streams:
                self._streams.append(stream)
            cancelled = self.cancelled
        if cancelled:
            stream.abort()

    def cancel(self) -> None:
        """Called from another thread: abort every socket this request uses."""
        with self._lock:
            self.cancelled = True
            streams = list(self._streams)
        for stream in streams:
            stream.abort()

    def poison(self) -> None:
        """Never reuse this request's connections (their buffered bytes are not ours)."""
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.poisoned = True

    def __enter__(self) -> Scope:
        _local.scope = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        _local.scope = None


def current_scope() -> Scope | None:
    scope: Scope | None = getattr(_local, "scope", None)
    return scope


def _budget(timeout: float | None, error: type[Exception]) -> float | None:
    """The operation's timeout clamped to the request's deadline; raises once it passed."""
    scope = current_scope()
    if scope is None:
        return timeout
    if scope.cancelled:
        raise httpcore.ReadError("request cancelled: the policy handle was closed")
    remaining = scope.remaining()
    if remaining <= 0:
        raise error("request deadline passed")
    return remaining if timeout is None else min(timeout, remaining)


class GuardedStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner
        self.poisoned = False

    def _enter(self) -> Scope | None:
        scope = current_scope()
        if scope is not None:
            scope.touch(self)
        return scope

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        scope = self._enter()
        data = self._inner.read(max_bytes, _budget(timeout, httpcore.ReadTimeout))
        if scope is not None and data:
            scope.reads_after_write += 1
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        scope = self._enter()
        if scope is not None:
            scope.wrote, scope.reads_after_write = True, 0
        self._inner.write(buffer, _budget(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        self._enter()
        budget = _budget(timeout, httpcore.ConnectTimeout)
        return GuardedStream(self._inner.start_tls(ssl_context, server_hostname, budget))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable" and self.poisoned:
            return True  # the pool then treats the connection as dropped and closes it
        return self._inner.get_extra_info(info)

    def abort(self) -> None:
        """Shut the socket down under a blocked read or write (safe from another thread).
        The plain socket's shutdown is used on TLS sockets too: ``SSLSocket.shutdown`` would
        drop the TLS object under the reading thread."""
        sock = self._inner.get_extra_info("socket")
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


class GuardedBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        budget = _budget(timeout, httpcore.ConnectTimeout)
        stream = GuardedStream(
            self._inner.connect_tcp(host, port, budget, local_address, socket_options)
        )
        scope = current_scope()
        if scope is not None:
            scope.touch(stream)
        return stream

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not supported")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


# --------------------------------------------------------------------------- httpx glue


def _mapped(exc: Exception, request: httpx.Request) -> Exception:
    """httpcore's exception as httpx's class of the same name (httpx does this privately)."""
    cls = getattr(httpx, type(exc).__name__, None)
    if isinstance(cls, type) and issubclass(cls, httpx.TransportError):
        return cls(str(exc), request=request)
    return httpx.TransportError(f"{type(exc).__name__}: {exc}", request=request)


class _ResponseStream(httpx.SyncByteStream):
    def __init__(self, inner: Iterable[bytes], request: httpx.Request) -> None:
        self._inner = inner
        self._request = request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._inner
        except httpcore.TimeoutException as exc:
            raise _mapped(exc, self._request) from exc
        except httpcore.NetworkError as exc:
            raise _mapped(exc, self._request) from exc
        except httpcore.ProtocolError as exc:
            raise _mapped(exc, self._request) from exc

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport on an httpcore pool whose sockets obey the request's ``Scope``."""

    def __init__(self, pool: httpcore.ConnectionPool | httpcore.HTTPProxy) -> None:
        self._pool = pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.SyncByteStream):  # a sync Client's always is
            raise TypeError("GuardedTransport serves synchronous requests only")
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = self._pool.handle_request(core_request)
        except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError) as exc:
            raise _mapped(exc, request) from exc
        except httpcore.UnsupportedProtocol as exc:
            raise _mapped(exc, request) from exc
        if not isinstance(response.stream, Iterable):  # a sync pool's always is
            raise TypeError("GuardedTransport needs a synchronous connection pool")
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream, request),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()
