"""The engine's cost: the default plays at the request floor, and backs off a queueing gateway.

Every run is on a fake clock (``engine_clock``): a gateway with a fixed number of model slots
serves requests first come, first served, so robots sharing it queue behind each other
exactly, and runs are instant and deterministic. No assertion here is about wall time.
"""

from __future__ import annotations

import math

import pytest
from support.engine_clock import LATENCY_S, Clock, ClockGateway, drive, robot, run_for

from sequence_ai_core.errors import Unavailable
from sequence_ai_core.playback.load import LoadMonitor, is_busy, server_queue_s

MODELS = pytest.mark.parametrize(
    ("hz", "steps", "space"),
    [
        (15.0, 15, "joint_velocity"),
        (15.0, 32, "joint_velocity"),
        (25.0, 16, "joint_absolute"),
        (30.0, 15, "joint_velocity"),
    ],
    ids=["pi05-droid", "cosmos3", "lingbot-va", "lingbot-vla"],
)


@MODELS
def test_the_default_plays_continuously_at_about_one_request_per_chunk(
    hz: float, steps: int, space: str
) -> None:
    run = drive(hz, steps, seconds=60.0, space=space)
    outcome = run.outcome()
    chunks_of_motion = outcome.actions / steps
    assert outcome.underruns == 0
    assert outcome.requests / chunks_of_motion <= 1.1
    # seams are one in-chunk step: every chunk continues the same timeline
    assert outcome.max_seam_jump <= 1 / hz + 1e-9
    assert outcome.wasted_requests == 0 and outcome.backoffs == 0


def test_fresh_costs_more_requests_than_the_default() -> None:
    default = drive(30.0, 15, seconds=40.0, space="joint_velocity").outcome()
    fresh = drive(30.0, 15, seconds=40.0, space="joint_velocity", freshness="fresh").outcome()
    assert fresh.underruns == default.underruns == 0
    assert fresh.requests > 1.4 * default.requests
    assert fresh.staleness_p50_s < default.staleness_p50_s


def loaded_phase(t: float) -> float:
    """Other users queue the gateway for 2 s per request between 20 s and 40 s."""
    return 2.0 if 20.0 <= t < 40.0 else 0.0


def test_the_engine_backs_off_while_the_gateway_queues_and_recovers_after() -> None:
    gateway = ClockGateway(Clock(), extra_wait=loaded_phase)
    one = robot(gateway, 30.0, 15, "joint_velocity")  # 0.50 s chunks: needs 2 in flight
    with one.engine:
        run_for(gateway, [one], 70.0)
    hz = 30.0
    before = one.in_flight[: int(19 * hz)]
    # it takes one round of queued refills to see it (they started before it began)
    during = one.in_flight[int(26 * hz) : int(40 * hz)]
    after = one.limits[int(60 * hz) :]
    assert max(before) >= 2
    assert max(during) == 1 and min(one.limits[int(26 * hz) : int(40 * hz)]) == 1
    assert min(after) == 3  # the limit came back once refills were unqueued again
    outcome = one.outcome()
    assert outcome.backoffs >= 1 and outcome.queued_refills >= 3
    assert outcome.unloaded_latency_s == pytest.approx(LATENCY_S, abs=1 / hz)
    snap = one.engine.snapshot()
    for key in ("in_flight_limit", "backoffs", "busy_answers", "queue_s", "wasted_requests"):
        assert key in snap
    assert "requests" in snap and "lag_s" in snap  # existing keys stay


def test_without_backoff_the_limit_never_drops() -> None:
    gateway = ClockGateway(Clock(), extra_wait=loaded_phase)
    one = robot(gateway, 30.0, 15, "joint_velocity", backoff=False)
    with one.engine:
        run_for(gateway, [one], 45.0)
    assert min(one.limits) == 3 and one.outcome().backoffs == 0
    assert one.outcome().queued_refills >= 3  # still seen and reported


def test_a_busy_answer_cuts_the_requests_in_flight_to_one() -> None:
    gateway = ClockGateway(
        Clock(), fail=lambda n: Unavailable("busy", status=429, code="busy") if n == 12 else None
    )
    one = robot(gateway, 30.0, 15, "joint_velocity")
    with one.engine:
        run_for(gateway, [one], 30.0)
    outcome = one.outcome()
    assert outcome.busy_answers == 1 and outcome.backoffs == 1
    assert outcome.retries == 1
    assert 1 in one.limits and one.limits[-1] == 3


def fleet(robots: int, workers: int, **config: object) -> tuple[float, float]:
    """(mean duty, wasted / requests) of pi05-droid robots sharing ``workers`` slots, with
    a deterministic lognormal refill (p99 = 2x the median)."""
    import numpy as np

    draws = np.exp(0.3 * np.random.default_rng(3).standard_normal(100_000)) * LATENCY_S
    gateway = ClockGateway(Clock(), workers=workers, service=lambda n: float(draws[n]))
    fleet = [robot(gateway, 15.0, 15, "joint_velocity", **config) for _ in range(robots)]
    run_for(gateway, fleet, 60.0)
    outcomes = [r.outcome() for r in fleet]
    for r in fleet:
        r.engine.close()
    duty = sum(o.duty_cycle for o in outcomes) / robots
    wasted = sum(o.wasted_requests for o in outcomes) / sum(o.requests for o in outcomes)
    return duty, wasted


