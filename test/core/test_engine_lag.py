"""The lag: the round trip by default, the smallest sustainable one when ``fresh`` is asked
for, reached in a bounded number of chunks at any rate.

Every run is on a fake clock (``engine_clock``): whole runs take milliseconds and every number
is exact.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.engine_clock import LATENCY_S, drive

from sequence_ai_core.playback.engine import EngineConfig
from sequence_ai_core.playback.plan import LAG_CONVERGE_CHUNKS, ChunkPlan

MODELS = pytest.mark.parametrize(
    ("hz", "steps"),
    [(15.0, 15), (15.0, 32), (25.0, 16), (30.0, 15)],
    ids=["1.00s", "2.13s", "0.64s", "0.50s"],
)


def measured(hz: float) -> float:
    """The refill latency as the engine measures it: in whole ticks."""
    period = 1 / hz
    return math.ceil(LATENCY_S / period - 1e-9) * period


def lag_bound(hz: float, steps: int, in_flight: int = 3) -> float:
    """L + L/M - covers + one period."""
    latency = measured(hz)
    return max(0.0, latency + latency / in_flight - steps / hz) + 1 / hz


@MODELS
def test_the_fresh_lag_settles_at_the_smallest_one_the_refills_sustain(
    hz: float, steps: int
) -> None:
    run = drive(hz, steps, seconds=40.0, freshness="fresh")
    period = 1 / hz
    target = round(lag_bound(hz, steps) / period) * period
    settled = run.lags[-int(5 * hz) :]
    assert target - 1e-9 <= min(settled) and max(settled) <= target + period + 1e-9
    # commands play the plan exactly ``lag`` behind, never underrunning
    assert run.behind[-1] == pytest.approx(run.lags[-1])
    assert run.outcome().underruns == 0
    assert max(run.in_flight) <= 3


@MODELS
def test_the_default_lag_is_the_round_trip(hz: float, steps: int) -> None:
    run = drive(hz, steps, seconds=30.0)
    assert run.lags[-1] == pytest.approx(measured(hz))
    assert run.behind[-1] == pytest.approx(measured(hz))
    assert run.outcome().underruns == 0


def test_the_plan_never_goes_back_and_settles_to_one_step_per_tick() -> None:
    run = drive(15.0, 15, seconds=30.0, freshness="fresh")
    period = 1 / 15
    forward = [b - a for a, b in zip(run.values, run.values[1:], strict=False)]
    assert min(forward) >= -1e-9
    # once settled, every tick (swaps included) moves on by exactly one step
    assert forward[-150:] == pytest.approx([period] * 150)


@pytest.mark.parametrize("hz", [15.0, 30.0, 50.0, 100.0, 200.0, 500.0])
def test_the_fresh_lag_converges_in_a_bounded_number_of_chunks_at_any_rate(hz: float) -> None:
    steps = round(1.0 * hz)  # 1 s chunks
    run = drive(hz, steps, seconds=30.0, freshness="fresh")
    target = round(lag_bound(hz, steps) / (1 / hz)) / hz
    # the first chunk arrives while holding: the lag starts at the whole round trip
    assert run.lags[0] == pytest.approx(measured(hz))
    settled_at = next(k for k, lag in enumerate(run.lags) if lag <= target + 1 / hz + 1e-9)
    moves = len({round(lag, 9) for lag in run.lags[: settled_at + 1]}) - 1
    assert 1 <= moves <= LAG_CONVERGE_CHUNKS + 1
    assert run.lags[-1] <= target + 1 / hz + 1e-9
    assert run.outcome().underruns == 0


@pytest.mark.parametrize("hz", [15.0, 200.0, 500.0])
def test_a_lag_move_ends_within_the_bound_whatever_the_distance(hz: float) -> None:
    period = 1 / hz
    plan = ChunkPlan()
    plan.lag_s = 0.8  # an empty plan: nothing waits to move with it
    chunks = 0
    while plan.lag_s > 0.1 + 1.5 * period and chunks < 40:
        plan.adapt_lag(0.1, period)
        chunks += 1
    assert 1 <= chunks <= LAG_CONVERGE_CHUNKS + 1
    # a small move goes one period at a time
    before = plan.lag_s
    plan.adapt_lag(before + 1.4 * period, period)
    assert plan.lag_s == pytest.approx(before + period)


def test_fresh_plays_fresher_steps_than_the_default_at_more_requests() -> None:
    fresh = drive(15.0, 15, seconds=30.0, freshness="fresh")
    floor = drive(15.0, 15, seconds=30.0)
    assert fresh.lags[-1] < 0.25
    tail = slice(-150, None)
    assert np.median(fresh.staleness[tail]) < np.median(floor.staleness[tail]) - 0.1
    assert np.median(fresh.behind[tail]) < np.median(floor.behind[tail]) - 0.5
    assert fresh.outcome().underruns == floor.outcome().underruns == 0
    assert fresh.outcome().requests > 2 * floor.outcome().requests


def test_delta_spaces_keep_the_round_trip_even_when_fresh_is_asked() -> None:
    run = drive(15.0, 15, seconds=20.0, space="joint_delta", freshness="fresh")
    assert run.lags[-1] == pytest.approx(0.8)


def test_freshness_is_checked() -> None:
    with pytest.raises(ValueError, match="freshness"):
        EngineConfig(freshness="stale")
    assert EngineConfig().freshness == "round_trip"
