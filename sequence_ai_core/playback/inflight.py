"""The engine's requests in flight: each on a worker thread, with the time it observed.

The engine decides when a request is due (``timing``, ``load``); this holds the requests
once started, says when one has completed, and cancels them on close. The workers build the
request (images included) and check the answer (``plan.prepare``), so a tick only plays it.
A source that wants the plan's prefix (``source.takes_planned``) gets the one computed at
the request's tick with it; any other is called with the observation and options alone.
A caller's check of whole chunks (``chunk_gate``) runs on the worker too, after the checks.

A request with images waits ``ENCODE_AFTER_S`` on its worker before it builds its body:
drivers start a request right after the tick's command went out, and on a small machine
encoding the images at once competed with that command's delivery to the arm's driver
(docs/performance.md, "Measured on real rclpy"). The wait counts in the refill latency the
engine plans with.
"""

from __future__ import annotations

import functools
import math
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass

from ..types import Observation
from .chunk_gate import ChunkCheck, ChunkGate
from .engine_config import EngineConfig
from .ready import ReadyChunk, prepare
from .source import ChunkSource, PlannedPrefix, takes_planned

#: Seconds between a request with images being handed to its worker and its body being built.
ENCODE_AFTER_S = 0.002


@dataclass
class Request:
    future: Future[ReadyChunk]
    observed_at: float
    #: 1-based, in the order requests started (a recording names chunks by it).
    number: int = 0


class InFlight:
    """``executor`` runs the requests (default: ``config.max_in_flight`` threads, created on
    the first request); one given is the caller's to shut down. ``check`` is the caller's
    check of whole chunks (``chunk_gate``), if any."""

    def __init__(
        self,
        source: ChunkSource,
        config: EngineConfig,
        executor: Executor | None,
        check: ChunkCheck | None = None,
    ) -> None:
        self._source = source
        #: The source conditions on the plan (real-time chunking): the engine computes the
        #: prefix only then, since it costs the control thread a copy of the planned steps.
        self.wants_planned = takes_planned(source)
        self._options = dict(config.options)
        self._control_hz = config.control_hz
        self._workers = config.max_in_flight
        self._executor = executor
        self._owns_executor = executor is None
        self._check = check
        self._check_timeout_s = config.chunk_validator_timeout_s
        self._gate: ChunkGate | None = None
        self.requests: list[Request] = []
        #: Requests a takeover left behind (``abandon``): their answers are never read.
        self._abandoned: list[Future[ReadyChunk]] = []
        self.started = 0
        self.last_start_at = -math.inf
        #: A request completed since the last ``done()``: set by the workers, a plain store
        #: (atomic under the GIL), so most ticks check one flag.
        self.arrived = False

    def __len__(self) -> int:
        return len(self.requests)

    def start(
        self, observation: Observation, now: float, planned: PlannedPrefix | None = None
    ) -> Request:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self._workers, thread_name_prefix="sequence-ai-refill"
            )
        if self._check is not None and self._gate is None:
            self._gate = ChunkGate(self._check, self._check_timeout_s)
        # the task still takes the observation alone, as executors given by callers expect
        task = functools.partial(self._fetch, planned=planned)
        future = self._executor.submit(task, observation)
        future.add_done_callback(self._note_arrival)
        self.started += 1
        request = Request(future, now, self.started)
        self.requests.append(request)
        self.last_start_at = now
        return request

    def done(self) -> list[Request]:
        """The completed requests, oldest first (still listed until ``remove``d)."""
        self.arrived = False
        return [r for r in self.requests if r.future.done()]

    def remove(self, request: Request) -> None:
        self.requests.remove(request)

    def abandon(self) -> int:
        """A person took the arm: no request in flight may play (the arm will be elsewhere).
        One still queued is cancelled; one under way ends on its own, bounded by its
        deadline, and its answer is dropped. Returns how many were in flight."""
        count = len(self.requests)
        for request in self.requests:
            request.future.cancel()
        self._abandoned = [f for f in self._abandoned if not f.done()]
        self._abandoned += [r.future for r in self.requests if not r.future.done()]
        self.requests.clear()
        return count

    def wait_any(self, timeout_s: float) -> bool:
        pending = [r.future for r in self.requests]
        if not pending:
            return False
        done, _ = wait_futures(pending, timeout=max(0.0, timeout_s), return_when=FIRST_COMPLETED)
        return bool(done)

    def wait_idle(self, timeout_s: float) -> bool:
        pending = [r.future for r in self.requests] + self._abandoned
        _, not_done = wait_futures(pending, timeout=max(0.0, timeout_s))
        return not not_done

    def close(self, *, wait: bool) -> None:
        if self._gate is not None:  # first: no worker then waits on a check
            self._gate.close()
        for request in self.requests:
            request.future.cancel()
        self.requests.clear()
        self._abandoned.clear()
        if self._executor is not None and self._owns_executor:
            self._executor.shutdown(wait=wait, cancel_futures=True)
        self._executor = None

    def _fetch(self, observation: Observation, *, planned: PlannedPrefix | None) -> ReadyChunk:
        """On a worker: the request (its body, images included, is built there) and the
        chunk's copy and checks, the caller's check last, so that the control thread only
        plays it."""
        source = self._source
        if observation.images:  # the command just sent is still on its way (module docs)
            time.sleep(ENCODE_AFTER_S)
        if planned is not None and takes_planned(source):
            prediction = source.fetch(observation, self._options, planned=planned)
        else:
            prediction = source.fetch(observation, self._options)
        prepared = prepare(prediction, self._control_hz)
        if self._gate is not None:  # its time counts in the refill latency, as it should
            self._gate.admit(prediction.action_chunk, observation)
        return prepared

    def _note_arrival(self, future: Future[ReadyChunk]) -> None:
        self.arrived = True
