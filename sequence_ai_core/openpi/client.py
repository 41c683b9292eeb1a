"""Websocket connections to an openpi ``WebsocketPolicyServer``: a pool, deadlines, typed errors.

The server answers one request at a time per connection (it reads the next frame only
after sending the answer), so ``k`` requests in flight need ``k`` connections; the pool
opens up to ``max_connections`` and keeps them open between requests (each costs a TCP
and websocket handshake plus the server's metadata frame). The server runs ``infer``
inside its event loop, so requests on several connections queue behind each other rather
than run in parallel; the engine learns that from the latencies it measures.

Every operation has the request's absolute deadline: opening, sending (a watchdog shuts the
socket if a server stops reading) and receiving. ``close()`` and ``cancel_in_flight()``
shut the sockets under requests in flight, which end at once. Every failure becomes a
typed ``SequencesError`` in ``_typed`` (the one place they are mapped), redacted of the key.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import websockets
import websockets.exceptions
import websockets.sync.client
from websockets.protocol import State

from .._version import __version__
from ..errors import InvalidResponse, SequencesError, Unavailable
from ..gateway.transport import new_request_id
from ..limits import MAX_OPENPI_FRAME_BYTES
from ..redaction import LOG_REDACTION
from .codec import CodecError, unpackb
from .errors import Failure, ServerRaised, server_raised, typed_error

log = logging.getLogger(__name__)

USER_AGENT = f"sequence-ai-ros/{__version__}"
#: How long to wait for the close frame that follows a server's traceback frame.
CLOSE_WAIT_S = 0.5


@dataclass(eq=False)
class _Connection:
    ws: websockets.sync.client.ClientConnection
    metadata: dict[str, Any]

    def usable(self) -> bool:
        return self.ws.protocol.state is State.OPEN

    def abort(self) -> None:
        """Unblock whatever waits on this connection, from any thread."""
        with contextlib.suppress(OSError):
            self.ws.socket.shutdown(socket.SHUT_RDWR)

    def discard(self) -> None:
        self.abort()
        with contextlib.suppress(OSError):
            self.ws.socket.close()


@dataclass(eq=False)
class _Request:
    deadline: float
    connection: _Connection | None = None
    cancelled: bool = False
    timed_out: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class OpenpiClient:
    """A thread-safe pool of websocket connections to one openpi policy server."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        ssl_context: ssl.SSLContext | None,
        timeout_s: float,
        connect_timeout_s: float,
        max_connections: int,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        self.base_url = url
        self.timeout_s = timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._ssl = ssl_context
        self._secret = api_key or ""
        self._headers = {"Authorization": f"Api-Key {api_key}"} if api_key else {}
        if self._secret:
            LOG_REDACTION.add(self._secret)
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._idle: list[_Connection] = []
        self._active: set[_Request] = set()
        self._closed = False
        self._requests_sent = 0
        self._connections_opened = 0
        self.metadata: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"OpenpiClient(base_url={self.base_url!r}, key={'set' if self._secret else 'none'})"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        return self._ssl

    @property
    def requests_sent(self) -> int:
        with self._lock:
            return self._requests_sent

    @property
    def connections_opened(self) -> int:
        with self._lock:
            return self._connections_opened

    # ------------------------------------------------------------------ lifecycle

    def cancel_in_flight(self) -> int:
        """Abort every request under way (its caller gets ``SequencesError``)."""
        with self._lock:
            active = list(self._active)
        for request in active:
            request.cancelled = True
            if request.connection is not None:
                request.connection.abort()
        return len(active)

    def close(self) -> None:
        """Idempotent: aborts requests in flight, then closes every connection."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle, self._idle = self._idle, []
        self.cancel_in_flight()
        for connection in idle:
            connection.discard()
        if self._secret:
            LOG_REDACTION.discard(self._secret)

    # ------------------------------------------------------------------ requests

    def server_metadata(self) -> dict[str, Any]:
        """The metadata frame the server sent on connecting (opens a connection if none)."""
        request = self._begin()
        try:
            connection = self._take(request)
        except SequencesError:
            if request.connection is not None:
                request.connection.discard()
            raise
        except Exception as exc:
            if request.connection is not None:
                request.connection.discard()
            raise self._typed(exc, request, "") from None
        else:
            self._give_back(connection)
            return connection.metadata
        finally:
            self._end(request)

    def exchange(self, frame: bytes) -> tuple[Any, str, float]:
        """Send one observation frame; return (decoded answer, request id, latency s)."""
        request = self._begin()
        request_id = new_request_id()
        started = time.monotonic()
        with self._lock:
            self._requests_sent += 1
        try:
            connection = self._take(request)
            reply = self._send_and_receive(request, connection, frame)
            if isinstance(reply, str):
                raise self._server_raised(connection, reply, request_id)
            try:
                answer = unpackb(reply)
            except CodecError as exc:
                raise InvalidResponse(
                    f"invalid answer from openpi server: {exc}", request_id=request_id
                ) from None
            request.connection = None
            self._give_back(connection)
            return answer, request_id, time.monotonic() - started
        except SequencesError as exc:
            if request.connection is not None:
                request.connection.discard()
            exc.request_id = exc.request_id or request_id
            raise
        except BaseException as exc:
            error = self._typed(exc, request, request_id)
            if request.connection is not None:
                request.connection.discard()
            if self._secret and self._secret in f"{exc!r}{exc}":
                raise error from None
            raise error from exc
        finally:
            self._end(request)

    def _begin(self) -> _Request:
        request = _Request(time.monotonic() + self.timeout_s)
        with self._lock:
            if self._closed:
                raise SequencesError("policy handle is closed")
            self._active.add(request)
        if not self._slots.acquire(timeout=max(0.0, request.remaining())):
            with self._lock:
                self._active.discard(request)
            raise Unavailable(
                f"no free connection to {self.base_url} within the {self.timeout_s:g} s "
                "request deadline (raise max_connections above max_in_flight)",
                warming=False,
            )
        return request

    def _end(self, request: _Request) -> None:
        with self._lock:
            self._active.discard(request)
        self._slots.release()

    def _take(self, request: _Request) -> _Connection:
        """An idle open connection, else a new one (within the request's deadline)."""
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                break
            if connection.usable():
                request.connection = connection
                return connection
            connection.discard()  # the server closed it while idle
        request.connection = None
        timeout = min(self._connect_timeout_s, max(0.0, request.remaining()))
        ws = websockets.sync.client.connect(
            self.base_url,
            ssl=self._ssl,
            compression=None,
            additional_headers=self._headers or None,
            user_agent_header=USER_AGENT,
            open_timeout=timeout,
            ping_interval=None,  # the server's own pings are answered; deadlines bound the rest
            close_timeout=CLOSE_WAIT_S,
            max_size=MAX_OPENPI_FRAME_BYTES,
            **_no_proxy(),
        )
        connection = _Connection(ws, {})
        request.connection = connection
        with self._lock:
            self._connections_opened += 1
            if request.cancelled or self._closed:
                connection.discard()
                raise SequencesError("request aborted while connecting")
        first = ws.recv(timeout=max(0.0, request.remaining()))
        if isinstance(first, str):
            raise self._server_raised(connection, first, "")
        try:
            metadata = unpackb(first)
        except CodecError as exc:
            raise InvalidResponse(f"invalid metadata frame from openpi server: {exc}") from None
        if not isinstance(metadata, dict):
            raise InvalidResponse(
                f"openpi server's metadata frame is a {type(metadata).__name__}, not a map"
            )
        connection.metadata = {str(k): v for k, v in metadata.items()}
        self.metadata = connection.metadata
        return connection

    def _give_back(self, connection: _Connection) -> None:
        with self._lock:
            if not self._closed and connection.usable():
                self._idle.append(connection)
                return
        connection.discard()

    def _send_and_receive(
        self, request: _Request, connection: _Connection, frame: bytes
    ) -> str | bytes:
        def expire() -> None:
            request.timed_out = True
            connection.abort()

        watchdog = threading.Timer(max(0.0, request.remaining()), expire)
        watchdog.daemon = True
        watchdog.start()
        try:
            connection.ws.send(frame)
            return connection.ws.recv(timeout=max(0.0, request.remaining()))
        finally:
            watchdog.cancel()

    # ------------------------------------------------------------------ errors

    def _server_raised(self, connection: _Connection, text: str, request_id: str) -> ServerRaised:
        """A traceback frame: the server closes next (code 1011); the connection is done."""
        code: int | None = None
        with contextlib.suppress(Exception):
            connection.ws.recv(timeout=CLOSE_WAIT_S)
        with contextlib.suppress(Exception):
            code = connection.ws.close_code
        connection.discard()
        return server_raised(text, code, self._secret, request_id)

    def _typed(self, exc: BaseException, request: _Request, request_id: str) -> SequencesError:
        where = Failure(
            self.base_url,
            self.timeout_s,
            self._secret,
            request_id,
            closed=self._closed,
            cancelled=request.cancelled,
            timed_out=request.timed_out,
        )
        return typed_error(exc, where)


@functools.cache
def _no_proxy() -> dict[str, Any]:
    """websockets >= 15 reads proxy settings from the environment; a policy server on the
    robot's network is reached directly, as the gateway client reaches loopback."""
    if "proxy" in inspect.signature(websockets.sync.client.connect).parameters:
        return {"proxy": None}
    return {}


def health_url(url: str) -> str:
    parts = urlsplit(url)
    scheme = "https" if parts.scheme == "wss" else "http"
    return urlunsplit((scheme, parts.netloc, "/healthz", "", ""))


def check_health(
    url: str, *, ssl_context: ssl.SSLContext | None, timeout_s: float = 5.0
) -> tuple[int, float]:
    """``GET /healthz`` on the server's port: (HTTP status, seconds); typed errors."""
    started = time.monotonic()
    target = health_url(url)
    try:
        with httpx.Client(
            verify=ssl_context if ssl_context is not None else True,
            timeout=timeout_s,
            trust_env=False,
            follow_redirects=False,
        ) as client:
            status = client.get(target).status_code
    except httpx.HTTPError as exc:
        raise Unavailable(
            f"openpi server unreachable at {target}: {type(exc).__name__}", warming=False
        ) from None
    return status, time.monotonic() - started