@pytest.mark.parametrize(("robots", "workers"), [(8, 8), (8, 4), (8, 2), (16, 8), (16, 2)])
def test_on_a_saturated_gateway_the_default_moves_as_much_as_one_in_flight(
    robots: int, workers: int
) -> None:
    default, wasted = fleet(robots, workers)
    single, _ = fleet(robots, workers, max_in_flight=1)
    eager, _ = fleet(robots, workers, freshness="fresh", backoff=False)
    assert default >= single - 0.01
    assert wasted <= 0.05
    if robots > workers:  # saturated: pipelining without backoff only adds load
        assert default >= eager - 0.005


def test_a_server_that_serves_one_request_at_a_time_is_probed_less_and_less() -> None:
    """openpi's server runs one inference at a time: calm at one request, queued at two.
    Probing every four refills had it at the limit of one for 67 % of the time (17 backoffs
    in 120 s, fixed probing); each raise that does not hold doubles the wait."""
    gateway = ClockGateway(Clock(), workers=1)
    one = robot(gateway, 30.0, 15, "joint_velocity")  # 0.50 s chunks: would want 2
    with one.engine:
        run_for(gateway, [one], 120.0)
    settled = one.limits[int(10 * 30.0) :]
    assert sum(limit == 1 for limit in settled) >= 0.9 * len(settled)
    assert 1 <= one.outcome().backoffs <= 6


def test_load_signals() -> None:
    assert server_queue_s({"queue_ms": 250}) == 0.25
    assert server_queue_s({"ttfa_ms": 900, "inference_ms": 800}) == pytest.approx(0.1)
    assert server_queue_s({"inference_ms": 800}) is None
    assert server_queue_s({"queue_ms": "soon"}) is None
    assert is_busy(Unavailable("x", status=429))
    assert is_busy(Unavailable("x", status=503, code="busy"))
    assert is_busy(Unavailable("x", status=503, code="unavailable", reason="gpu_busy"))
    assert is_busy(Unavailable("x", status=503, reason="queue_timeout"))
    assert not is_busy(Unavailable("x", status=503, code="unavailable", reason="draining"))
    assert not is_busy(Unavailable("x", status=503, warming=True, code="warming"))
    assert not is_busy(Unavailable("connection reset"))


def test_load_monitor_without_server_timing_uses_the_unloaded_round_trip() -> None:
    monitor = LoadMonitor(3)
    for _ in range(6):
        monitor.refill(0.8, {}, 1 / 15)
    assert monitor.limit == 3 and monitor.unloaded_s == pytest.approx(0.8)
    for _ in range(2):
        monitor.refill(1.6, {}, 1 / 15)  # queueing: twice the unloaded level
    assert monitor.limit == 1 and monitor.backoffs == 1
    for _ in range(1 + 2 * 4):  # the median forgets the queue, then one more per 4 calm
        monitor.refill(0.8, {}, 1 / 15)
    assert monitor.limit == 3 and not math.isnan(monitor.queue_s)


def test_a_tick_of_latency_spread_does_not_move_the_plan_at_a_seam() -> None:
    """Refills measured in whole ticks vary by a period at a fixed latency: no lag shrink,
    so every seam stays one in-chunk step."""
    hz = 30.0
    gateway = ClockGateway(Clock(), service=lambda n: LATENCY_S + (1 / hz if n % 3 else 0.0))
    one = robot(gateway, hz, 15, "joint_absolute")
    with one.engine:
        run_for(gateway, [one], 60.0)
    outcome = one.outcome()
    assert outcome.underruns == 0
    assert outcome.max_seam_jump <= 1 / hz + 1e-9
    assert outcome.requests / (outcome.actions / 15) <= 1.1


@pytest.mark.parametrize(("hz", "steps"), [(15.0, 15), (30.0, 15)], ids=["1.00s", "0.50s"])
def test_under_jitter_at_most_one_boundary_in_a_hundred_stalls(hz: float, steps: int) -> None:
    """Lognormal refill with p99 = 2x the median, at the default's request rate."""
    import numpy as np

    draws = np.exp(0.3 * np.random.default_rng(2).standard_normal(10_000)) * LATENCY_S
    gateway = ClockGateway(Clock(), service=lambda n: float(draws[n]))
    one = robot(gateway, hz, steps, "joint_velocity")
    with one.engine:
        run_for(gateway, [one], 400.0)
    outcome = one.outcome()
    boundaries = outcome.chunks - 1
    assert boundaries > 300
    assert outcome.stalls <= 0.01 * boundaries
    assert (outcome.chunks + outcome.wasted_requests) / (outcome.actions / steps) <= 1.2
