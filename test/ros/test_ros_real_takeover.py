"""Real rclpy: a person takes the arm over mid-episode and hands it back.

The policy node, the simulated arm and the gateway simulator run as processes; the test's
probe is the operator: it takes the arm by the ``takeover`` topic or the ``~/set_takeover``
service, drives the simulated arm on its own ``operator_command`` topic, hands it back, and
labels the episode. Checked: nothing is published while a person has the arm, the feedback
says who has it, the first command after the hand-back starts from where the person left the
arm (rest for speeds, the measured position for targets) within one in-chunk step, the bag
holds the takeover and the operator's commands, an e-stop meanwhile latches, and the episode
completes with ``max_actions`` policy actions.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from std_msgs.msg import Bool, Float64MultiArray
from std_srvs.srv import SetBool
from support.realros import Tier, tier, wait_for
from support.realros.control_plane import EpisodeClient, Goal
from support.realros.nodes import LATCHED, NODE, HoldServer, PolicyNode, sim_arm
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_core.recording import topics
from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(150)]
__all__ = ["tier"]

#: How long the person has the arm, and how often their device commands it.
HELD_S = 1.2
DEVICE_HZ = 10.0


def _up(
    tier: Tier, sim: GatewaySimulator, model: str, **changes: Any
) -> tuple[PolicyNode, HoldServer]:
    sim_arm(tier, model=model)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, model=model, hold_service=f"{tier.namespace}/arm/hold", **changes)
    node.bring_up()
    return node, hold


def _set_takeover(tier: Tier, engaged: bool) -> Any:
    return tier.probe.call(SetBool, f"{NODE}/set_takeover", SetBool.Request(data=engaged))


def _device(tier: Tier, listeners: int = 1) -> Any:
    """The operator's device on the simulated arm's own topic, once ``listeners`` hear it
    (the arm; the policy node too when it records ``teleop_topic``)."""
    device = tier.probe.publisher(Float64MultiArray, "operator_command", 10)
    tier.probe.matched(device, listeners)
    return device


def _drive(device: Any, values: list[float], seconds: float) -> int:
    """``values`` from the operator's device for ``seconds``."""
    sent = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        device.publish(Float64MultiArray(data=values))
        sent += 1
        time.sleep(1 / DEVICE_HZ)
    return sent


def _largest_step(chunk: JointTrajectory, arm: int, velocity: bool) -> float:
    rows = np.array([p.velocities if velocity else p.positions for p in chunk.points])[:, :arm]
    return float(np.max(np.abs(np.diff(rows, axis=0))))


def _source(goal: Goal, source: str) -> Any:
    return goal.wait_feedback(lambda f: f.control_source == source, f"control_source {source}")


def test_a_takeover_by_topic_publishes_nothing_and_hands_back_from_rest(
    tier: Tier, sim: GatewaySimulator
) -> None:
    bags = tier.logs / "bags"
    node, hold = _up(tier, sim, "pi05-droid", record_dir=str(bags), teleop_topic="operator_command")
    actions = tier.probe.listen(Float64MultiArray, "action")
    chunks = tier.probe.listen(JointTrajectory, f"{NODE}/chunk")
    takeover = tier.probe.publisher(Bool, "takeover", LATCHED)
    tier.probe.matched(takeover, 3)
    device = _device(tier, listeners=2)
    client = EpisodeClient(tier)
    goal = client.playing(actions=8)
    takeover.publish(Bool(data=True))
    _source(goal, "human")
    published = len(actions)
    speeds = [0.3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]  # 0.3 rad/s on the first joint
    operator_commands = _drive(device, speeds, HELD_S)
    assert len(actions) == published  # nothing went out while the person had the arm
    chunks_before = len(chunks)
    takeover.publish(Bool(data=False))
    _source(goal, "policy")
    wait_for(lambda: len(actions) >= published + 3, what="commands after the hand-back")
    after = [np.array(m.data[:7]) for m in actions.since(published)]
    assert not after[0].any()  # the hand-back's hold: zero velocity
    first_chunk = wait_for(lambda: (chunks.since(chunks_before) or [None])[0], what="a new chunk")
    step = _largest_step(first_chunk, 7, velocity=True)
    assert np.max(np.abs(after[1])) <= 1.0 * step + 1e-9, (after[1], step)
    goal.cancel()
    status, outcome = goal.result()
    assert status == "canceled" and outcome.takeovers == 1, node.output()
    assert outcome.takeover_s >= HELD_S * 0.8
    assert 0 < outcome.max_resume_s <= outcome.latency_p95_s + 1 / 15 + 0.05
    feedback = goal.feedback.snapshot()
    assert {"human", "policy"} <= {f.control_source for f in feedback}
    assert "human" in {f.state for f in feedback}
    wait_for(lambda: hold.calls == 1, what="the cancel's hold")
    _bag_holds_the_takeover(Path(outcome.recording), operator_commands)


