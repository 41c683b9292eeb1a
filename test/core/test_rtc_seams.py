"""What the prefix buys at the seams, measured on the fake clock (``rtc_clock``): exact and
deterministic, so the numbers are asserted; ``bench/rtc.py`` measures the same on openpi's
real server in real time.

The simulator's ideal RTC policy (``sequence_ai_sim.rtc_peer``) behind the openpi backend;
its chunks disagree as real models' do (a per-chunk offset and drift of 0.05 on every
dimension, the calibrated level of velocity models) or not at all. The seam is the largest
per-dimension change from the last command of a chunk to the first of the next, the
in-chunk step the largest such change inside a chunk.
"""

from __future__ import annotations

import pytest
from support.rtc_clock import DIM, HZ, drive, profile

from sequence_ai_sim.disagreement import Spread
from sequence_ai_sim.rtc_peer import AGREEING, RtcTrajectoryPolicy

DISAGREEING = Spread(offset_sd=0.05, drift_sd=0.05)
#: The goal: a seam no larger than this many in-chunk steps.
GOAL = 1.1


def seam_ratio(
    rtc: bool, spread: Spread, *, horizon: int, latency_s: float, handover: str = "none"
) -> float:
    """The largest seam over the largest in-chunk step, in a 30 s run at 25 Hz; by default
    without a hand-over, so the seam is the policy's own (what the prefix is for)."""
    policy = RtcTrajectoryPolicy(
        action_dim=DIM,
        control_hz=HZ,
        horizon=horizon,
        disagreement=spread,
        seed=7,
        timestamp_key=("observation/timestamp",),
    )
    run = drive(policy, profile(rtc=rtc), latency_s=latency_s, seconds=30.0, handover=handover)
    seams, steps = run.seams()
    assert len(seams) >= 30
    return max(seams) / max(steps)


@pytest.mark.parametrize("spread", [AGREEING, DISAGREEING], ids=["agreeing", "disagreeing"])
def test_with_the_prefix_every_seam_is_an_in_chunk_step(spread: Spread) -> None:
    """0.8 s chunks at a 0.3 s round trip (one request out at a time)."""
    assert seam_ratio(True, spread, horizon=20, latency_s=0.3) <= GOAL


def test_without_it_disagreeing_chunks_jump_at_every_seam() -> None:
    without = seam_ratio(False, DISAGREEING, horizon=20, latency_s=0.3)
    assert without > 3 * GOAL
    # chunks that agree hand over cleanly either way: nothing for the prefix to fix
    assert seam_ratio(False, AGREEING, horizon=20, latency_s=0.3) <= GOAL


def test_the_default_hand_over_keeps_what_the_prefix_made_continuous() -> None:
    """The blended commands are what the prefix is made of: with the engine's default
    hand-over on, a policy that continues the prefix still meets the goal."""
    assert seam_ratio(True, DISAGREEING, horizon=20, latency_s=0.3, handover="smooth") <= GOAL
