"""Real rclpy: the node's episode is the core ``Episode``, as shipped.

The counts in /diagnostics are the outcome's (a refused action is counted nowhere), and a
plan that stays empty past ``stall_timeout_s`` ends the episode as ``run()`` does:
``raised:Stalled``, with one hold.
"""

from __future__ import annotations

import pytest
from std_msgs.msg import Float64MultiArray
from support.realros import Tier, tier, wait_for
from support.realros.nodes import HoldServer, PolicyNode, sim_arm

from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]


def test_a_first_action_refused_by_max_step_is_counted_nowhere(
    tier: Tier, sim: GatewaySimulator
) -> None:
    sim_arm(tier)
    hold = HoldServer(tier)
    # From rest the first velocity is bounded too (the arm is still): this refuses it.
    node = PolicyNode(tier, sim, max_step=[1e-9], hold_service=f"{tier.namespace}/arm/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "validate" and "max_step" in node.output()
    assert end["actions"] == end["last.actions"] == "0"  # it was 0 against 1
    assert len(actions) == 0  # nothing was published, not even a hold (nothing moved)
    wait_for(lambda: hold.calls == 1, what="the driver's hold service")


def test_a_plan_that_stays_empty_ends_the_episode_stalled_with_one_hold(
    tier: Tier, sim: GatewaySimulator
) -> None:
    sim_arm(tier)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, stall_timeout_s=1.0, hold_service=f"{tier.namespace}/arm/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(4)
    sim.set_latency(5.0)  # every refill from now on lands after the bound has passed
    end = node.episode_end(1)
    assert end["last.reason"] == "raised:Stalled", end
    assert end["actions"] == end["last.actions"] and int(end["actions"]) >= 4
    assert not any(actions.snapshot()[-1].data[:7])  # the arm was held: zero velocity
    wait_for(lambda: hold.calls == 1, what="the driver's hold service")
    node.last_status()
    assert hold.calls == 1  # one early stop, one hold
