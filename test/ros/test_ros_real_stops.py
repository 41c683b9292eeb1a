"""Real rclpy: every way an episode stops, with the hold each one sends, as shipped.

E-stop on both QoS kinds, latch and release, e-stop after a completed episode and the
reverse, ~/start_episode and ~/stop, a real Trigger hold service, stale inputs per output
type, gateway errors, and the diagnostics levels and key-values each one leaves.
"""

from __future__ import annotations

import math

import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from support.realros import Tier, tier, wait_for
from support.realros.nodes import NODE, HoldServer, PolicyNode, sim_arm
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.faults import Fault

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]
ERROR, OK = b"\x02", b"\x00"
OUTPUTS = {
    "float64_multi_array": Float64MultiArray,
    "joint_trajectory": JointTrajectory,
    "joint_state": JointState,
}


@pytest.mark.parametrize("latched", [True, False], ids=["transient_local", "default_qos"])
def test_estop_holds_latches_and_releases(tier: Tier, sim: GatewaySimulator, latched: bool) -> None:
    sim_arm(tier)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, hold_service=f"{tier.namespace}/arm/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(5)
    node.estop(True, latched=latched)
    end = node.episode_end(1)
    assert end["last.reason"] == "estop" and end["estop_latched"] == "True"
    assert wait_for(lambda: not any(actions.snapshot()[-1].data[:7]), what="the zero hold")
    status = node.status_where(lambda s: "e-stop latched" in s.message, "the e-stop status")
    assert status.level == ERROR
    count = len(actions)
    answer = node.trigger("start_episode")
    assert not answer.success and "e-stop" in answer.message
    node.estop(False, latched=latched)
    wait_for(lambda: node.values(node.last_status())["estop_latched"] == "False")
    assert len(actions) == count  # releasing resumes nothing
    node.start_episode()
    actions.wait_count(count + 3)
    assert wait_for(lambda: hold.calls == 1, what="one hold service call")
    output = node.output()
    assert "incompatible QoS" not in output and "No messages will be received" not in output
    if not latched:  # what the node says instead: the e-stop is covered
        assert "received by the node's volatile subscriptions" in output