def _bag_holds_the_takeover(bag: Path, operator_commands: int) -> None:
    wait_for(lambda: (bag / "metadata.yaml").exists(), what="the bag finished")
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        events = []
        for connection, _, raw in reader.messages():
            if connection.topic == topics.EVENTS_TOPIC.name:
                events.append(raw)
    assert any(b"takeover" in raw for raw in events) and any(b"release" in raw for raw in events)
    operator = [t for t in counts if "operator" in t or "human/command" in t]
    assert operator and counts[operator[0]] >= operator_commands // 2, counts
    arm = [t for t in counts if t.startswith("/human") and "joint" in t]
    assert arm and counts[arm[0]] >= HELD_S * 10 * 0.7, counts
    # the node reads the gripper joint: each reading's gripper beside it
    assert counts[topics.HUMAN_STATE.name] == counts[arm[0]], counts


def test_a_takeover_by_service_hands_back_from_the_measured_position_and_a_label_ends_it(
    tier: Tier, sim: GatewaySimulator
) -> None:
    _, hold = _up(tier, sim, "lingbot-va-5b")
    actions = tier.probe.listen(Float64MultiArray, "action")
    chunks = tier.probe.listen(JointTrajectory, f"{NODE}/chunk")
    device = _device(tier)
    client = EpisodeClient(tier)
    goal = client.playing(actions=10)
    assert _set_takeover(tier, True).success
    assert "unchanged" in _set_takeover(tier, True).message  # idempotent
    published = len(actions)
    left_at = np.array(actions.snapshot()[-1].data[:6])
    target = list(left_at + np.array([0.3, -0.2, 0.0, 0.0, 0.0, 0.0]))
    _drive(device, target, HELD_S)  # the person moves the arm elsewhere
    assert len(actions) == published
    chunks_before = len(chunks)
    assert _set_takeover(tier, False).success
    wait_for(lambda: len(actions) >= published + 3, what="commands after the hand-back")
    after = [np.array(m.data[:6]) for m in actions.since(published)]
    measured = after[0]  # the hand-back's hold: the measured position, where the person left it
    assert np.max(np.abs(measured - np.array(target))) < 0.05
    first_chunk = wait_for(lambda: (chunks.since(chunks_before) or [None])[0], what="a new chunk")
    step = _largest_step(first_chunk, 6, velocity=False)
    assert np.max(np.abs(after[1] - measured)) <= 1.0 * step + 1e-9, (after[1], measured, step)
    end = tier.probe.call(SetBool, f"{NODE}/end_episode", SetBool.Request(data=True))
    assert end.success
    status, outcome = goal.result()
    assert (status, outcome.reason, outcome.label) == ("succeeded", "stopped", "success")
    assert outcome.takeovers == 1 and outcome.max_resume_jump >= 0.0
    wait_for(lambda: hold.calls == 1, what="the label's hold")
    latched = client.outcomes.wait_count(1)[-1]
    assert latched.label == "success"


def test_an_estop_while_taken_over_latches_and_holds(tier: Tier, sim: GatewaySimulator) -> None:
    node, hold = _up(tier, sim, "pi05-droid")
    actions = tier.probe.listen(Float64MultiArray, "action")
    client = EpisodeClient(tier)
    goal = client.playing(actions=5)
    assert _set_takeover(tier, True).success
    published = len(actions)
    node.estop(True)
    status, outcome = goal.result()
    assert (status, outcome.reason, outcome.takeovers) == ("aborted", "estop", 1)
    wait_for(lambda: len(actions) > published, what="the e-stop's hold")
    assert not np.array(actions.since(published)[0].data[:7]).any()
    wait_for(lambda: hold.calls == 1, what="the driver's hold service")
    assert not client.send(max_actions=5).accepted
    assert _set_takeover(tier, False).success  # no episode to hand back: the state only


def test_an_episode_completes_with_max_actions_policy_actions(
    tier: Tier, sim: GatewaySimulator
) -> None:
    _, hold = _up(tier, sim, "pi05-droid")
    actions = tier.probe.listen(Float64MultiArray, "action")
    client = EpisodeClient(tier)
    goal = client.send(max_actions=60)
    goal.wait_feedback(lambda f: f.actions >= 10, "10 actions played")
    assert _set_takeover(tier, True).success
    time.sleep(0.6)
    assert _set_takeover(tier, False).success
    status, outcome = goal.result()
    assert (status, outcome.reason, outcome.actions) == ("succeeded", "completed", 60)
    # the 60 policy commands, the hand-back's hold and the zeros that end a velocity episode
    sent = wait_for(lambda: len(actions) >= 62 and actions.snapshot(), what="the final hold")
    zeros = [k for k, m in enumerate(sent) if not np.array(m.data[:7]).any()]
    assert len(sent) == 62 and len(zeros) == 2 and zeros[-1] == 61, zeros
    assert hold.calls == 0
