"""What every connection of the simulator shares: settings, counters, faults, request log.

``SimSettings`` is frozen, so any thread may read it. ``SimState`` holds everything that
changes while the simulator serves, behind one lock; the request handler and the
``GatewaySimulator`` facade touch it only through its public methods, each of which takes
the lock for its whole read-modify-write (``test/sim/test_sim_concurrency.py`` hammers them from
many threads). Model slots are a queue of their own (``slots``): a request waits in it for
seconds, and nothing else may wait while holding the lock.

Latency model: each act request holds one of ``workers`` model slots (requests beyond that
queue) for ``latency_s * exp(jitter * Z)``, Z standard normal, i.e. lognormal with median
``latency_s`` and log-sigma ``jitter``: p95 = median * e^(1.645 jitter), p99 = median *
e^(2.326 jitter), so jitter 0.3 gives p99 ~ 2.0 x median (the right skew the real gateway
shows). ``ms_per_kb`` adds time per kB of request body, as the real gateway does
(docs/performance.md, "Payload").
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .catalogue import SimModel
from .disagreement import ChunkDraw, Disagreement, draw, draw_key
from .faults import Fault
from .slots import FifoSlots

#: How often a request queued for a model slot checks whether the simulator is stopping.
POLL_S = 0.05


@dataclass(frozen=True)
class SimSettings:
    """The simulator's fixed configuration (see ``GatewaySimulator`` for each field)."""

    models: Mapping[str, SimModel]
    api_key: str | None = field(default="sim-key", repr=False)
    cold_start_s: float = 0.0
    connect_delay_s: float = 0.0
    workers: int = 4
    credit: int | None = None
    max_body_bytes: int = 4_000_000
    ms_per_kb: float = 0.0
    action_noise: float = 0.0
    state_conditioned: bool = False
    error_shape: str = "both"
    disagreement: Disagreement = field(default_factory=Disagreement)
    disagreement_seed: int = 0

    def key_ok(self, authorization: str | None) -> bool:
        if self.api_key is None:
            return True
        return authorization == f"Bearer {self.api_key}"


