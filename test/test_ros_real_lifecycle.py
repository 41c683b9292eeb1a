"""Real rclpy: the lifecycle, parameters and process exits of the policy node as shipped."""

from __future__ import annotations

import pytest
from realros import Tier, tier
from realros.nodes import PolicyNode, sim_arm
from std_msgs.msg import Float64MultiArray

from sequence_ai_core.sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]


def test_episode_completes_and_holds(tier: Tier, sim: GatewaySimulator) -> None:
    sim_arm(tier)
    node = PolicyNode(tier, sim, max_actions=20)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "completed", end
    received = actions.wait_count(21)
    assert all(len(m.data) == 7 for m in received)
    assert list(received[-1].data) == [0.0] * 7
