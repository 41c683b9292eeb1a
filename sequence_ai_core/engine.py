"""The playback engine: keeps a time-indexed plan of action chunks full while the arm moves.

One engine, two drivers: ``Policy.run()`` (``runner.run_policy``, a blocking loop) and the
ROS node's timer both call ``PlaybackEngine.tick(now, observe)`` once per control period.
``tick`` never sleeps; HTTP runs on a few worker threads (``policy._fetch``), while
``observe`` and everything handed to the caller stay on the caller's thread.

The plan (``plan.ChunkPlan``): step *i* of a chunk is due at ``anchor + i/hz`` and a tick
plays the step due now, so late or missed ticks never shift it. The anchor is the chunk's
observation time plus the run's lag; steps that passed while a request was in flight are
skipped and counted for absolute and velocity spaces, never for delta spaces.

The lag. A chunk observed at ``t_o`` arrives at ``t_o + L`` and is playable until
``t_o + lag + covers``, a window ``W = covers + lag - L``. Continuous play with at most
``max_in_flight`` (M) requests outstanding needs requests at most ``W`` apart and ``W`` at
least about ``L/M``, so the engine aims the lag at ``max(0, L + L/M - covers)`` plus one
period (``freshness="fresh"``, the default), with L the quantile below; it stops shrinking
one period above that target (hysteresis). ``freshness="round_trip"`` aims at L itself.
The cost of freshness is requests: about one per ``W`` minus a period of motion. At a fixed
0.80 s refill (as measured, in whole ticks), steady state, fresh vs round trip:

    chunk            lag s         played plan behind s   staleness p50 s   requests / s
    1.00 s, 15 Hz    0.20 / 0.80   0.20 / 0.80            0.93 / 1.27       2.7 / 1.1
    2.13 s, 15 Hz    0.13 / 0.80   0.13 / 0.80            1.47 / 1.77       0.7 / 0.5
    0.64 s, 25 Hz    0.52 / 0.80   0.52 / 0.80            0.96 / 1.08       2.9 / 1.7
    0.50 s, 30 Hz    0.63 / 0.80   0.63 / 0.80            0.93 / 1.03       3.3 / 2.0

The tracking error against a moving reference, and the backward jump at every swap with a
policy that predicts from the arm's observed state, scale with how far behind the plan
plays (``bench/freshness.py``). A smaller ``max_in_flight`` also lowers the request rate, at
a larger lag. The lag moves toward its target by at most one period per arriving chunk, so
a swap moves the plan by at most one extra step.

Prefetch. The next request starts when the plan, including what the requests in flight will
cover (each until its window ends, with the lag it will have when it lands), ends sooner
than the expected refill time: the 95th percentile of the last 50 measured refill latencies
(latency is right-skewed, so a mean would miss every slow tail), at least the lag, plus one
period. Until five refills were measured, the slowest one stands in for the quantile;
before the first one, a single request is outstanding (or, given the catalogue's chunk
length, requests staggered 0.9 chunk apart). Up to ``max_in_flight`` requests run at once,
each started at its own tick with its own fresh observation.

``next_action()`` (on ``Policy``) stays the simple, synchronous loop: it fetches when its
buffer is empty and stops the arm meanwhile. Use ``run()`` or this engine to keep moving.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass

import numpy as np

from .engine_config import DEFAULT_MAX_IN_FLIGHT, FRESHNESS, EngineConfig, PolicyLike, Tick
from .errors import (
    InvalidRequest,
    InvalidResponse,
    SequencesError,
    Unavailable,
    cold_start_advice,
)
from .outcome import RunOutcome
from .plan import SKIPPING_SPACES, ChunkPlan, checked_period
from .stats import PlaybackStats, SampleWindow
from .types import ActionChunk, Observation, Prediction

log = logging.getLogger(__name__)

LEAD_QUANTILE = 0.95
LATENCY_WINDOW = 50
MIN_LATENCY_SAMPLES = 5
#: Startup refills (before anything was measured) start this many chunk lengths apart.
STARTUP_SPACING = 0.9
#: Wait before retrying a warming worker that gave no Retry-After.
DEFAULT_WARMING_RETRY_S = 1.0


@dataclass
class _Request:
    future: Future[Prediction]
    observed_at: float


__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "FRESHNESS",
    "EngineConfig",
    "PlaybackEngine",
    "PolicyLike",
    "Tick",
]


class PlaybackEngine:
    """Tick-driven chunk playback with just-in-time, pipelined refills. See module docs."""

    def __init__(
        self,
        policy: PolicyLike,
        config: EngineConfig | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_chunk: Callable[[Prediction], None] | None = None,
        on_underrun: Callable[[float], None] | None = None,
    ) -> None:
        self._policy = policy
        self.config = config if config is not None else EngineConfig()
        self._clock = clock
        self._on_chunk = on_chunk
        self._on_underrun = on_underrun
        self._options = dict(self.config.options)
        self.action_space: str | None = None
        self.action_dim: int | None = None
        hz = self.config.control_hz
        self.period_s: float | None = 1.0 / hz if hz else None
        self._requests: list[_Request] = []
        self._plan = ChunkPlan(self.config.smooth_seam)
        self._stats = PlaybackStats()
        self._lead_latency = SampleWindow(LATENCY_WINDOW)
        self._covers_s = 0.0
        self._seq = 0
        self._requests_started = 0
        self._retries = 0
        self._discarded = 0
        self._first_tick_at: float | None = None
        self._not_before = -math.inf
        self._warming = False  # a cold worker answered before the first action
        self._last_start_at = -math.inf
        self._error: SequencesError | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    # ------------------------------------------------------------------ public surface

    def tick(self, now: float, observe: Callable[[], Observation | None]) -> Tick:
        """Play the step due at ``now``; start a refill if one is due (calls ``observe``).

        Raises the typed error that ends the episode (auth, credit, invalid request or
        response, warming after the first action or past ``startup_timeout_s``, a transient
        error once the plan no longer covers a retry). After that every tick raises it again.
        """
        if self._closed:
            raise RuntimeError("PlaybackEngine is closed")
        if self._error is not None:
            raise self._error
        if self._first_tick_at is None:
            self._first_tick_at = now
        try:
            self._harvest(now)
            result = self._play(now)
            self._maybe_request(now, observe, playing=result.kind == "action")
        except SequencesError as exc:
            self._error = exc
            raise
        return result

    @property
    def current_chunk(self) -> tuple[ActionChunk, float] | None:
        """The chunk playing (or last played) and its anchor (monotonic seconds)."""
        playing = self._plan.playing()
        return None if playing is None else (playing.chunk, playing.anchor)

    @property
    def in_flight(self) -> int:
        return len(self._requests)

    @property
    def lag_s(self) -> float:
        return self._plan.lag_s

    def lead_s(self) -> float:
        """How far ahead of the plan's end the next refill starts; inf before any refill."""
        if len(self._lead_latency) == 0:
            return math.inf
        return max(self._expected_latency(), self._plan.lag_s) + (self.period_s or 0.0)

    def _expected_latency(self) -> float:
        """High quantile of recent refills; the slowest one while there are too few."""
        if len(self._lead_latency) < MIN_LATENCY_SAMPLES:
            return self._lead_latency.max()
        return self._lead_latency.quantile(LEAD_QUANTILE)

    def wait_any(self, timeout_s: float) -> bool:
        """Block until a request in flight completes or ``timeout_s`` passes (for drivers
        with nothing to play yet); True if one completed. ``tick`` itself never blocks."""
        pending = [r.future for r in self._requests]
        if not pending:
            return False
        done, _ = wait_futures(pending, timeout=max(0.0, timeout_s), return_when=FIRST_COMPLETED)
        return bool(done)

    def wait_idle(self, timeout_s: float) -> bool:
        """Block until every request in flight has completed; False on timeout."""
        pending = [r.future for r in self._requests]
        _, not_done = wait_futures(pending, timeout=max(0.0, timeout_s))
        return not not_done

    def snapshot(self) -> dict[str, float | int | str]:
        """Live numbers for diagnostics."""
        return {
            "state": self._state(),
            "warming": int(self._warming and self._stats.first_action_at is None),
            "action_space": self.action_space or "",
            **self._stats.live(),
            "discarded_chunks": self._discarded,
            "in_flight": len(self._requests),
            "requests": self._requests_started,
            "retries": self._retries,
            "lead_s": self.lead_s(),
            "lag_s": self._plan.lag_s,
        }

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        start = self._first_tick_at
        return self._stats.outcome(
            reason=reason,
            stopped_early=stopped_early,
            elapsed_s=0.0 if start is None else max(0.0, self._clock() - start),
            action_space=self.action_space,
            retries=self._retries,
            requests=self._requests_started,
            error=self._error,
        )

    def close(self, *, wait: bool = True) -> None:
        """Idempotent. Drops queued requests and stops the workers. An HTTP exchange already
        under way finishes first (bounded by the policy's timeout): ``wait=True`` joins it;
        ``wait=False`` returns at once (for a timer callback that must not block) and the
        worker exits when its exchange ends; its answer is dropped."""
        if self._closed:
            return
        self._closed = True
        for request in self._requests:
            request.future.cancel()
        self._requests.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=wait, cancel_futures=True)
            self._executor = None

    def __enter__(self) -> PlaybackEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ arrivals

    def _harvest(self, now: float) -> None:
        done = [r for r in self._requests if r.future.done()]
        if not done:
            return
        # the arm holds only before the first action or after an underrun: a chunk landing
        # on the tick the plan runs out continues the timeline
        held = self._stats.first_action_at is None or self._stats.in_underrun
        holding = held and self._plan.due(now) is None
        for request in done:
            self._requests.remove(request)
            try:
                prediction = request.future.result()
            except CancelledError:
                continue
            except SequencesError as exc:
                self._on_failure(exc, now)
                continue
            except ValueError as exc:  # the client refused the observation before sending
                raise InvalidRequest(f"observation not sent: {exc}") from exc
            if self._accept(request, prediction, now, holding=holding):
                holding = False

    def _accept(
        self, request: _Request, prediction: Prediction, now: float, *, holding: bool
    ) -> bool:
        chunk = prediction.action_chunk
        period = self._check_chunk(chunk)
        latency = now - request.observed_at
        self._lead_latency.add(latency)
        self._stats.latency.add(latency)
        self._covers_s = len(chunk) * period
        if not holding:  # with few samples the target uses the slowest: safe to start early
            self._plan.adapt_lag(self._lag_target(period), period)
        planned = self._plan.add(
            prediction,
            seq=self._seq + 1,
            observed_at=request.observed_at,
            period_s=period,
            now=now,
            holding=holding,
            restart=not self._requests,
        )
        if planned is None:
            self._discarded += 1
            return False
        self._seq += 1
        if self._on_chunk is not None:
            self._on_chunk(prediction)
        return True

    def _lag_target(self, period: float) -> float:
        """The smallest lag the refills sustain. A chunk observed at t_o arrives at t_o + L
        and is playable until t_o + lag + covers: a window W = covers + lag - L. Requests
        start one lead (L + period) before the plan ends, so they are W - period apart and
        about L / (W - period) are in flight; at most ``max_in_flight`` (M) can be, hence
        lag >= L + L/M - covers + period. Delta spaces skip nothing, so a smaller lag only
        costs requests there: they keep the round trip, as does ``freshness="round_trip"``."""
        latency = self._expected_latency()
        if self.config.freshness == "round_trip" or self.action_space not in SKIPPING_SPACES:
            return latency
        spacing = latency / self.config.max_in_flight
        return max(0.0, latency + spacing - self._covers_s) + period

    def _check_chunk(self, chunk: ActionChunk) -> float:
        period = checked_period(chunk, self.config.control_hz)
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
        if not isinstance(exc, Unavailable):
            raise exc
        started = self._stats.first_action_at is not None
        if exc.warming:
            if started:
                raise exc  # a worker went cold under a running episode: stop and hold
            first = now if self._first_tick_at is None else self._first_tick_at
            remaining = first + self.config.startup_timeout_s - now
            if remaining <= 0:
                raise cold_start_advice(exc, self.config.startup_timeout_s) from exc
            wait = exc.retry_after_s if exc.retry_after_s is not None else DEFAULT_WARMING_RETRY_S
            log.info(
                "model warming up; retrying in %.0f s (%.0f s of startup_timeout_s=%g left)",
                min(wait, remaining),
                remaining,
                self.config.startup_timeout_s,
            )
            self._warming = True
            self._not_before = max(self._not_before, now + min(wait, remaining))
            self._retries += 1
            return
        wait = exc.retry_after_s or 0.0
        if not started or self._plan.end(now) <= now + wait:
            raise exc  # the plan no longer covers a retry
        self._not_before = max(self._not_before, now + wait)
        self._retries += 1

    # ------------------------------------------------------------------ playing

    def _play(self, now: float) -> Tick:
        step = self._plan.take(now)
        if step is None:
            if self._stats.first_action_at is None:
                return Tick(None, "waiting", 0, -1, False, math.nan)
            gap = self._stats.underrun(now)
            if self._on_underrun is not None:
                self._on_underrun(gap)
            return Tick(None, "underrun", 0, -1, False, math.nan)
        planned = step.planned
        if step.action.shape != (self.action_dim,) or not np.all(np.isfinite(step.action)):
            raise InvalidResponse("planned action is not finite or has the wrong size")
        staleness = now - planned.observed_at
        self._stats.skipped_stale += step.skipped_stale
        self._stats.skipped_late += step.skipped_late
        self._stats.action(
            now,
            step.raw,
            period_s=planned.period_s,
            new_chunk=step.new_chunk,
            staleness_s=staleness,
        )
        return Tick(step.action, "action", planned.seq, step.index, step.new_chunk, staleness)

    # ------------------------------------------------------------------ requests

    def _maybe_request(
        self, now: float, observe: Callable[[], Observation | None], *, playing: bool
    ) -> None:
        if now < self._not_before or not self._wants_request(now, playing):
            return
        observation = observe()
        if observation is None:
            return  # inputs not ready: send nothing this tick
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.config.max_in_flight, thread_name_prefix="sequence-ai-refill"
            )
        future = self._executor.submit(self._policy._fetch, observation, self._options)
        self._requests.append(_Request(future, now))
        self._last_start_at = now
        self._requests_started += 1

    def _wants_request(self, now: float, playing: bool) -> bool:
        in_flight = len(self._requests)
        if self._stats.first_action_at is None:
            return in_flight == 0 or self._startup_stagger_due(now, in_flight)
        if not self.config.prefetch:
            return in_flight == 0 and not playing and not self._plan.pending(now)
        if in_flight >= self.config.max_in_flight:
            return False
        # each request's chunk is playable until observed_at + lag + covers, with the lag
        # it will have when it lands (it may shrink by a period per chunk meanwhile)
        projected = self._plan.end(now)
        period = self.period_s or 0.0
        target = self._lag_target(period)
        ordered = sorted(self._requests, key=lambda r: r.observed_at)
        for position, request in enumerate(ordered):
            lag = self._plan.lag_after(position + 1, target, period)
            projected = max(projected, request.observed_at + lag + self._covers_s)
        return projected - now < self.lead_s()

    def _startup_stagger_due(self, now: float, in_flight: int) -> bool:
        """Before the first chunk nothing is measured; only the catalogue's chunk length says
        how far apart refills may start and still join up (10 % margin for latency spread)."""
        covers = self.config.expected_covers_s
        if not self.config.prefetch or covers is None or in_flight >= self.config.max_in_flight:
            return False
        return now - self._last_start_at >= STARTUP_SPACING * covers

    def _state(self) -> str:
        if self._closed:
            return "closed"
        if self._error is not None:
            return "failed"
        if self._stats.first_action_at is None:
            return "waiting"
        return "underrun" if self._stats.in_underrun else "playing"
