"""A hostile gateway on loopback: raw sockets, so it can do what no well-formed HTTP server
does. It parses just enough HTTP/1.1 to read requests, serves a real catalogue (the
simulator's entries) and hands every ``POST /v1/act`` to a behaviour that writes raw bytes:
silence, a trickle, a second unsolicited answer, stacked compression, an oversized body, the
caller's Authorization header quoted back.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sequence_ai_sim import CATALOGUE

#: Property-based examples per hostile property (derandomized); docs/safety.md quotes the total.
HOSTILE_EXAMPLES = {"encodings": 60, "echoed_bodies": 120, "validate_verdicts": 40}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body or b"null")


def http_response(
    status: int,
    body: bytes | str | Any,
    headers: dict[str, str] | None = None,
    *,
    length: int | None = None,
) -> bytes:
    """Raw bytes of one response; ``body`` that is not bytes/str is sent as JSON."""
    if not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    data = body.encode() if isinstance(body, str) else body
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(data) if length is None else length}"]
    head += [f"{k}: {v}" for k, v in (headers or {"Content-Type": "application/json"}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + data


def chunk_body(model: str, *, steps: int | None = None, value: float = 0.0, **chunk: Any) -> Any:
    """A well-formed /v1/act answer for ``model`` (values all ``value``)."""
    entry = CATALOGUE[model]
    n = entry.action_horizon if steps is None else steps
    action_chunk = {
        "steps": [{"index": i, "values": [value] * entry.action_dim} for i in range(n)],
        "robot": entry.robot,
        "action_space": entry.action_space,
        "action_dim": entry.action_dim,
        "control_frequency_hz": entry.control_hz,
        **chunk,
    }
    return {"id": "hostile", "model": entry.id, "action_chunk": action_chunk}


def stacked_gzip(data: bytes, layers: int) -> bytes:
    for _ in range(layers):
        data = gzip.compress(data, compresslevel=9)
    return data


Behaviour = Callable[[Request, socket.socket, "HostileGateway"], None]


@dataclass
class HostileGateway:
    """``behaviour(request, sock, gateway)`` answers each POST /v1/act (or not at all).
    ``catalogue`` may be replaced by a behaviour of its own for GET /v1/models."""

    behaviour: Behaviour
    catalogue: Behaviour | None = None
    requests: list[Request] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, name="hostile-accept", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}"

    def __enter__(self) -> HostileGateway:
        self._acceptor.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._acceptor.join(5)
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
        for thread in self._threads:
            thread.join(5)
        self._server.close()

    def stopped(self) -> bool:
        return self._stop.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep unless the gateway is shutting down; True if it is."""
        return self._stop.wait(seconds)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.connections += 1
                self._sockets.append(sock)
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        buffer = b""
        sock.settimeout(0.2)
        while not self._stop.is_set():
            request, buffer = self._read_request(sock, buffer)
            if request is None:
                return
            self.requests.append(request)
            try:
                if request.method == "GET" and request.path.startswith("/v1/models"):
                    (self.catalogue or serve_catalogue)(request, sock, self)
                else:
                    self.behaviour(request, sock, self)
            except OSError:
                return

    def _read_request(self, sock: socket.socket, buffer: bytes) -> tuple[Request | None, bytes]:
        while b"\r\n\r\n" not in buffer:
            chunk = self._recv(sock)
            if chunk is None:
                return None, b""
            buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            chunk = self._recv(sock)
            if chunk is None:
                return None, b""
            rest += chunk
        return Request(method, path, headers, rest[:length]), rest[length:]

    def _recv(self, sock: socket.socket) -> bytes | None:
        while not self._stop.is_set():
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return None
            return chunk or None
        return None


def serve_catalogue(request: Request, sock: socket.socket, gateway: HostileGateway) -> None:
    entries = [model.catalogue_entry() for model in CATALOGUE.values()]
    sock.sendall(http_response(200, {"data": entries}))


def answer(body: Any, status: int = 200, **headers: str) -> Behaviour:
    """A behaviour answering every act request with ``body``."""

    def behave(request: Request, sock: socket.socket, gateway: HostileGateway) -> None:
        sock.sendall(http_response(status, body, {"Content-Type": "application/json", **headers}))

    return behave


def silent_after(good: int, model: str, body: Any = None) -> Behaviour:
    """Answers ``good`` act requests (with ``body``, else ``chunk_body(model)``), then reads
    every further one and never answers."""
    count = {"n": 0}
    answer = chunk_body(model) if body is None else body

    def behave(request: Request, sock: socket.socket, gateway: HostileGateway) -> None:
        count["n"] += 1
        if count["n"] <= good:
            sock.sendall(http_response(200, answer))
            return
        gateway.wait(3600)

    return behave


def trickle(payload: bytes, every_s: float) -> Behaviour:
    """Sends ``payload`` (a whole response) one byte every ``every_s`` seconds."""

    def behave(request: Request, sock: socket.socket, gateway: HostileGateway) -> None:
        for byte in payload:
            sock.sendall(bytes([byte]))
            if gateway.wait(every_s):
                return

    return behave


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)
