"""Answers taken in: each finished request's chunk is placed on the plan, or discarded, and
each failure is retried or raised (``retries``).

The first chunk sets the run's shape (its size, action space and period); every later one
must match it. A chunk that lands while the arm holds (before the first action, after an
underrun) starts the timeline afresh; the rest continue it (``plan.ChunkPlan.add``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import CancelledError

from ..errors import InvalidRequest, InvalidResponse, SequencesError
from ..types import ActionChunk, Prediction
from .chunk_gate import raise_checks_own
from .engine_config import EngineConfig
from .inflight import InFlight, Request
from .journal import Journal
from .load import LoadMonitor
from .plan import ChunkPlan
from .ready import ReadyChunk
from .retries import RetryPolicy
from .schedule import RefillSchedule
from .stats import SampleWindow
from .timing import RefillTiming


class Arrivals:
    """Takes in the engine's finished requests (``collect``); keeps the run's shape."""

    def __init__(
        self,
        config: EngineConfig,
        plan: ChunkPlan,
        requests: InFlight,
        schedule: RefillSchedule,
        timing: RefillTiming,
        load: LoadMonitor,
        retry: RetryPolicy,
        latency: SampleWindow,
        journal: Journal,
        on_chunk: Callable[[Prediction], None] | None,
    ) -> None:
        self._config = config
        self._plan = plan
        self._requests = requests
        self._schedule = schedule
        self._timing = timing
        self._load = load
        self._retry = retry
        self._latency = latency
        self._journal = journal
        self._on_chunk = on_chunk
        #: Chunks placed on the plan (the last one's ``seq``), and chunks that came too late.
        self.accepted = 0
        self.discarded = 0
        #: The run's shape, set by its first chunk; the period is the config's until then.
        self.action_dim: int | None = None
        self.action_space: str | None = None
        self.period_s: float | None = config.period_s

    def collect(
        self, now: float, *, started: bool, playing: bool, first_tick_at: float | None
    ) -> None:
        """Take in every request that finished. ``started``: an action was played;
        ``playing``: the plan has not run out since (the engine's phase)."""
        if not self._requests.arrived:  # most ticks have nothing to collect
            return
        self._schedule.changed()
        done = self._requests.done()
        if not done:
            return
        # the arm holds only before the first action or after an underrun: a chunk landing
        # on the tick the plan runs out continues the timeline
        holding = not playing and self._plan.advance_to(now) is None
        for request in done:
            self._requests.remove(request)
            raise_checks_own(request.future)  # the caller's bug, not a failed refill
            try:
                ready = request.future.result()
            except CancelledError:
                continue
            except SequencesError as exc:
                self._on_failure(exc, now, started=started, first_tick_at=first_tick_at)
                continue
            except ValueError as exc:  # the client refused the observation before sending
                raise InvalidRequest(f"observation not sent: {exc}") from exc
            if self._accept(request, ready, now, holding=holding):
                holding = False

    def _accept(self, request: Request, ready: ReadyChunk, now: float, *, holding: bool) -> bool:
        prediction = ready.prediction
        chunk = prediction.action_chunk
        period = self._check_shape(chunk, ready.period_s)
        latency = now - request.observed_at
        self._timing.add(latency)
        self._latency.add(latency)
        backoffs = self._load.backoffs
        self._load.refill(latency, prediction.perf, period)
        self._note_backoff(now, backoffs)
        self._schedule.covers_s = len(chunk) * period
        if not holding:  # with few samples the target uses the slowest: safe to start early
            self._plan.adapt_lag(self._schedule.lag_target(period, self.action_space), period)
        planned = self._plan.add(
            ready,
            seq=self.accepted + 1,
            observed_at=request.observed_at,
            period_s=period,
            now=now,
            holding=holding,
            restart=not self._requests,
        )
        journal = self._journal
        if planned is None:
            self.discarded += 1
            journal.event(now, "discarded", {"request": request.number, "latency_s": latency})
            return False
        self.accepted += 1
        grippers = self._config.gripper_indices(chunk.action_dim)
        journal.chunk(
            now, request.number, self.accepted, prediction, request.observed_at, planned.anchor,
            period, grippers,
        )  # fmt: skip
        if self._on_chunk is not None:
            self._on_chunk(prediction)
        return True

    def _note_backoff(self, now: float, backoffs_before: int) -> None:
        if self._load.backoffs > backoffs_before:
            self._journal.event(now, "backoff", {"limit": self._load.limit})

    def _check_shape(self, chunk: ActionChunk, period: float) -> float:
        """The chunk's size and space against the run's (its steps were checked on the
        worker, ``ready.prepare``)."""
        if self.action_dim is None:
            self.action_dim, self.action_space, self.period_s = (
                chunk.action_dim,
                chunk.action_space,
                period,
            )
        elif (chunk.action_dim, chunk.action_space) != (self.action_dim, self.action_space):
            raise InvalidResponse(
                f"chunk is {chunk.action_space} x {chunk.action_dim}, earlier chunks of this "
                f"run were {self.action_space} x {self.action_dim}"
            )
        return period

    def _on_failure(
        self, exc: SequencesError, now: float, *, started: bool, first_tick_at: float | None
    ) -> None:
        # a chunk accepted earlier in this same collection has not played yet, but it is a plan
        plan_end = self._plan.end(now) if started or self.accepted > 0 else now
        backoffs = self._load.backoffs
        self._retry.on_failure(
            exc, now, started=started, first_tick_at=first_tick_at, plan_end=plan_end
        )  # raises the error that ends the episode; returning means it is retried
        self._journal.event(now, "retry", {"error": type(exc).__name__})
        self._note_backoff(now, backoffs)
