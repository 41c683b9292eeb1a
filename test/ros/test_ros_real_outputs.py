"""Real rclpy: what the node publishes, field by field, at the chunk's rate, and what it reads.

The three output types with the gripper split off (joint_trajectory one point per tick, and
the default rest-of-the-chunk trajectories), ~/chunk, raw Image and CompressedImage
inputs, the instruction topic, and the end of a completed absolute episode.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from support.realros import Tier, tier, wait_for
from support.realros.nodes import LATCHED, PolicyNode, sim_arm
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.catalogue import find_model

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]
OUTPUTS = {
    "float64_multi_array": Float64MultiArray,
    "joint_trajectory": JointTrajectory,
    "joint_state": JointState,
}


def _seconds(duration: Any) -> float:
    return float(duration.sec) + float(duration.nanosec) * 1e-9


def _check(output: str, msg: Any, joints: list[str], hz: float, velocity: bool) -> list[float]:
    """The arm values of one action message, after checking its fields; gripper split off."""
    n = len(joints)
    if output == "float64_multi_array":
        assert len(msg.data) == n and msg.layout.dim[0].label == "action"
        assert msg.layout.dim[0].size == n
        return list(msg.data)
    if output == "joint_trajectory":
        assert list(msg.joint_names) == joints and len(msg.points) == 1
        point = msg.points[0]
        assert len(point.positions) == n
        assert math.isclose(_seconds(point.time_from_start), 1.0 / hz, abs_tol=1e-6)
        assert len(point.velocities) == (n if velocity else 0)
        return list(point.velocities if velocity else point.positions)
    assert list(msg.name) == joints and len(msg.position) == n
    assert len(msg.velocity) == (n if velocity else 0)
    assert msg.header.stamp.sec > 0
    return list(msg.velocity if velocity else msg.position)


def _gripper(output: str, msg: Any) -> float:
    if output == "float64_multi_array":
        assert msg.layout.dim[0].label == "gripper"
        return float(msg.data[0])
    if output == "joint_trajectory":
        assert list(msg.joint_names) == ["gripper"]
        return float(msg.points[0].positions[0])
    assert list(msg.name) == ["gripper"]
    return float(msg.position[0])


CASES = [
    ("pi05-droid", "float64_multi_array"),
    ("pi05-droid", "joint_trajectory"),
    ("pi05-droid", "joint_state"),
    ("lingbot-vla-v2-6b", "joint_trajectory"),  # 30 Hz
    ("lingbot-va-5b", "joint_trajectory"),  # absolute, 25 Hz
    ("lingbot-va-5b", "joint_state"),
]


@pytest.mark.parametrize(("model", "output"), CASES)
def test_output_fields_gripper_split_and_chunk_at_the_chunk_rate(
    tier: Tier, sim: GatewaySimulator, model: str, output: str
) -> None:
    entry = find_model(model)
    assert entry is not None
    velocity, hz = entry.action_space == "joint_velocity", entry.control_hz
    joints = [f"joint_{i + 1}" for i in range(entry.joint_count)]
    sim_arm(tier, model=model, command_type=output)
    # One point per tick, with velocities (a controller that allows a moving end, as
    # Humble's does); the default chunk trajectories are checked below.
    mode = (
        {"trajectory_mode": "point", "trajectory_velocities": True,
         "allow_nonzero_velocity_at_trajectory_end": True}
        if output == "joint_trajectory" else {}
    )  # fmt: skip
    node = PolicyNode(tier, sim, model=model, output_type=output, max_actions=24, **mode)
    actions = tier.probe.listen(OUTPUTS[output], "action")
    grippers = tier.probe.listen(OUTPUTS[output], "gripper_command")
    chunks = tier.probe.listen(JointTrajectory, "sequence_ai/chunk")
    node.bring_up()
    node.start_episode()
    assert node.episode_end(1)["last.reason"] == "completed"

    def moving(messages: list[Any]) -> int:
        return sum(1 for m in messages if any(_check(output, m, joints, hz, velocity)))

    if velocity:  # the end's zero hold is the last message
        wait_for(lambda: (m := actions.snapshot()) and moving(m) == 24 and moving(m[-1:]) == 0)
    else:
        actions.wait_count(24)
        time.sleep(0.5)  # room for a command after the last target to arrive, if one were sent
    received = actions.snapshot()
    values = [_check(output, m, joints, hz, velocity) for m in received]
    assert all(math.isfinite(v) for row in values for v in row)
    if velocity:  # 24 actions, then zeros (plus a zero hold per underrun on a loaded machine)
        assert sum(1 for row in values if any(row)) == 24 and not any(values[-1])
    else:  # absolute: exactly the 24 targets, no hold after them (the last target holds)
        assert len(received) == 24
        # targets follow the reference trajectory: small steps, never a jump
        assert (
            max(
                abs(a - b) for r, s in itertools.pairwise(values) for a, b in zip(r, s, strict=True)
            )
            < 0.2
        )
    assert all(0.0 <= _gripper(output, m) <= 1.0 for m in grippers.wait_count(24))
    # Never faster than the chunk's rate (a loaded machine can only make it slower).
    times = actions.times[:24]
    assert times[-1] - times[0] >= 0.9 * 23 / hz
    chunk = chunks.wait_count(1)[0]
    assert list(chunk.joint_names) == [*joints, "gripper"]
    steps = [_seconds(p.time_from_start) for p in chunk.points]
    assert len(steps) == entry.action_horizon
    assert all(math.isclose(b - a, 1.0 / hz, abs_tol=1e-6) for a, b in itertools.pairwise(steps))
    field = "velocities" if velocity else "positions"
    assert all(len(getattr(p, field)) == len(joints) + 1 for p in chunk.points)


def _check_trajectory(msg: Any, names: list[str], hz: float) -> list[float]:
    """The times of one chunk trajectory (trajectory_mode chunk), after checking its fields:
    positions only, one period apart, the first target one period after the stamp (or a
    point at 0 carrying on from the trajectory before it)."""
    assert list(msg.joint_names) == names and len(msg.points) > 0
    assert all(len(p.positions) == len(names) and not p.velocities for p in msg.points)
    assert all(math.isfinite(v) for p in msg.points for v in p.positions)
    times = [_seconds(p.time_from_start) for p in msg.points]
    ahead = [t for t in times if t > 0.0]
    assert len(times) - len(ahead) <= 1 and times[0] == min(times)
    assert math.isclose(ahead[0], 1.0 / hz, abs_tol=1e-6)
    assert all(math.isclose(b - a, 1.0 / hz, abs_tol=1e-6) for a, b in itertools.pairwise(ahead))
    return times


@pytest.mark.parametrize("model", ["pi05-droid", "lingbot-vla-v2-6b", "lingbot-va-5b"])
def test_default_joint_trajectory_is_the_rest_of_the_chunk(
    tier: Tier, sim: GatewaySimulator, model: str
) -> None:
    """trajectory_mode chunk (the default): one trajectory per chunk, not one per tick, with
    the gripper's in step; a velocity model's end is the one-point zero hold."""
    entry = find_model(model)
    assert entry is not None
    velocity, hz = entry.action_space == "joint_velocity", entry.control_hz
    joints = [f"joint_{i + 1}" for i in range(entry.joint_count)]
    sim_arm(tier, model=model, command_type="joint_trajectory")
    node = PolicyNode(tier, sim, model=model, output_type="joint_trajectory", max_actions=24)
    actions = tier.probe.listen(JointTrajectory, "action")
    grippers = tier.probe.listen(JointTrajectory, "gripper_command")
    node.bring_up()
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "completed"
    if velocity:
        hold = wait_for(lambda: (m := actions.snapshot()[-1]) and len(m.points) == 1 and m)
        assert list(hold.points[0].velocities) == [0.0] * len(joints)
        time.sleep(0.5)  # nothing after the hold
        received = actions.snapshot()
        assert received[-1] is hold
        # On a loaded machine a refill can come late: each underrun spell holds once (the
        # same zero point); chunk trajectories carry positions only.
        holds = [m for m in received[:-1] if len(m.points[0].velocities)]
        assert len(holds) <= float(end["last.underruns"])
        trajectories = [m for m in received[:-1] if not len(m.points[0].velocities)]
    else:
        wait_for(lambda: len(actions) >= 2, what="two chunk trajectories")
        time.sleep(0.5)  # room for a message after the last target, if one were sent
        trajectories = actions.snapshot()
    # 24 actions from chunks of 15-16 steps: a few trajectories, far fewer than 24 messages
    assert 2 <= len(trajectories) < 24
    assert all(len(m.points) <= entry.action_horizon + 1 for m in trajectories)
    assert sum(len(m.points) for m in trajectories) >= 24  # every played action was in one
    for msg in trajectories:
        _check_trajectory(msg, joints, hz)
    # Each arm message has its gripper message, stamped alike (holds' included).
    sent = grippers.wait_count(len(actions.snapshot()))
    by_stamp = {(g.header.stamp.sec, g.header.stamp.nanosec): g for g in sent}
    for arm in trajectories:
        grip = by_stamp[(arm.header.stamp.sec, arm.header.stamp.nanosec)]
        times = [_seconds(p.time_from_start) for p in grip.points]
        assert times == _check_trajectory(arm, joints, hz)
        assert all(0.0 <= p.positions[0] <= 1.0 for p in grip.points)


def test_a_chunk_trajectory_carries_no_step_past_max_actions(
    tier: Tier, sim: GatewaySimulator
) -> None:
    """An absolute episode ends on its last target, without a hold: a trajectory with steps
    past max_actions would have the controller play them after the episode completed."""
    sim_arm(tier, model="lingbot-va-5b", command_type="joint_trajectory")
    node = PolicyNode(
        tier, sim, model="lingbot-va-5b", output_type="joint_trajectory", max_actions=5
    )
    actions = tier.probe.listen(JointTrajectory, "action")
    node.bring_up()
    node.start_episode()
    assert node.episode_end(1)["last.reason"] == "completed"
    first = actions.wait_count(1)[0]
    time.sleep(0.5)
    assert len(first.points) == 5  # the chunk has 16 steps
    assert all(len(m.points) <= 5 for m in actions.snapshot())


@pytest.mark.parametrize("image_format", ["raw", "compressed"])
def test_images_and_the_instruction_reach_the_gateway(
    tier: Tier, sim: GatewaySimulator, image_format: str
) -> None:
    sim_arm(tier, image_format=image_format)
    node = PolicyNode(tier, sim, max_actions=8, compressed=image_format == "compressed")
    instruction = tier.probe.publisher(String, "instruction", LATCHED)
    instruction.publish(String(data="stack the cups"))
    node.bring_up()
    wait_for(lambda: instruction.get_subscription_count() >= 1, what="the instruction subscriber")
    node.start_episode()
    assert node.episode_end(1)["last.reason"] == "completed"
    observations = [r["observation"] for r in sim.received]
    assert observations
    for observation in observations:
        assert observation["instruction"] == "stack the cups"
        views = sorted(image["view"] for image in observation["images"])
        assert views == ["exterior_1", "wrist_left"]
        assert len(observation["proprioception"]["joint_positions"]) == 7
        assert 0.0 <= observation["proprioception"]["gripper"] <= 1.0
