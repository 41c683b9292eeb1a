"""Real rclpy: gateway faults, rejected actions, underruns and bad arm readings, as shipped.

Each ends (or survives) the episode with exactly one hold and says why in /diagnostics; the
key appears nowhere. The gateway simulator runs in the test process, so faults are injected
into the very server the node process talks to.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from support import TEST_KEY
from support.faultkit import PERSISTENT
from support.realros import Tier, tier, wait_for
from support.realros.nodes import HoldServer, PolicyNode, sim_arm
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.faults import Fault

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]
WARN, ERROR = b"\x01", b"\x02"
MODEL = "lingbot-vla-v2-6b"  # 30 Hz, 0.50 s chunks, 6 joints + gripper


def _safe(actions: list[Any], joints: int) -> None:
    for msg in actions:
        assert len(msg.data) == joints and all(math.isfinite(v) for v in msg.data)


CASES = [
    pytest.param(Fault.status(401), 1, "raised:AuthError", ERROR, id="401"),
    pytest.param(Fault.status(402), 1, "raised:OutOfCredit", ERROR, id="402"),
    pytest.param(Fault.status(500), 1, "raised:SequencesError", ERROR, id="500"),
    pytest.param(Fault.status(429), PERSISTENT, "raised:Unavailable", ERROR, id="429-persistent"),
    pytest.param(Fault.reset(), PERSISTENT, "raised:Unavailable", ERROR, id="reset-persistent"),
    pytest.param(Fault.warming(0.05), 1, "raised:Unavailable", WARN, id="503-warming"),
    pytest.param(Fault.nan(), 1, "raised:InvalidResponse", ERROR, id="nan"),
]


@pytest.mark.parametrize(("fault", "times", "reason", "level"), CASES)
def test_a_gateway_fault_stops_the_episode_once(
    tier: Tier, sim: GatewaySimulator, fault: Fault, times: int, reason: str, level: bytes
) -> None:
    sim_arm(tier, model=MODEL)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, model=MODEL, hold_service=f"{tier.namespace}/arm/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(3)
    sim.inject(fault, times=times)
    end = node.episode_end(1)
    assert end["last.reason"] == reason
    assert wait_for(lambda: hold.calls == 1, what="one hold service call")
    assert wait_for(lambda: not any(actions.snapshot()[-1].data), what="the zero hold")
    _safe(actions.snapshot(), 6)
    status = node.status_where(lambda s: reason.split(":")[1] in s.message, "the fault status")
    assert status.level == level
    assert TEST_KEY not in node.output() + repr(node.statuses())


def test_a_transient_fault_is_retried_and_the_episode_completes(tier: Tier, clean_env: Any) -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.1) as slow:
        sim_arm(tier, model=MODEL)
        hold = HoldServer(tier)
        node = PolicyNode(tier, slow, model=MODEL, max_actions=40,
                          hold_service=f"{tier.namespace}/arm/hold")  # fmt: skip
        actions = tier.probe.listen(Float64MultiArray, "action")
        node.bring_up()
        node.start_episode()
        actions.wait_count(3)
        slow.inject(Fault.status(503), times=1)
        end = node.episode_end(1)
        assert end["last.reason"] == "completed" and int(end["last.retries"]) >= 1
        assert hold.calls == 0
        _safe(actions.snapshot(), 6)


def test_the_gateway_gone_mid_episode_holds(tier: Tier, clean_env: Any) -> None:
    gateway = GatewaySimulator(api_key=TEST_KEY, latency_s=0.02).start()
    try:
        sim_arm(tier, model=MODEL)
        node = PolicyNode(tier, gateway, model=MODEL)
        actions = tier.probe.listen(Float64MultiArray, "action")
        node.bring_up()
        node.start_episode()
        actions.wait_count(3)
        gateway.stop()
        assert node.episode_end(1)["last.reason"] == "raised:Unavailable"
        assert wait_for(lambda: not any(actions.snapshot()[-1].data), what="the zero hold")
        assert node.transition("deactivate") and node.transition("cleanup")
        assert node.process.alive
    finally:
        gateway.stop()


def test_an_action_outside_the_limits_stops_the_episode(tier: Tier, sim: GatewaySimulator) -> None:
    sim_arm(tier)
    upper = [0.05] * 7 + [1.0]  # the reference arm moves faster than 0.05 rad/s
    node = PolicyNode(tier, sim, lower_limits=[-0.05] * 7 + [0.0], upper_limits=upper)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "validate"
    assert all(max(abs(v) for v in m.data) <= 0.05 for m in actions.snapshot())


def test_an_underrun_holds_once_per_spell_and_warns(tier: Tier, sim: GatewaySimulator) -> None:
    sim_arm(tier)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, hold_service=f"{tier.namespace}/arm/hold")
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(4)
    sim.set_latency(2.5)  # longer than the 1.0 s chunk: the plan runs out
    status = node.status_where(lambda s: "underruns" in s.message, "an underrun warning")
    assert status.level == WARN
    zeros = [not any(m.data) for m in actions.snapshot()]
    assert any(zeros)  # the plan ran out: a zero-velocity hold went out
    assert not any(a and b for a, b in itertools.pairwise(zeros))  # once per spell
    assert hold.calls == 0  # an underrun is not an early stop


def test_no_joint_states_sends_nothing_and_says_so(tier: Tier, sim: GatewaySimulator) -> None:
    node = PolicyNode(tier, sim)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    status = node.status_where(lambda s: "no joint_states received yet" in s.message, "why")
    assert status.level == ERROR
    assert node.values(status)["input_problem"] == "no joint_states received yet"
    assert node.values(status)["episode_running"] == "True"  # waiting; nothing can move
    assert sim.stats()["act_requests"] == 0 and len(actions) == 0
    assert node.trigger("stop").success


def test_a_first_absolute_target_far_from_the_arm_is_refused(
    tier: Tier, sim: GatewaySimulator
) -> None:
    joints = [f"joint_{i + 1}" for i in range(6)]
    far = JointState(name=[*joints, "gripper"], position=[2.5] * 6 + [0.5])
    states = tier.probe.publisher(JointState, "joint_states", 10)
    tier.probe.node.create_timer(0.02, lambda: states.publish(far))
    node = PolicyNode(tier, sim, model="lingbot-va-5b", output_type="joint_trajectory",
                      camera_views=None, camera_topics=None, camera_encodings=None,
                      max_step=[0.5])  # fmt: skip
    actions = tier.probe.listen(JointTrajectory, "action")
    node.bring_up()
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "validate"
    assert "max_step" in node.output()
    assert len(actions) == 0


@pytest.mark.parametrize("field", ["position", "velocity"])
def test_a_non_finite_joint_reading_is_never_sent(
    tier: Tier, sim: GatewaySimulator, field: str
) -> None:
    joints = [f"joint_{i + 1}" for i in range(6)]
    states = tier.probe.publisher(JointState, "joint_states", 10)
    glitch = [False]

    def publish() -> None:
        msg = JointState(name=[*joints, "gripper"], position=[0.0] * 6 + [0.5])
        msg.velocity = [0.0] * 7
        if glitch[0]:
            getattr(msg, field)[2] = math.nan
        states.publish(msg)

    tier.probe.node.create_timer(0.02, publish)
    node = PolicyNode(tier, sim, model=MODEL, camera_views=None, camera_topics=None,
                      camera_encodings=None)  # fmt: skip
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    actions.wait_count(3)
    glitch[0] = True
    if field == "position":  # an unusable arm reading ends motion like a stale one
        assert node.episode_end(1)["last.reason"] == "stale_input"
    else:  # velocities are optional: omitted, the episode goes on
        actions.wait_count(len(actions) + 10)
    for record in sim.received:
        proprio = record["observation"]["proprioception"]
        values = proprio["joint_positions"] + (proprio.get("joint_velocities") or [])
        assert all(math.isfinite(v) for v in values)
    _safe(actions.snapshot(), 6)
    assert node.process.alive
