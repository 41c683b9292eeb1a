"""The first chunk boundaries of a run under latency jitter, where few refills were measured.

Every run is on a fake clock (``engine_clock``): many short seeded runs take well under a
second, and every count is exact. No assertion here is about wall time.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.engine_clock import LATENCY_S, Clock, ClockGateway, Robot, robot, run_for

SEEDS = 40
EARLY_BOUNDARIES = 10


def short_run(hz: float, steps: int, seed: int, log_sigma: float = 0.3) -> tuple[Robot, list[int]]:
    """18 s of a lognormal refill (log-sigma 0.3: p99 = 2x the median), as in the
    continuity benchmark's jitter sweep; returns the robot and, for each stall, how many
    chunks had started before it (the boundary it fell on)."""
    draws = np.exp(log_sigma * np.random.default_rng(seed).standard_normal(1000)) * LATENCY_S
    gateway = ClockGateway(Clock(), service=lambda n: float(draws[n]))
    one = robot(gateway, hz, steps, "joint_velocity")
    boundaries: list[int] = []
    tick = one.tick

    def counting_tick(now: float) -> None:
        before = one.engine.snapshot()["stalls"]
        tick(now)
        snap = one.engine.snapshot()
        if snap["stalls"] != before:
            boundaries.append(int(snap["chunks"]))

    one.tick = counting_tick  # type: ignore[method-assign]
    with one.engine:
        run_for(gateway, [one], 18.9)
    return one, boundaries


@pytest.mark.parametrize(
    ("hz", "steps", "bound"), [(15.0, 15, 0.10), (30.0, 15, 0.155)], ids=["1.00s", "0.50s"]
)
def test_few_refills_measured_leave_fewer_of_the_early_boundaries_stalled(
    hz: float, steps: int, bound: float
) -> None:
    """Boundaries 2-10, where up to four refills were measured. With the slowest standing in
    for the expected refill (a new one exceeds the slowest of k 1 time in k+1), 12.2 %
    (1.00 s chunks) and 18.9 % (0.50 s) of them stalled in these runs; with the range
    margin 8.1 % and 13.3 % (the later boundaries: 0.6 %). The first boundary (about half
    the runs) is left as it was: one refill shows no spread, at a fixed latency or not."""
    early = boundaries = 0
    requests = motion = 0.0
    for seed in range(SEEDS):
        one, stalls = short_run(hz, steps, seed)
        outcome = one.outcome()
        assert outcome.chunks > EARLY_BOUNDARIES
        early += sum(1 for b in stalls if 2 <= b <= EARLY_BOUNDARIES)
        boundaries += EARLY_BOUNDARIES - 1
        requests += outcome.chunks + outcome.wasted_requests
        motion += outcome.actions / steps
    assert early <= bound * boundaries
    # what the earlier refills cost: 1.18 and 1.25 against 1.15 and 1.24 before
    assert requests / motion <= 1.3
