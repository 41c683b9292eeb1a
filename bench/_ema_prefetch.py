"""Strategy (b) of ``bench/continuity.py`` and ``bench/freshness.py``: one request in flight
started from an EMA-of-latency lead time, the new chunk replacing the old from its first step
(the predecessor client's behaviour, re-implemented as a player ``runner.drive`` drives)."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.stats import ActionRecord, PlaybackStats
from sequence_ai_core.playback.tick import Tick, TickKind
from sequence_ai_core.policy import Policy
from sequence_ai_core.types import FloatArray, Observation, Prediction


class EmaPrefetch:
    """Strategy (b): a buffer of steps played one per tick; one request at a time, started
    when the buffered time drops below an EMA of measured latency; an arriving chunk
    replaces the buffer and plays from its first step."""

    ALPHA = 0.3

    def __init__(self, policy: Policy, on_chunk: Callable[[Prediction], None]) -> None:
        self._policy = policy
        self._on_chunk = on_chunk
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-ema")
        self._future: Future[Prediction] | None = None
        self._started_at = 0.0
        self._buffer: deque[FloatArray] = deque()
        self._observed_at = 0.0
        self._ema: float | None = None
        self._new_chunk = False
        self._seq = 0
        self._first_tick: float | None = None
        self.stats = PlaybackStats()
        self._handed: ActionRecord | None = None
        self.period_s: float | None = None
        self.requests = 0

    def play(self, now: float) -> Tick:
        if self._first_tick is None:
            self._first_tick = now
        if self._future is not None and self._future.done():
            self._arrive(self._future.result(), now)
        return self._play(now)

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        buffered_s = len(self._buffer) * (self.period_s or 0.0)
        lead = self._ema if self._ema is not None else 0.0
        if self._future is None and (not self._buffer or buffered_s <= lead):
            observation = observe()
            if observation is not None:
                self._future = self._pool.submit(self._policy.fetch, observation, {})
                self._started_at = now
                self.requests += 1

    def _arrive(self, prediction: Prediction, now: float) -> None:
        latency = now - self._started_at
        self._ema = latency if self._ema is None else self._ema + self.ALPHA * (latency - self._ema)
        self.stats.latency.add(latency)
        chunk = prediction.action_chunk
        self.period_s = 1.0 / chunk.control_frequency_hz
        self._buffer = deque(chunk.steps)
        self._observed_at = self._started_at
        self._new_chunk = True
        self._seq += 1
        self._future = None
        self._on_chunk(prediction)

    def _play(self, now: float) -> Tick:
        if not self._buffer:
            kind: TickKind = "waiting" if self.stats.first_action_at is None else "underrun"
            if kind == "underrun":
                self.stats.underrun(now)
            return Tick(None, kind, 0, -1, new_chunk=False, staleness_s=math.nan, at=now)
        step = self._buffer.popleft()
        staleness = now - self._observed_at
        new, self._new_chunk = self._new_chunk, False
        self._handed = ActionRecord(
            now, step, staleness, self.period_s or 0.0, new_chunk=new, steady=False
        )
        return Tick(step.copy(), "action", self._seq, -1, new, staleness, at=now)

    def commit(self) -> None:
        if self._handed is not None:
            self.stats.commit(self._handed)
            self._handed = None

    def wait_any(self, timeout_s: float) -> bool:
        if self._future is None:
            return False
        try:
            self._future.exception(timeout=timeout_s)
        except FutureTimeout:
            return False
        return True

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        elapsed = time.monotonic() - (self._first_tick or time.monotonic())
        return self.stats.outcome(
            reason=reason,
            stopped_early=stopped_early,
            elapsed_s=elapsed,
            action_space=None,
            retries=0,
            requests=self.requests,
            error=None,
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
