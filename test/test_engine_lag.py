"""The lag: the smallest one the refills sustain, reached one period per chunk.

A fake policy answers after a fixed latency on an injected clock, so whole runs take
milliseconds and every number is exact. Each chunk's values are the time its step stands
for (observation time + i/hz), so ``now - value`` is how far behind the plan plays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from sequence_ai_core.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.types import ActionChunk, Observation, Prediction, Proprioception

LATENCY_S = 0.79


class FixedLatencyPolicy:
    """Answers a request observed at t (fake time) with a chunk whose step i holds t + i/hz."""

    control_hz: float | None = None

    def __init__(self, hz: float, steps: int, space: str) -> None:
        self.hz, self.steps, self.space = hz, steps, space
        self.now = 0.0

    def observe(self) -> Observation:
        return Observation(proprioception=Proprioception(joint_positions=[self.now]))

    def _fetch(self, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        observed_at = observation.proprioception.joint_positions[0]
        values = observed_at + np.arange(self.steps, dtype=np.float64) / self.hz
        steps = np.repeat(values[:, None], 2, axis=1)
        chunk = ActionChunk(steps, "r", self.space, 2, self.hz, self.steps / self.hz)
        return Prediction(id="p", model="m", action_chunk=chunk)


class FakeClockExecutor:
    """Stands in for the engine's worker pool: a request is answered once the fake clock
    reaches its observation time plus the latency, so runs are exact and instant."""

    def __init__(self, policy: FixedLatencyPolicy, latency_s: float = LATENCY_S) -> None:
        self._policy = policy
        self._latency_s = latency_s
        self._queued: list[tuple[float, Observation, Future[Prediction]]] = []

    def submit(self, fn: Any, observation: Observation, options: Any) -> Future[Prediction]:
        future: Future[Prediction] = Future()
        self._queued.append((self._policy.now + self._latency_s, observation, future))
        return future

    def advance(self, now: float) -> None:
        self._policy.now = now
        for item in [q for q in self._queued if q[0] <= now + 1e-9]:
            self._queued.remove(item)
            item[2].set_result(self._policy._fetch(item[1], {}))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._queued.clear()


@dataclass
class Run:
    lags: list[float]  # engine lag at each action tick
    values: list[float]  # the time the played step stands for
    behind: list[float]  # now - that time
    staleness: list[float]
    max_in_flight: int
    underruns: int
    requests: int


def drive(
    hz: float, steps: int, *, seconds: float, space: str = "joint_absolute", **config: Any
) -> Run:
    policy = FixedLatencyPolicy(hz, steps, space)
    executor = FakeClockExecutor(policy)
    engine = PlaybackEngine(policy, EngineConfig(expected_covers_s=steps / hz, **config))
    engine._executor = executor  # type: ignore[assignment]
    run = Run([], [], [], [], 0, 0, 0)
    with engine:
        for k in range(int(seconds * hz)):
            now = k / hz
            executor.advance(now)
            result = engine.tick(now, policy.observe)
            if result.kind == "action":
                assert result.action is not None
                run.values.append(float(result.action[0]))
                run.behind.append(now - float(result.action[0]))
                run.staleness.append(result.staleness_s)
                run.lags.append(engine.lag_s)
            run.max_in_flight = max(run.max_in_flight, engine.in_flight)
        outcome = engine.outcome(reason="completed", stopped_early=False)
        run.underruns, run.requests = outcome.underruns, outcome.requests
    return run


def lag_bound(hz: float, steps: int, in_flight: int = 3) -> float:
    """L + L/M - covers + one period, with L as the engine measures it (whole ticks)."""
    period = 1 / hz
    measured = math.ceil(LATENCY_S / period - 1e-9) * period
    return max(0.0, measured + measured / in_flight - steps / hz) + period


@pytest.mark.parametrize(
    ("hz", "steps"),
    [(15.0, 15), (15.0, 32), (25.0, 16), (30.0, 15)],
    ids=["1.00s", "2.13s", "0.64s", "0.50s"],
)
def test_the_lag_settles_at_the_smallest_one_the_refills_sustain(hz: float, steps: int) -> None:
    run = drive(hz, steps, seconds=40.0)
    period = 1 / hz
    target = round(lag_bound(hz, steps) / period) * period
    settled = run.lags[-int(5 * hz) :]
    assert target - 1e-9 <= min(settled) and max(settled) <= target + period + 1e-9
    # commands play the plan exactly ``lag`` behind, never underrunning
    assert run.behind[-1] == pytest.approx(run.lags[-1])
    assert run.underruns == 0
    assert run.max_in_flight <= 3


def test_the_lag_moves_at_most_one_period_per_chunk_and_never_yanks_back() -> None:
    run = drive(15.0, 15, seconds=30.0)
    period = 1 / 15
    changes = [b - a for a, b in zip(run.lags, run.lags[1:], strict=False) if b != a]
    assert changes and all(abs(c) <= period + 1e-9 for c in changes)
    # the plan never goes back in time: a swap moves on by one step, two while shrinking
    forward = [b - a for a, b in zip(run.values, run.values[1:], strict=False)]
    assert min(forward) >= -1e-9 and max(forward) <= 2 * period + 1e-9
    # once settled, every tick (swaps included) moves on by exactly one step
    assert forward[-150:] == pytest.approx([period] * 150)


def test_fresh_plays_fresher_steps_than_the_round_trip_at_more_requests() -> None:
    fresh = drive(15.0, 15, seconds=30.0)
    old = drive(15.0, 15, seconds=30.0, freshness="round_trip")
    assert old.lags[-1] == pytest.approx(0.8)  # the whole round trip, in whole ticks
    assert fresh.lags[-1] < 0.25
    tail = slice(-150, None)
    assert np.median(fresh.staleness[tail]) < np.median(old.staleness[tail]) - 0.1
    assert np.median(fresh.behind[tail]) < np.median(old.behind[tail]) - 0.5
    assert fresh.underruns == old.underruns == 0
    assert fresh.requests > old.requests


def test_delta_spaces_keep_the_round_trip() -> None:
    run = drive(15.0, 15, seconds=20.0, space="joint_delta")
    assert run.lags[-1] == pytest.approx(0.8)


def test_freshness_is_checked() -> None:
    with pytest.raises(ValueError, match="freshness"):
        EngineConfig(freshness="stale")
