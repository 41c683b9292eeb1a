"""The playback engine: keeps a time-indexed plan of action chunks full while the arm moves.

One engine, two drivers: ``Policy.run()`` (``runner.run_policy``) and the ROS node's timer
both call ``tick(now, observe)`` once per control period, through one ``episode.Episode``
that counts what went out (``commit``) and holds on every stop. ``tick`` never sleeps;
HTTP runs on a few worker threads (``source.fetch``), while ``observe`` and everything
handed to the caller stay on the caller's thread.

The plan (``plan.ChunkPlan``): step *i* of a chunk is due at ``anchor + i/hz`` and a tick
plays the step due now, so late or missed ticks never shift it. Refills (``timing``, which
also derives the lag): the next request starts when the plan, including what the requests
in flight will cover, ends sooner than one lead from now. Before the first refill lands,
one request is outstanding (or, given the catalogue's chunk length, two staggered). Each
request starts at its own tick with its own observation; its body (images included) is
built and its answer copied and checked on the worker. While the gateway queues, at most
one is outstanding (``load``).

The engine's phase is its own: ``waiting`` (nothing played yet) → ``playing`` ↔
``underrun`` → ``failed`` (a typed error ended it) or ``closed``. The statistics only record.

``next_action()`` (on ``Policy``) stays the simple, synchronous loop: it fetches when its
buffer is empty and stops the arm meanwhile. Use ``run()`` or this engine to keep moving.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import CancelledError, Executor
from dataclasses import replace
from typing import Literal

import numpy as np

from ..errors import InvalidRequest, InvalidResponse, SequencesError
from ..types import ActionChunk, FloatArray, Observation, Prediction
from .chunk_gate import ChunkCheck, raise_checks_own
from .engine_config import DEFAULT_MAX_IN_FLIGHT, FRESHNESS, EngineConfig, Tick
from .handover import Blender
from .inflight import InFlight, Request
from .journal import UNRECORDED, Journal
from .load import LoadMonitor
from .outcome import RunOutcome
from .plan import SKIPPING_SPACES, ChunkPlan, PlannedStep, Prepared
from .prefix import planned_prefix
from .retries import RetryPolicy
from .source import ChunkSource
from .stats import Handed, PlaybackStats
from .timing import RefillTiming, startup_refill_due

#: See the module docs; ``snapshot()["state"]`` reports it.
Phase = Literal["waiting", "playing", "underrun", "failed", "closed"]

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "FRESHNESS", "EngineConfig", "Phase", "PlaybackEngine", "Tick"]


class PlaybackEngine:
    """Tick-driven chunk playback with just-in-time, pipelined refills. See module docs.

    The rate: the source's ``control_hz``, else the config's, else the chunks' (``config``
    holds it). An open engine is its source's driver (``source.DriverGuard``): constructing
    one while another driver holds the source raises ``SequencesError``; ``close()`` lets go.
    ``executor`` runs the requests (default: ``max_in_flight`` worker threads, created on
    the first request); one given is the caller's to shut down. A driver calls ``commit()``
    for each action it sent (``episode.Episode`` does). ``validate_chunk(chunk, observation)``
    checks each whole chunk on the worker before any step of it plays (``chunk_gate``).
    """

    def __init__(
        self,
        source: ChunkSource,
        config: EngineConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_chunk: Callable[[Prediction], None] | None = None,
        on_underrun: Callable[[float], None] | None = None,
        executor: Executor | None = None,
        journal: Journal | None = None,
        validate_chunk: ChunkCheck | None = None,
    ) -> None:
        settings = (config if config is not None else EngineConfig()).at_rate(source.control_hz)
        source.guard.claim(self)  # before any set-up, after the rate's check: none leaks
        self._source = source
        self.config = settings
        self._clock = clock
        self._on_chunk = on_chunk
        self._on_underrun = on_underrun
        #: Told what happens (``journal.Journal``): a flight recorder, or nobody.
        self.journal = journal if journal is not None else UNRECORDED
        self.action_space: str | None = None
        self.action_dim: int | None = None
        #: The period drivers pace by (``EngineConfig.period_s``, then the chunks'), or None.
        self.period_s: float | None = self.config.period_s
        self.phase: Phase = "waiting"
        self._handed: Handed | None = None
        self._requests = InFlight(source, self.config, executor, validate_chunk)
        blender = Blender(
            settings.handover, steps=settings.smooth_seam, rate=settings.handover_rate
        )
        self._plan = ChunkPlan(blender, settings.gripper_indices)
        self._stats = PlaybackStats()
        self._timing = RefillTiming(self.config.freshness, self.config.max_in_flight)
        self._load = LoadMonitor(self.config.max_in_flight, enabled=self.config.backoff)
        self._covers_s = 0.0
        self._seq = 0
        self._discarded = 0
        self._first_tick_at: float | None = None
        self._retry = RetryPolicy(self.config.startup_timeout_s, self._load)
        self._error: SequencesError | None = None  # set with phase "failed"
        #: (projected plan end, lead): the next refill is due once less than the lead is left
        self._due_at: tuple[float, float] | None = None
        self._steady_until = -math.inf  # see _steady_deadline

    # ------------------------------------------------------------------ public surface

    def tick(self, now: float, observe: Callable[[], Observation | None]) -> Tick:
        """Play the step due at ``now``; start a refill if one is due (calls ``observe``).

        Raises the typed error that ends the episode (auth, credit, invalid request or
        response, warming after the first action or past ``startup_timeout_s``, a transient
        error once the plan no longer covers a retry, a refused chunk: ``ChunkRefused``), and
        an exception of ``validate_chunk``'s own as it raised it. After that every tick raises
        the typed error again."""
        if self.phase == "closed":
            raise RuntimeError("PlaybackEngine is closed")
        if self._error is not None:
            raise self._error
        self._handed = None  # an action not committed by now never went out
        if now < self._steady_until and not self._requests.arrived:
            return self._steady(now)
        if self._first_tick_at is None:
            self._first_tick_at = now
        try:
            self._harvest(now)
            result = self._play(now)
            self._maybe_request(now, observe, playing=result.kind == "action")
        except SequencesError as exc:
            self._error, self.phase = exc, "failed"
            raise
        self._steady_until = self._steady_deadline(now)
        return result

    def commit(self) -> None:
        """The action the last tick handed out went out: count it. The outcome counts only
        committed actions, so a refused one is not reported as played."""
        handed, self._handed = self._handed, None
        if handed is None:
            raise RuntimeError("commit() without an action from the last tick()")
        self._stats.commit(handed)

    def _steady_deadline(self, now: float) -> float:
        """Until when ticks need neither a harvest, a seam nor a refill decision: the plan's
        steady span, cut at the next refill's due time. Most ticks then cost an index and a
        copy (bench/results/overhead.md compares the tick with a bare loop's step)."""
        until = self._plan.steady_until()
        if until == -math.inf or not self.config.prefetch:
            return until
        if len(self._requests) < self._load.limit:
            if self._due_at is None:
                self._due_at = self._next_request_at(now)
            until = min(until, self._due_at[0] - self._due_at[1])
        return until

    @property
    def current_chunk(self) -> tuple[ActionChunk, float] | None:
        """The chunk playing (or last played) and its anchor (monotonic seconds)."""
        playing = self._plan.playing()
        return None if playing is None else (playing.chunk, playing.anchor)

    def planned_rest(self, step_index: int) -> FloatArray | None:
        """The playing chunk's steps from ``step_index`` (the last tick's) on as they will be
        sent, hand-over included (for outputs that send the rest of a chunk at once)."""
        return self._plan.blended_rest(step_index)

    @property
    def in_flight(self) -> int:
        return len(self._requests)

    @property
    def requests_started(self) -> int:
        return self._requests.started

    @property
    def in_flight_limit(self) -> int:
        """Requests allowed outstanding now: ``max_in_flight``, or one while backing off."""
        return self._load.limit

    @property
    def lag_s(self) -> float:
        return self._plan.lag_s

    def lead_s(self) -> float:
        """How far ahead of the plan's end the next refill starts; inf before any refill."""
        return self._timing.lead_s(self._plan.lag_s, self.period_s or 0.0)

    def wait_any(self, timeout_s: float) -> bool:
        """Block until a request in flight completes or ``timeout_s`` passes (for drivers
        with nothing to play yet); True if one completed. ``tick`` itself never blocks."""
        return self._requests.wait_any(timeout_s)

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until every request in flight has completed; False on timeout."""
        return self._requests.wait_idle(timeout_s)

    def snapshot(self) -> dict[str, float | int | str]:
        """Live numbers for diagnostics."""
        return {
            "state": self.phase,
            "warming": int(self._retry.warming and self.phase == "waiting"),
            "action_space": self.action_space or "",
            **self._stats.live(),
            **self._load.live(),
            "discarded_chunks": self._discarded,
            "wasted_requests": self._discarded + self._plan.superseded,
            "in_flight": len(self._requests),
            "requests": self._requests.started,
            "retries": self._retry.retries,
            "lead_s": self.lead_s(),
            "lag_s": self._plan.lag_s,
        }

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        start = self._first_tick_at
        outcome = self._stats.outcome(
            reason=reason,
            stopped_early=stopped_early,
            elapsed_s=0.0 if start is None else max(0.0, self._clock() - start),
            action_space=self.action_space,
            retries=self._retry.retries,
            requests=self._requests.started,
            error=self._error,
        )
        wasted = self._discarded + self._plan.superseded
        return self._load.report(replace(outcome, wasted_requests=wasted))

    def close(self, *, wait: bool = True) -> None:
        """Idempotent. Drops queued requests and stops the workers. An HTTP exchange already
        under way finishes first (bounded by the policy's timeout): ``wait=True`` joins it;
        ``wait=False`` returns at once (for a timer callback that must not block) and the
        worker exits when its exchange ends; its answer is dropped."""
        if self.phase == "closed":
            return
        self.phase = "closed"
        self._steady_until = -math.inf
        self._requests.close(wait=wait)
        self._source.guard.release(self)

    def __enter__(self) -> PlaybackEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ arrivals

    def _harvest(self, now: float) -> None:
        if not self._requests.arrived:  # most ticks have nothing to collect
            return
        self._due_at = None
        done = self._requests.done()
        if not done:
            return
        # the arm holds only before the first action or after an underrun: a chunk landing
        # on the tick the plan runs out continues the timeline
        held = self.phase != "playing"
        holding = held and self._plan.due(now) is None
        for request in done:
            self._requests.remove(request)
            raise_checks_own(request.future)  # the caller's bug, not a failed refill
            try:
                prepared = request.future.result()
            except CancelledError:
                continue
            except SequencesError as exc:
                self._on_failure(exc, now)
                continue
            except ValueError as exc:  # the client refused the observation before sending
                raise InvalidRequest(f"observation not sent: {exc}") from exc
            if self._accept(request, prepared, now, holding=holding):
                holding = False

    def _accept(self, request: Request, prepared: Prepared, now: float, *, holding: bool) -> bool:
        prediction = prepared.prediction
        chunk = prediction.action_chunk
        period = self._check_chunk(chunk, prepared.period_s)
        latency = now - request.observed_at
        self._timing.add(latency)
        self._stats.latency.add(latency)
        backoffs = self._load.backoffs
        self._load.refill(latency, prediction.perf, period)
        self._note_backoff(now, backoffs)
        self._covers_s = len(chunk) * period
        if not holding:  # with few samples the target uses the slowest: safe to start early
            self._plan.adapt_lag(self._lag_target(period), period)
        planned = self._plan.add(
            prepared,
            seq=self._seq + 1,
            observed_at=request.observed_at,
            period_s=period,
            now=now,
            holding=holding,
            restart=not self._requests,
        )
        if planned is None:
            self._discarded += 1
            self.journal.event(now, "discarded", {"request": request.number, "latency_s": latency})
            return False
        self._seq += 1
        grippers = self.config.gripper_indices(chunk.action_dim)
        self.journal.chunk(
            now, request.number, self._seq, prediction, request.observed_at, planned.anchor,
            period, grippers,
        )  # fmt: skip
        if self._on_chunk is not None:
            self._on_chunk(prediction)
        return True

    def _note_backoff(self, now: float, backoffs_before: int) -> None:
        if self._load.backoffs > backoffs_before:
            self.journal.event(now, "backoff", {"limit": self._load.limit})

    def _lag_target(self, period: float) -> float:
        return self._timing.lag_target(period, self._covers_s, self.action_space)

    def _check_chunk(self, chunk: ActionChunk, period: float) -> float:
        """The chunk's size and space against the run's (its steps were checked on the
        worker, ``plan.prepare``)."""
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

    def _on_failure(self, exc: SequencesError, now: float) -> None:
        started = self.phase != "waiting"
        # a chunk accepted earlier in this same harvest has not played yet, but it is a plan
        plan_end = self._plan.end(now) if started or self._seq > 0 else now
        backoffs = self._load.backoffs
        self._retry.on_failure(
            exc, now, started=started, first_tick_at=self._first_tick_at, plan_end=plan_end
        )  # raises the error that ends the episode; returning means it is retried
        self.journal.event(now, "retry", {"error": type(exc).__name__})
        self._note_backoff(now, backoffs)

    # ------------------------------------------------------------------ playing

    def _play(self, now: float) -> Tick:
        step = self._plan.take(now)
        if step is None:
            if self.phase == "waiting":
                return Tick(None, "waiting", 0, -1, False, math.nan)
            self.journal.event(now, "underrun", {})
            self.phase = "underrun"
            gap = self._stats.underrun(now)
            if self._on_underrun is not None:
                self._on_underrun(gap)
            return Tick(None, "underrun", 0, -1, False, math.nan)
        return self._record(now, step)

    def _steady(self, now: float) -> Tick:
        """The common tick: the chunk playing, by time index (its size and finiteness were
        checked when it arrived, and its rows are read-only)."""
        planned, index, raw, action, late = self._plan.continue_at(now)
        staleness = now - planned.observed_at
        if late:
            self._stats.skipped_late += late
            self.journal.event(now, "skipped_late", {"steps": late})
        self._handed = Handed(now, raw, staleness, planned.period_s, False, True, raw, False)
        return Tick(action, "action", planned.seq, index, False, staleness)

    def _record(self, now: float, step: PlannedStep) -> Tick:
        planned = step.planned
        # the plan's steps are checked read-only copies: only a computed blend needs a check
        bad = step.blended and not np.isfinite(step.action).all()
        if bad or step.action.shape != (self.action_dim,):
            raise InvalidResponse("planned action is not finite or has the wrong size")
        staleness = now - planned.observed_at
        self._stats.skipped_stale += step.skipped_stale
        self._stats.skipped_late += step.skipped_late
        if step.new_chunk or step.skipped_stale or step.skipped_late:
            self._journal_step(now, step)
        self._stats.arm_index = self._plan.arm_index  # seams are measured without grippers
        self.phase = "playing"
        self._handed = Handed(
            now, step.raw, staleness, planned.period_s, step.new_chunk, False, step.action,
            step.blended,
        )  # fmt: skip
        return Tick(step.action, "action", planned.seq, step.index, step.new_chunk, staleness)

    def _journal_step(self, now: float, step: PlannedStep) -> None:
        journal = self.journal
        if step.new_chunk:
            journal.started(now, step.planned.seq, step.planned.anchor, step.index)
        if step.skipped_stale:
            journal.event(now, "skipped_stale", {"steps": step.skipped_stale})
        if step.skipped_late:
            journal.event(now, "skipped_late", {"steps": step.skipped_late})

    # ------------------------------------------------------------------ requests

    def _maybe_request(
        self, now: float, observe: Callable[[], Observation | None], *, playing: bool
    ) -> None:
        if now < self._retry.not_before or not self._wants_request(now, playing):
            return
        observation = observe()
        if observation is None:
            return  # inputs not ready: send nothing this tick
        planned = None
        if self._requests.wants_planned:  # real-time chunking: what plays while it is out
            planned = planned_prefix(self._plan, self._requests.requests, now, self.period_s)
        request = self._requests.start(observation, now, planned)
        self._due_at = None
        self.journal.request(now, request.number, observation)

    def _wants_request(self, now: float, playing: bool) -> bool:
        in_flight = len(self._requests)
        if self.phase == "waiting":
            return in_flight == 0 or self._startup_stagger_due(now, in_flight)
        if not self.config.prefetch:
            return in_flight == 0 and not playing and not self._plan.pending(now)
        if in_flight >= self._load.limit:
            return False
        if self._due_at is None or self.action_space not in SKIPPING_SPACES:
            self._due_at = self._next_request_at(now)
        projected, lead = self._due_at
        return projected - now < lead

    def _next_request_at(self, now: float) -> tuple[float, float]:
        """When the plan, with what the requests in flight will add, ends one lead from now.
        It changes only when a chunk arrives or a request starts (skipping spaces: the plan
        ends at fixed times), so ticks in between compare one number."""
        # each request's chunk is playable until observed_at + lag + covers, with the lag
        # it will have when it lands (it may shrink meanwhile)
        projected = self._plan.end(now)
        period = self.period_s or 0.0
        target = self._lag_target(period)
        ordered = sorted(self._requests.requests, key=lambda r: r.observed_at)
        for position, request in enumerate(ordered):
            lag = self._plan.lag_after(position + 1, target, period)
            projected = max(projected, request.observed_at + lag + self._covers_s)
        return projected, self.lead_s()

    def _startup_stagger_due(self, now: float, in_flight: int) -> bool:
        if not self.config.prefetch:
            return False
        limit, covers = self._load.limit, self.config.expected_covers_s
        return startup_refill_due(now - self._requests.last_start_at, in_flight, limit, covers)