class SimState:
    """The simulator's mutable state under one lock; every method is safe from any thread."""

    def __init__(self, settings: SimSettings, *, latency_s: float, jitter: float, seed: int):
        self.settings = settings
        self._lock = threading.Lock()
        self._slots = FifoSlots(settings.workers)
        self._stopping = threading.Event()
        self._latency = (latency_s, jitter)
        self._rng = np.random.default_rng(seed)
        self._threads: list[threading.Thread] = []
        self._faults: deque[Fault] = deque()
        self._open: dict[int, socket.socket] = {}
        self._per_connection: list[int] = []
        self._counts: dict[str, int] = {"requests": 0, "act_requests": 0, "charged": 0}
        self._status_counts: dict[int, int] = {}
        self._in_flight = 0
        self._max_in_flight = 0
        self._ready_at = 0.0
        self._responses = 0
        # Keyed by arrival serial, not by position, so clear_received() between a request's
        # arrival and its answer cannot make the answer land on another request's record.
        self._received: dict[int, dict[str, Any]] = {}
        self._arrivals = 0
        self._chunks_drawn = 0

    # ----------------------------------------------------------------- lifecycle
    def begin(self) -> None:
        """Serving starts now: the cold start counts from here."""
        with self._lock:
            self._stopping.clear()
            self._ready_at = time.monotonic() + self.settings.cold_start_s

    def end(self) -> None:
        """Serving stops: waits and queued requests give up."""
        self._stopping.set()

    def wait(self, seconds: float) -> bool:
        """Sleep unless stopping; True if the simulator is stopping."""
        return self._stopping.wait(seconds) if seconds > 0 else self._stopping.is_set()

    def warming_remaining_s(self) -> float:
        with self._lock:
            return max(0.0, self._ready_at - time.monotonic())

    # ----------------------------------------------------------------- connections
    def track_thread(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)

    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return list(self._threads)

    def open_connection(self, sock: socket.socket) -> int:
        """Register a client connection; returns its id (0, 1, ... in accept order)."""
        with self._lock:
            conn_id = len(self._per_connection)
            self._per_connection.append(0)
            self._open[conn_id] = sock
            if self._stopping.is_set():
                # Accepted while stop() ran: stop() may have missed it, so end it here.
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)
            return conn_id

    def close_connection(self, conn_id: int) -> None:
        with self._lock:
            self._open.pop(conn_id, None)

    def open_sockets(self) -> list[socket.socket]:
        with self._lock:
            return list(self._open.values())

    # ----------------------------------------------------------------- counting
    def count_request(self, conn_id: int, *, act: bool) -> None:
        with self._lock:
            self._counts["requests"] += 1
            self._per_connection[conn_id] += 1
            if act:
                self._counts["act_requests"] += 1

    def count_status(self, status: int) -> None:
        with self._lock:
            self._status_counts[status] = self._status_counts.get(status, 0) + 1

    def next_response_id(self) -> str:
        with self._lock:
            self._responses += 1
            return f"act-{self._responses:08x}"

    # ----------------------------------------------------------------- faults
    def add_faults(self, fault: Fault, times: int) -> None:
        with self._lock:
            self._faults.extend([fault] * times)

    def take_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    # ----------------------------------------------------------------- request log
    def record(self, entry: Mapping[str, Any]) -> int:
        """Append an act request to the log (a copy of ``entry``); returns its serial."""
        with self._lock:
            self._arrivals += 1
            self._received[self._arrivals] = dict(entry)
            return self._arrivals

    def update_record(self, serial: int, **fields: Any) -> None:
        """Add what was decided about a logged request (its ``status``, ``anchor_wall``)."""
        with self._lock:
            entry = self._received.get(serial)  # None if the log was cleared meanwhile
            if entry is not None:
                entry.update(fields)

    def received(self) -> tuple[dict[str, Any], ...]:
        """A snapshot of the log in arrival order: copies, so a reader never sees a record
        change under it."""
        with self._lock:
            return tuple(dict(entry) for entry in self._received.values())

    def clear_received(self) -> None:
        with self._lock:
            self._received.clear()

    # ----------------------------------------------------------------- credit
    def reserve_credit(self) -> bool:
        with self._lock:
            limit = self.settings.credit
            if limit is not None and self._counts["charged"] >= limit:
                return False
            self._counts["charged"] += 1
            return True

    def credit_remaining(self) -> int | None:
        with self._lock:
            return self._credit_remaining()

    def _credit_remaining(self) -> int | None:
        limit = self.settings.credit
        return None if limit is None else max(0, limit - self._counts["charged"])

    # ----------------------------------------------------------------- model time
    def set_latency(self, latency_s: float, jitter: float = 0.0) -> None:
        with self._lock:
            self._latency = (latency_s, jitter)

    def sample_latency(self, body_bytes: int) -> float:
        with self._lock:
            median, jitter = self._latency
            factor = math.exp(jitter * float(self._rng.standard_normal())) if jitter > 0 else 1.0
        return median * factor + self.settings.ms_per_kb * body_bytes / 1024.0 / 1000.0

    def run_model(self, body_bytes: int) -> tuple[float, float] | None:
        """Hold a model slot for one sampled latency. Returns (inference_s, queue_s), or None
        if the simulator stopped meanwhile."""
        queued_at = time.monotonic()
        if not self._slots.take(self._stopping, POLL_S):
            return None
        queue_s = time.monotonic() - queued_at
        try:
            with self._lock:
                self._in_flight += 1
                self._max_in_flight = max(self._max_in_flight, self._in_flight)
            inference_s = self.sample_latency(body_bytes)
            if self.wait(inference_s):
                return None
            return inference_s, queue_s
        finally:
            with self._lock:
                self._in_flight -= 1
            self._slots.give_back()

    # ----------------------------------------------------------------- disagreement
    def draw_chunk(
        self, model: SimModel, anchor_wall: float, request_seed: int | None
    ) -> ChunkDraw | None:
        """This chunk's disagreement draw, or None when chunks do not disagree. Called once
        per chunk as its computation starts, so the counter follows arrival order."""
        settings = self.settings
        with self._lock:
            counter = self._chunks_drawn
            self._chunks_drawn += 1
        if settings.disagreement.off:
            return None
        key = draw_key(settings.disagreement_seed, request_seed, anchor_wall, counter)
        return draw(settings.disagreement, model, key)

    # ----------------------------------------------------------------- reading
    def stats(self) -> dict[str, Any]:
        """All counters, read in one critical section so they agree with one another."""
        with self._lock:
            return {
                "connections": len(self._per_connection),
                "requests": self._counts["requests"],
                "act_requests": self._counts["act_requests"],
                "requests_per_connection": list(self._per_connection),
                "open_connections": len(self._open),
                "charged": self._counts["charged"],
                "credit_remaining": self._credit_remaining(),
                "in_flight": self._in_flight,
                "max_in_flight": self._max_in_flight,
                "max_queued": self._slots.max_waiting,
                "faults_pending": len(self._faults),
                "status_counts": {str(k): v for k, v in sorted(self._status_counts.items())},
                "warming_remaining_s": round(max(0.0, self._ready_at - time.monotonic()), 3),
            }
