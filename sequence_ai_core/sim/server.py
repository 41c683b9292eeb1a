"""GatewaySimulator: a real HTTP/1.1 keep-alive server on loopback that speaks gateway v1.

Threads: one accept loop plus one daemon thread per TCP connection (the stdlib
``ThreadingHTTPServer`` model). ``stop()`` closes the listening socket and every open client
connection and joins all of those threads, so a test leaves no sockets or threads behind.

Latency model: each act request holds one of ``workers`` model slots (requests beyond that
queue) for ``latency_s * exp(jitter * Z)``, Z standard normal, i.e. lognormal with median
``latency_s`` and log-sigma ``jitter``: p95 = median * e^(1.645 jitter), p99 = median *
e^(2.326 jitter), so jitter 0.3 gives p99 ~ 2.0 x median (the right skew the real gateway
shows). ``ms_per_kb`` adds time per kB of request body (~16 ms/kB measured on the gateway).

Cold start: ``POST /v1/act`` answers 503 ``warming`` (body ``retry_after_s`` plus a
``Retry-After`` header, whole seconds rounded up) until ``cold_start_s`` after ``start()``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Any

import numpy as np

from ..types import FloatArray
from .catalogue import CATALOGUE, SimModel, find_model, reference_action
from .faults import Fault
from .responses import ERROR_SHAPES

log = logging.getLogger(__name__)

_POLL_S = 0.05


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The stdlib default backlog of 5 drops SYNs when a benchmark opens many connections at
    # once, which would show up as 1 s connect stalls that are not the gateway's doing.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], sim: GatewaySimulator) -> None:
        from .handler import GatewayHandler

        self.sim = sim
        super().__init__(address, GatewayHandler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = self.socket.accept()
        context = self.sim._ssl_context
        if context is not None:
            # The handshake runs on the connection's own thread (see handler.setup), so a slow
            # or broken client cannot stall the accept loop.
            sock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="sim-connection",
            daemon=True,
        )
        self.sim._track_thread(thread)
        thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("simulator connection ended with an error", exc_info=True)


class GatewaySimulator:
    """In-process simulated gateway. Use as a context manager or call start()/stop().

    Check order for ``POST /v1/act``: 411/413 (before the body is read) -> injected transport
    fault -> 401 -> 400 (not JSON) -> 404 (unknown model; full ids only, a short id gets a
    hint) -> 422 (observation or options) -> 503 warming -> 402 credit -> model slot.
    ``credit`` counts requests that got past those checks. ``received`` records every act
    request that passed auth and parsed as JSON, with its answer ``status`` and
    ``anchor_wall`` (the wall time step 0 is computed for). ``action_noise`` > 0 adds
    Gaussian noise seeded by the request's ``seed`` option, so a seed fixes the chunk.
    ``state_conditioned`` makes chunks start at the observed joint positions and gripper and
    follow the reference's motion from there, as a real policy predicts from the arm's state:
    a plan played late then yanks the arm back at every swap (see ``responses.chunk_values``).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = "sim-key",
        latency_s: float = 0.0,
        jitter: float = 0.0,
        cold_start_s: float = 0.0,
        connect_delay_s: float = 0.0,
        workers: int = 4,
        seed: int = 0,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        credit: int | None = None,
        max_body_bytes: int = 4_000_000,
        ms_per_kb: float = 0.0,
        models: Sequence[SimModel] | None = None,
        action_noise: float = 0.0,
        state_conditioned: bool = False,
        error_shape: str = "newer",
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if error_shape not in ERROR_SHAPES:
            raise ValueError(f"error_shape must be one of {ERROR_SHAPES}, got {error_shape!r}")
        #: ``"older"``: error bodies as the gateway sent them when the 0.1.0 client was
        #: released (``{"detail": {"status": "warming_up", ...}}``); see ``older_error_body``.
        self.error_shape = error_shape
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key go together")
        self.host = host
        self._port = port
        self._api_key = api_key
        self.cold_start_s = cold_start_s
        self.connect_delay_s = connect_delay_s
        self.workers = workers
        self.credit = credit
        self.max_body_bytes = max_body_bytes
        self.ms_per_kb = ms_per_kb
        #: Std-dev of seeded per-request noise added to chunks (0: exact reference).
        self.action_noise = action_noise
        self.state_conditioned = state_conditioned
        self.models: dict[str, SimModel] = {
            model.short_id: model
            for model in (models if models is not None else CATALOGUE.values())
        }
        self._latency = (latency_s, jitter)
        self._rng = np.random.default_rng(seed)
        self._ssl_context: ssl.SSLContext | None = None
        if tls_cert is not None and tls_key is not None:
            self._ssl_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self._ssl_context.load_cert_chain(tls_cert, tls_key)
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(workers)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._serve_thread: threading.Thread | None = None
        self._threads: list[threading.Thread] = []
        self._faults: deque[Fault] = deque()
        self._open: dict[int, socket.socket] = {}
        self._per_connection: list[int] = []
        self._counts: dict[str, int] = {"requests": 0, "act_requests": 0, "charged": 0}
        self._status_counts: dict[int, int] = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self._queued = 0
        self._max_queued = 0
        self._ready_at = 0.0
        self._responses = 0
        #: Every act request that passed auth and JSON parsing, in arrival order.
        self.received: list[dict[str, Any]] = []
        self.url = ""

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> GatewaySimulator:
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self.host, self._port), self)
        port = self._server.server_address[1]
        scheme = "https" if self._ssl_context is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"{scheme}://{host}:{port}"
        self._ready_at = time.monotonic() + self.cold_start_s
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _POLL_S},
            name="sim-accept",
            daemon=True,
        )
        self._serve_thread.start()
        log.info("gateway simulator listening on %s", self.url)
        return self

    def stop(self) -> None:
        """Close the listener and every client connection; join all threads. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        self.drop_connections()
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=5.0)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5.0)

    def __enter__(self) -> GatewaySimulator:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"GatewaySimulator(url={self.url!r}, models={len(self.models)})"

    # ----------------------------------------------------------------- control
    def inject(self, fault: Fault, *, times: int = 1) -> None:
        """Apply ``fault`` to the next ``times`` POST /v1/act requests (queued in order)."""
        with self._lock:
            self._faults.extend([fault] * times)

    def drop_connections(self) -> int:
        """Close every open client connection now, as a load balancer drops idle kept-alive
        connections; returns how many were open. The listener keeps accepting."""
        with self._lock:
            sockets = list(self._open.values())
        for sock in sockets:
            # socket.socket.shutdown directly: SSLSocket.shutdown would drop its SSL object
            # under a thread that may be reading from it.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        return len(sockets)

    def set_latency(self, latency_s: float, jitter: float = 0.0) -> None:
        with self._lock:
            self._latency = (latency_s, jitter)

    def reference(self, model: str, t_wall: float) -> FloatArray:
        """The action ``model`` outputs for wall time ``t_wall`` (without action_noise)."""
        entry = find_model(model)
        if entry is None:
            raise KeyError(model)
        return reference_action(entry, t_wall)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "connections": len(self._per_connection),
                "requests": self._counts["requests"],
                "act_requests": self._counts["act_requests"],
                "requests_per_connection": list(self._per_connection),
                "open_connections": len(self._open),
                "charged": self._counts["charged"],
                "credit_remaining": (
                    None if self.credit is None else max(0, self.credit - self._counts["charged"])
                ),
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
                "max_queued": self._max_queued,
                "faults_pending": len(self._faults),
                "status_counts": {str(k): v for k, v in sorted(self._status_counts.items())},
                "warming_remaining_s": round(max(0.0, self._ready_at - time.monotonic()), 3),
            }

    # ------------------------------------------------- used by the request handler
    def _track_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)

    def _open_connection(self, sock: socket.socket) -> int:
        with self._lock:
            conn_id = len(self._per_connection)
            self._per_connection.append(0)
            self._open[conn_id] = sock
            if self._stopping.is_set():
                # Accepted while stop() ran: stop() may have missed it, so end it here.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
            return conn_id

    def _close_connection(self, conn_id: int) -> None:
        with self._lock:
            self._open.pop(conn_id, None)

    def _count_request(self, conn_id: int, *, act: bool) -> None:
        with self._lock:
            self._counts["requests"] += 1
            self._per_connection[conn_id] += 1
            if act:
                self._counts["act_requests"] += 1

    def _count_status(self, status: int) -> None:
        with self._lock:
            self._status_counts[status] = self._status_counts.get(status, 0) + 1

    def _take_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def _key_ok(self, authorization: str | None) -> bool:
        if self._api_key is None:
            return True
        return authorization == f"Bearer {self._api_key}"

    def _warming_remaining_s(self) -> float:
        return max(0.0, self._ready_at - time.monotonic())

    def _reserve_credit(self) -> bool:
        with self._lock:
            if self.credit is not None and self._counts["charged"] >= self.credit:
                return False
            self._counts["charged"] += 1
            return True

    def _credit_remaining(self) -> int | None:
        with self._lock:
            return None if self.credit is None else max(0, self.credit - self._counts["charged"])

    def _next_response_id(self) -> str:
        with self._lock:
            self._responses += 1
            return f"act-{self._responses:08x}"

    def _sample_latency(self, body_bytes: int) -> float:
        with self._lock:
            median, jitter = self._latency
            factor = math.exp(jitter * float(self._rng.standard_normal())) if jitter > 0 else 1.0
        return median * factor + self.ms_per_kb * body_bytes / 1024.0 / 1000.0

    def _wait(self, seconds: float) -> bool:
        """Sleep unless stopping; True if the simulator is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    def _run_model(self, body_bytes: int) -> tuple[float, float] | None:
        """Hold a model slot for one sampled latency. Returns (inference_s, queue_s), or None
        if the simulator stopped meanwhile."""
        queued_at = time.monotonic()
        if not self._slots.acquire(blocking=False) and not self._queue_for_slot():
            return None
        queue_s = time.monotonic() - queued_at
        try:
            with self._lock:
                self._in_flight += 1
                self._max_in_flight = max(self._max_in_flight, self._in_flight)
            inference_s = self._sample_latency(body_bytes)
            if self._wait(inference_s):
                return None
            return inference_s, queue_s
        finally:
            with self._lock:
                self._in_flight -= 1
            self._slots.release()

    def _queue_for_slot(self) -> bool:
        """Wait for a free model slot; False if the simulator stopped meanwhile."""
        with self._lock:
            self._queued += 1
            self._max_queued = max(self._max_queued, self._queued)
        try:
            while not self._slots.acquire(timeout=_POLL_S):
                if self._stopping.is_set():
                    return False
            return True
        finally:
            with self._lock:
                self._queued -= 1
