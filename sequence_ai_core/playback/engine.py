"""The playback engine: keeps a time-indexed plan of action chunks full while the arm moves.

One engine, two drivers: ``Policy.run()`` (``runner.run_policy``) and the ROS node's timer
both call ``play(now)`` once per control period, hand the ``tick.Tick`` it returns, sent or
refused, to one ``episode.Episode`` (``Episode.settle``), which journals it, counts it
(``commit``) and holds on every stop, and then call ``refill(now, observe)``, so that a
request's observation and hand-off never delay the command (``tick`` is both, for a loop
that does not mind). Neither sleeps; HTTP runs on a few worker threads (``source.fetch``),
while ``observe`` and everything handed to the caller stay on the caller's thread.

The plan (``plan.ChunkPlan``): step *i* of a chunk is due at ``anchor + i/hz`` and a tick
plays the step due now, so late or missed ticks never shift it. Refills start when
``schedule.RefillSchedule`` says (``timing`` derives the lead and the lag). Each request
starts at its own tick with its own observation; its body (images included) is built and
its answer copied and checked on the worker (``ready``).

The engine's phase is its own: ``waiting`` (nothing played yet) → ``playing`` ↔
``underrun`` → ``failed`` (a typed error ended it) or ``closed``; from any live phase a
person may take the arm (``take_over``: ``human``) and hand it back (``hand_back``:
``resuming`` until the first chunk after it plays, handed over from the arm's measured state;
``resume``). The statistics only record.

``next_action()`` (on ``Policy``) stays the simple, synchronous loop: it fetches when its
buffer is empty and stops the arm meanwhile. Use ``run()`` or this engine to keep moving.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import replace
from typing import Literal

import numpy as np

from ..errors import InvalidResponse, SequencesError
from ..types import ActionChunk, FloatArray, Observation, Prediction
from .arrivals import Arrivals
from .chunk_gate import ChunkCheck
from .engine_config import DEFAULT_MAX_IN_FLIGHT, FRESHNESS, EngineConfig
from .handover import Blender
from .inflight import InFlight
from .journal import UNRECORDED, Journal
from .load import LoadMonitor
from .outcome import RunOutcome
from .plan import EARLY, ChunkPlan, PlannedStep, largest_arm_step
from .prefix import planned_prefix
from .resume import measured_row
from .retries import RetryPolicy
from .schedule import RefillSchedule
from .source import ChunkSource
from .stats import ActionRecord, PlaybackStats, largest_difference
from .tick import Tick, TickKind
from .timing import RefillTiming

#: ``Tick.new_chunk`` of a tick that continues the chunk playing.
CONTINUES = False
#: See the module docs; ``snapshot()["state"]`` reports it.
Phase = Literal["waiting", "playing", "underrun", "human", "resuming", "failed", "closed"]

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "FRESHNESS", "EngineConfig", "Phase", "PlaybackEngine", "Tick"]


class PlaybackEngine:
    """Tick-driven chunk playback with just-in-time, pipelined refills. See module docs.

    The rate: the source's ``control_hz``, else the config's, else the chunks' (``config``
    holds it). An open engine is its source's driver (``source.DriverGuard``): constructing
    one while another driver holds the source raises ``SequencesError``; ``close()`` lets go.
    ``executor`` runs the requests (default: ``max_in_flight`` worker threads, created on
    the first request); one given is the caller's to shut down. Each action that went out is
    counted by ``commit()`` (``Episode.settle`` calls it). ``validate_chunk(chunk, observation)``
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
        self._on_underrun = on_underrun
        #: Told what happens (``journal.Journal``): a flight recorder, or nobody.
        self.journal = journal if journal is not None else UNRECORDED
        self.phase: Phase = "waiting"
        #: What the last tick handed out, until it is committed (or the next tick).
        self._uncommitted: ActionRecord | None = None
        self._requests = InFlight(source, self.config, executor, validate_chunk)
        blender = Blender(
            settings.handover, steps=settings.smooth_seam, rate=settings.handover_rate
        )
        self._plan = ChunkPlan(blender, settings.gripper_indices)
        self._stats = PlaybackStats()
        self._timing = RefillTiming(self.config.freshness, self.config.max_in_flight)
        self._load = LoadMonitor(self.config.max_in_flight, enabled=self.config.backoff)
        self._schedule = RefillSchedule(
            self.config, self._plan, self._requests, self._load, self._timing, self.lead_s
        )
        self._first_tick_at: float | None = None
        self._retry = RetryPolicy(self.config.startup_timeout_s, self._load)
        self._arrivals = Arrivals(
            settings, self._plan, self._requests, self._schedule, self._timing, self._load,
            self._retry, self._stats.latency, self.journal, on_chunk,
        )  # fmt: skip
        self._error: SequencesError | None = None  # set with phase "failed"
        self._quiet_until = -math.inf  # see RefillSchedule.quiet_until
        #: The arm's state the first chunk after a hand-back is handed over from.
        self._resume_row: FloatArray | None = None
        self._start_from: FloatArray | None = None  # hand_back's, until the first request
        #: Set by ``play`` when ``refill`` has to look (whether a step played), else None.
        self._refill_after: bool | None = None

    # ------------------------------------------------------------------ public surface

    def tick(self, now: float, observe: Callable[[], Observation | None]) -> Tick:
        """``play(now)``, then ``refill(now, observe)``: for a loop that sends the action
        after both (drivers send it between them)."""
        result = self.play(now)
        self.refill(now, observe)
        return result

    def play(self, now: float) -> Tick:
        """The step due at ``now``, taking in any chunk that arrived; nothing is requested.

        Raises the typed error that ends the episode (auth, credit, invalid request or
        response, warming after the first action or past ``startup_timeout_s``, a transient
        error once the plan no longer covers a retry, a refused chunk: ``ChunkRefused``), and
        an exception of ``validate_chunk``'s own as it raised it. After that every call
        raises the typed error again."""
        if self.phase == "closed":
            raise RuntimeError("PlaybackEngine is closed")
        if self._error is not None:
            raise self._error
        self._uncommitted = None  # an action not committed by now never went out
        self._refill_after = None
        try:
            if now < self._quiet_until and not self._requests.arrived:
                return self._steady(now)  # most ticks: an index, a copy, a hand-over's step
            if self.phase == "human":  # (taking over ends the quiet span)
                return _idle(now, "human")
            if self._first_tick_at is None:
                self._first_tick_at = now
            phase = self.phase
            self._arrivals.collect(
                now,
                started=phase != "waiting",
                playing=phase == "playing",
                first_tick_at=self._first_tick_at,
            )
            result = self._play(now)
        except SequencesError as exc:
            self._error, self.phase = exc, "failed"
            raise
        self._refill_after = result.kind in ("action", "early")
        return result

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        """Start a refill if one is due after the last ``play(now)`` (calls ``observe``);
        at most once per ``play``. Raises as ``play`` does (an observation the source
        refuses: ``InvalidRequest``)."""
        playing, self._refill_after = self._refill_after, None
        if playing is None:  # a steady tick, refilled already, or taken over or closed since
            return
        try:
            self._maybe_request(now, observe, playing=playing)
        except SequencesError as exc:
            self._error, self.phase = exc, "failed"
            raise
        self._quiet_until = self._schedule.quiet_until(now, self.period_s or 0.0, self.action_space)

    def take_over(self, now: float) -> None:
        """A person has the arm (``Episode.take_over``): nothing planned or in flight before
        now will ever play, no request goes out, and ticks play nothing (``human``) until
        ``hand_back``. Idempotent; nothing after the engine ended."""
        if self.phase in ("human", "failed", "closed"):
            return
        self._arrivals.discarded += self._requests.abandon()
        self._plan.clear()
        self._stats.taken_over(now)
        self._uncommitted = None
        self._refill_after = None
        self._quiet_until = -math.inf
        self._resume_row = None
        self.phase = "human"
        self._schedule.changed()
        self.journal.event(now, "takeover", {})

    def hand_back(self, now: float, *, start_from: FloatArray | None = None) -> None:
        """The person handed the arm back: the next tick observes afresh and requests at
        once, and the first chunk plays from its first step, handed over from the arm's
        measured state in that observation (``resume``), or from ``start_from`` (an action
        of the run's size: the caller's own estimate). Until it arrives, ticks play nothing
        (``resuming``; ``waiting`` if nothing had played yet)."""
        if start_from is not None:
            start_from = np.array(start_from, dtype=np.float64)
            dim = self.action_dim if self.action_dim is not None else start_from.size
            if start_from.shape != (dim,) or not np.isfinite(start_from).all():
                raise ValueError(f"start_from must be {dim} finite values, got {start_from!r}")
        if self.phase != "human":
            return
        self._start_from = start_from
        held_s = self._stats.handed_back(now)
        self.phase = "waiting" if self._stats.first_action_at is None else "resuming"
        self._retry.not_before = -math.inf  # a retry's wait was for a request now dropped
        self._schedule.changed()
        self.journal.event(now, "release", {"takeover_s": held_s})

    def commit(self) -> None:
        """The action the last tick handed out went out: count it. The outcome counts only
        committed actions, so a refused one is not reported as played."""
        record, self._uncommitted = self._uncommitted, None
        if record is None:
            raise RuntimeError("commit() without an action from the last tick()")
        self._stats.commit(record)

    @property
    def current_chunk(self) -> tuple[ActionChunk, float] | None:
        """The chunk playing (or last played) and its anchor (monotonic seconds)."""
        playing = self._plan.playing()
        return None if playing is None else (playing.chunk, playing.anchor)

    def planned_rest(self, step_index: int) -> FloatArray | None:
        """The playing chunk's steps from ``step_index`` (the last tick's) on as they will be
        sent, hand-over included (``Tick.rest`` is the same for the tick's own chunk)."""
        return self._plan.blended_rest(step_index)

    @property
    def action_space(self) -> str | None:
        """The run's action space, from its first chunk (None before)."""
        return self._arrivals.action_space

    @property
    def action_dim(self) -> int | None:
        return self._arrivals.action_dim

    @property
    def period_s(self) -> float | None:
        """The period drivers pace by (``EngineConfig.period_s``, then the chunks'), or None."""
        return self._arrivals.period_s

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
            "discarded_chunks": self._arrivals.discarded,
            "wasted_requests": self._arrivals.discarded + self._plan.superseded,
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
        wasted = self._arrivals.discarded + self._plan.superseded
        taken = self._stats.takeover_seconds(self._clock())
        return self._load.report(replace(outcome, wasted_requests=wasted, takeover_s=taken))

    def close(self, *, wait: bool = True) -> None:
        """Idempotent. Drops queued requests and stops the workers. An HTTP exchange already
        under way finishes first (bounded by the policy's timeout): ``wait=True`` joins it;
        ``wait=False`` returns at once (for a timer callback that must not block) and the
        worker exits when its exchange ends; its answer is dropped."""
        if self.phase == "closed":
            return
        self.phase = "closed"
        self._quiet_until = -math.inf
        self._refill_after = None
        self._requests.close(wait=wait)
        self._source.guard.release(self)

    def __enter__(self) -> PlaybackEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ playing

    def _play(self, now: float) -> Tick:
        step = self._plan.take(now)
        if step == EARLY:
            return self._early(now)
        if step is None:
            if self.phase in ("waiting", "resuming"):
                return _idle(now, self.phase)
            self.journal.event(now, "underrun", {})
            self.phase = "underrun"
            gap = self._stats.underrun(now)
            if self._on_underrun is not None:
                self._on_underrun(gap)
            return _idle(now, "underrun")
        if self.phase == "resuming" and step.new_chunk:
            self._measure_resume(step)
        return self._action_tick(now, step)

    def _measure_resume(self, step: PlannedStep) -> None:
        """The first step after a hand-back, against the arm's state then, in in-chunk steps
        (before hand-over, as seams are measured)."""
        row, arm = self._resume_row, self._plan.arm_index
        self._resume_row = None
        if row is None or arm is None:
            return
        largest = largest_arm_step(step.planned, arm)
        if largest > 0:  # a chunk that holds still has no step to measure in
            self._stats.resume_jump(largest_difference(step.raw, row, arm) / largest)

    def _steady(self, now: float) -> Tick:
        """The common tick: the chunk playing, by time index (its size and finiteness were
        checked when it arrived, and its rows are read-only)."""
        taken = self._plan.take_steady(now)
        if taken is None:
            return self._early(now)
        planned, index, raw, action, late, blended = taken
        staleness = now - planned.observed_at
        if late:
            self._stats.skipped_late += late
            self.journal.event(now, "skipped_late", {"steps": late})
        if blended:  # a hand-over's step: a computed action, checked again
            self._check(action, blended=True)
            self._uncommitted = ActionRecord(
                now, raw, staleness, planned.period_s, action=action, blended=True
            )
        else:
            self._uncommitted = ActionRecord(now, raw, staleness, planned.period_s)  # steady
        # positional, as keywords cost about a tenth of the tick
        return Tick(
            action, "action", planned.seq, index, CONTINUES, staleness, now, planned, self._plan
        )

    def _early(self, now: float) -> Tick:
        """A tick in the slot of a step already sent: counted and journaled, one event a
        tick (rare: a clock running fast, the tick after a late one)."""
        self._stats.early_ticks += 1
        self.journal.event(now, "early", {})
        return _idle(now, EARLY)

    def _action_tick(self, now: float, step: PlannedStep) -> Tick:
        """The tick of a step ``ChunkPlan.take`` chose: checked, counted and journaled."""
        planned = step.planned
        self._check(step.action, blended=step.blended)
        staleness = now - planned.observed_at
        self._stats.skipped_stale += step.skipped_stale
        self._stats.skipped_late += step.skipped_late
        if step.new_chunk or step.skipped_stale or step.skipped_late:
            self._journal_step(now, step)
        self._stats.arm_index = self._plan.arm_index  # seams are measured without grippers
        self.phase = "playing"
        self._uncommitted = ActionRecord(
            now, step.raw, staleness, planned.period_s, new_chunk=step.new_chunk, steady=False,
            action=step.action, blended=step.blended,
        )  # fmt: skip
        return Tick(
            step.action, "action", planned.seq, step.index, step.new_chunk, staleness, now,
            planned, self._plan,
        )  # fmt: skip

    def _check(self, action: FloatArray, *, blended: bool) -> None:
        """The plan's steps are checked read-only copies: only a computed blend needs its
        values checked; in plain Python, as a numpy reduction over so few values costs more
        right after the control loop's sleep (docs/performance.md, "Behind the engine's
        constants")."""
        if action.shape != (self.action_dim,) or (
            blended and not all(map(math.isfinite, action.tolist()))
        ):
            raise InvalidResponse("planned action is not finite or has the wrong size")

    def _journal_step(self, now: float, step: PlannedStep) -> None:
        journal = self.journal
        if step.new_chunk:
            journal.started(now, step.planned.seq, step.planned.anchor, step.index)
        if step.skipped_stale:
            journal.event(now, "skipped_stale", {"steps": step.skipped_stale})
        if step.skipped_late:
            journal.event(now, "skipped_late", {"steps": step.skipped_late})

    # ------------------------------------------------------------------ requests

    def _resume_from(self, observation: Observation) -> None:
        """The first request after a hand-back: its observation is the arm's state the
        first chunk is handed over from."""
        dim, arm = self.action_dim, self._plan.arm_index
        if dim is None or arm is None:
            return
        given, self._start_from = self._start_from, None
        if given is not None and given.shape == (dim,):
            self._resume_row = given
        else:
            self._resume_row = measured_row(self.action_space, observation, dim, arm)
        self._plan.resume_from(self._resume_row)

    def _maybe_request(
        self, now: float, observe: Callable[[], Observation | None], *, playing: bool
    ) -> None:
        if now < self._retry.not_before:
            return
        wants = self._schedule.wants_request(
            now,
            waiting=self.phase in ("waiting", "resuming"),
            playing=playing,
            period_s=self.period_s or 0.0,
            space=self.action_space,
        )
        if not wants:
            return
        observation = observe()
        if observation is None:
            return  # inputs not ready: send nothing this tick
        planned = None
        if self._requests.wants_planned:  # real-time chunking: what plays while it is out
            planned = planned_prefix(self._plan, self._requests.requests, now, self.period_s)
        if self.phase == "resuming" and self._resume_row is None:
            self._resume_from(observation)
        request = self._requests.start(observation, now, planned)
        self._schedule.changed()
        self.journal.request(now, request.number, observation)


def _idle(now: float, kind: TickKind) -> Tick:
    """A tick with nothing to play, and why (``kind``; ``early``: the step due already went
    out, the arm is carrying it out and the plan has not run out)."""
    return Tick(None, kind, 0, -1, new_chunk=False, staleness_s=math.nan, at=now)
