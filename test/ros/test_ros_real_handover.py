"""Real rclpy: what the node publishes at a seam is the hand-over's blended command.

The simulator's chunks disagree as real models' do (``disagreement="calibrated"``), so the
plan jumps at every seam; the node, on the engine's default hand-over, publishes commands
whose largest change is the outcome's ``max_seam_step``, well under the plan's jump.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from std_msgs.msg import Float64MultiArray
from support import TEST_KEY
from support.realros import Tier, tier
from support.realros.nodes import PolicyNode, sim_arm

from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]


@pytest.fixture
def disagreeing() -> Iterator[GatewaySimulator]:
    with GatewaySimulator(
        api_key=TEST_KEY, latency_s=0.3, disagreement="calibrated", disagreement_seed=5
    ) as server:
        yield server


def test_the_node_publishes_the_blended_command_at_each_seam(
    tier: Tier, disagreeing: GatewaySimulator
) -> None:
    sim_arm(tier)
    node = PolicyNode(tier, disagreeing, max_actions=150)  # pi05-droid: 10 s of velocities
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "completed", end
    jump, sent = float(end["last.max_seam_jump"]), float(end["last.max_seam_step"])
    assert int(end["last.blended_seams"]) >= 3, end
    # A chunk after an underrun plays from its first step, and a late tick skips a step: on a
    # loaded machine either may land in a hand-over. Otherwise the arm was sent the hand-over.
    clean = end["last.underruns"] == end["last.skipped_late"] == "0"
    assert sent < (0.5 if clean else 1.0) * jump, end
    arm = np.array([message.data[:7] for message in actions.snapshot()])
    # an underrun hold (zero velocities, on a loaded machine) is not a seam: leave it out
    arm = arm[np.any(arm != 0.0, axis=1)][:150]
    published = float(np.max(np.abs(np.diff(arm, axis=0))))
    # every published change is an in-chunk step or a blended seam step, never the jump
    assert published < jump, (published, jump, sent)