def test_estop_latched_before_the_node_starts_is_seen_on_join(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node = PolicyNode(tier, sim)
    node.wait_up()
    node.estop(True, matched=False)  # latched, before the node subscribes (configure)
    assert node.transition("configure") and node.transition("activate")
    wait_for(lambda: node.values(node.last_status())["estop_latched"] == "True")
    answer = node.trigger("start_episode")
    assert not answer.success and "e-stop" in answer.message


@pytest.mark.parametrize("first", ["completed", "estop_after_completion"])
def test_estop_after_a_completed_episode_sends_nothing_more(
    tier: Tier, sim: GatewaySimulator, first: str
) -> None:
    sim_arm(tier)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, max_actions=6, hold_service=f"{tier.namespace}/arm/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    assert node.episode_end(1)["last.reason"] == "completed"
    # 6 actions, then the zero hold of a velocity model (the last message)
    wait_for(lambda: len(actions) >= 7 and not any(actions.snapshot()[-1].data[:7]))
    sent = len(actions)
    node.estop(True)
    wait_for(lambda: node.values(node.last_status())["estop_latched"] == "True")
    node.estop(False)
    wait_for(lambda: node.values(node.last_status())["estop_latched"] == "False")
    assert len(actions) == sent and hold.calls == 0  # no episode ran: no hold, no call
    node.start_episode()  # and the latch released, a new episode runs to completion
    assert node.episode_end(2)["last.reason"] == "completed"
    assert node.process.alive


def test_start_and_stop_services(tier: Tier, sim: GatewaySimulator) -> None:
    sim_arm(tier)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, hold_service=f"{tier.namespace}/arm/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    stop = node.trigger("stop")
    assert not stop.success and stop.message == "no episode running"
    start = node.trigger("start_episode")
    assert start.success and start.message == "episode 1 started"
    again = node.trigger("start_episode")
    assert not again.success and "already running" in again.message
    actions.wait_count(4)
    running = node.status_where(lambda s: "live.in_flight" in node.values(s), "a live status")
    assert running.level == OK and node.values(running)["episode_running"] == "True"
    stop = node.trigger("stop")
    assert stop.success and stop.message == "episode stopped"
    end = node.episode_end(1)
    assert end["last.reason"] == "stopped" and int(end["last.actions"]) >= 4
    assert wait_for(lambda: hold.calls == 1, what="the hold service call")
    assert not any(actions.snapshot()[-1].data[:7])


def test_a_missing_hold_service_is_reported_and_the_hold_still_goes_out(
    tier: Tier, sim: GatewaySimulator
) -> None:
    sim_arm(tier)
    node = PolicyNode(tier, sim, hold_service="/nobody/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(3)
    node.estop(True)
    assert node.episode_end(1)["last.reason"] == "estop"
    assert wait_for(lambda: not any(actions.snapshot()[-1].data[:7]), what="the zero hold")
    wait_for(lambda: "hold service /nobody/hold is not available" in node.output())


STALE_CASES = [
    ("pi05-droid", "float64_multi_array"),
    ("pi05-droid", "joint_trajectory"),
    ("pi05-droid", "joint_state"),
    ("lingbot-va-5b", "joint_trajectory"),
    ("lingbot-va-5b", "float64_multi_array"),
]


@pytest.mark.parametrize(("model", "output"), STALE_CASES)
def test_stale_joint_states_end_motion_and_the_episode(
    tier: Tier, sim: GatewaySimulator, model: str, output: str
) -> None:
    """The one rule, every output type: joint_states older than max_observation_age_s ends
    the episode (reason stale_input) within that age plus a control period; no more motion."""
    arm = sim_arm(tier, model=model, command_type=output)
    max_age = 0.5
    joint = output != "float64_multi_array"
    node = PolicyNode(
        tier, sim, model=model, output_type=output, max_observation_age_s=max_age,
        gripper_topic="gripper_command" if joint else "",
    )  # fmt: skip
    actions = tier.probe.listen(OUTPUTS[output], "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(5)
    arm.stop()  # the driver dies: joint_states (and the cameras) stop
    count = len(actions)
    end = node.episode_end(1)
    assert end["last.reason"] == "stale_input", end
    status = node.status_where(lambda s: "stale_input" in s.message, "the stale status")
    assert status.level == ERROR and "joint_states is" in status.message
    hz = 25.0 if model == "lingbot-va-5b" else 15.0
    after = len(actions) - count
    # Within max_age + one period of the last reading, plus what was queued in DDS: never
    # the rest of the plan (1-1.5 s of it before this rule).
    assert after <= math.ceil((max_age + 0.4) * hz), after
    final = actions.snapshot()[-1]
    if model == "pi05-droid":  # velocity: the hold is zeros on every output type
        values = (
            final.data if output == "float64_multi_array"
            else final.points[0].velocities if output == "joint_trajectory" else final.velocity
        )  # fmt: skip
        assert not any(list(values)[:7])


def test_a_wrong_key_is_an_auth_error_without_the_key(tier: Tier, sim: GatewaySimulator) -> None:
    sim_arm(tier)
    wrong = "sk-wrong-0123456789abcdef"
    node = PolicyNode(tier, sim, env={"SEQUENCES_API_KEY": wrong})
    node.bring_up()
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "raised:AuthError"
    status = node.status_where(lambda s: "AuthError" in s.message, "the auth status")
    assert status.level == ERROR
    text = status.message + repr(node.values(status)) + node.output()
    assert wrong not in text


def test_out_of_credit_stops_and_reports(tier: Tier, sim: GatewaySimulator) -> None:
    sim_arm(tier)
    node = PolicyNode(tier, sim)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(3)
    sim.inject(Fault.status(402), times=10)
    end = node.episode_end(1)
    assert end["last.reason"] == "raised:OutOfCredit"
    assert wait_for(lambda: not any(actions.snapshot()[-1].data[:7]), what="the zero hold")
    status = node.last_status()
    assert status.level == ERROR and "OutOfCredit" in node.values(status)["last_error"]
    assert NODE in status.name
