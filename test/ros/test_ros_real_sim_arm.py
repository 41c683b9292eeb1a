"""Real rclpy: the simulated arm takes a person's teleop device on ``operator_command``.

The operator's messages are of the command's own type and drive the arm as the policy's do,
with and without a controller model in front of the joints (the arm as its own process,
nothing else running); in the test process, the two topics are counted apart.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from builtin_interfaces.msg import Duration
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from support.realros import Recording, Tier, ros_context, tier, wait_for
from support.realros.nodes import sim_arm
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from sequence_ai_core.types import FloatArray
from sequence_ai_sim.catalogue import find_model

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]
RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
REJECTED = "[ERROR]"  # how the sim arm's rclpy logger prints a refused command
SPEED = 0.4  # rad/s, every joint: what the operator's device asks of a velocity arm
OFFSET = 0.2  # rad, every joint: where the operator's device sends a position arm
_names = itertools.count(1)


def _joints(model: str) -> list[str]:
    entry = find_model(model)
    assert entry is not None
    return [f"joint_{i + 1}" for i in range(entry.joint_count)]


def _arm(states: Recording, joints: int) -> FloatArray:
    return np.array(states.wait_count(1)[-1].position[:joints], dtype=np.float64)


def _speeds(model: str) -> Float64MultiArray:
    """Every joint at SPEED, the gripper (riding along) at 0.5."""
    return Float64MultiArray(data=[SPEED] * len(_joints(model)) + [0.5])


def _target(model: str, start: FloatArray) -> JointTrajectory:
    """One point OFFSET from ``start``, half a second from now."""
    point = JointTrajectoryPoint(
        positions=[float(v) for v in start + OFFSET], time_from_start=Duration(nanosec=500_000_000)
    )
    return JointTrajectory(joint_names=_joints(model), points=[point])


@pytest.mark.parametrize("controller", ["none", "forward_command"])
def test_operator_speeds_move_a_velocity_arm(tier: Tier, controller: str) -> None:
    model = "pi05-droid"
    arm = sim_arm(tier, model=model, camera_hz=0.0, controller=controller)
    states = tier.probe.listen(JointState, "joint_states", qos_profile_sensor_data)
    device = tier.probe.publisher(Float64MultiArray, "operator_command", RELIABLE)
    tier.probe.matched(device)
    joints = len(_joints(model))
    start = _arm(states, joints)
    assert np.allclose(_arm(states, joints), start)  # nothing moves it but a command

    def moved_enough() -> bool:
        device.publish(_speeds(model))  # a device streams: the arm stops when it goes quiet
        return bool(np.all(_arm(states, joints) - start > 0.1))

    wait_for(moved_enough, what="the operator's speeds to move every joint forward")
    assert REJECTED not in arm.output(), arm.output()


def test_an_operator_trajectory_moves_a_position_arm_through_its_controller(tier: Tier) -> None:
    model = "lingbot-va-5b"
    arm = sim_arm(
        tier, model=model, command_type="joint_trajectory", camera_hz=0.0, controller="jtc_jazzy"
    )
    states = tier.probe.listen(JointState, "joint_states", qos_profile_sensor_data)
    device = tier.probe.publisher(JointTrajectory, "operator_command", RELIABLE)
    tier.probe.matched(device)
    joints = len(_joints(model))
    start = _arm(states, joints)
    device.publish(_target(model, start))
    wait_for(
        lambda: np.allclose(_arm(states, joints), start + OFFSET, atol=1e-3),
        what="the controller to take the arm where the operator sent it",
    )
    assert REJECTED not in arm.output(), arm.output()


@pytest.fixture
def in_process() -> Iterator[Any]:
    from sequence_ai_ros.sim_arm_node import SimArmNode

    context = ros_context()
    namespace = f"/simarm{next(_names)}"
    node = SimArmNode(
        namespace=namespace,
        context=context,
        parameter_overrides=[
            Parameter("model", value="lingbot-va-5b"),
            Parameter("camera_hz", value=0.0),
        ],
    )
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    yield node, executor
    executor.shutdown(timeout_sec=1)
    node.destroy_node()


def test_policy_and_operator_commands_are_applied_alike_and_counted_apart(
    in_process: Any,
) -> None:
    node, executor = in_process
    policy = node.create_publisher(Float64MultiArray, "command", RELIABLE)
    device = node.create_publisher(Float64MultiArray, "operator_command", RELIABLE)
    start = node.arm.joint_positions

    def spin_until(condition: Any) -> None:
        def step() -> bool:
            executor.spin_once(timeout_sec=0.02)
            return bool(condition())

        wait_for(step)

    device.publish(Float64MultiArray(data=[*(start + OFFSET), 0.25]))
    spin_until(lambda: node.operator_commands == 1)
    assert np.allclose(node.arm.joint_positions, start + OFFSET) and node.arm.gripper == 0.25
    assert node.commands == 0
    policy.publish(Float64MultiArray(data=[*start]))  # the gripper stays where it was
    spin_until(lambda: node.commands == 1)
    assert np.allclose(node.arm.joint_positions, start) and node.arm.gripper == 0.25
    device.publish(Float64MultiArray(data=[0.0, 0.0]))  # wrong size: refused, not counted
    device.publish(Float64MultiArray(data=[*(start - OFFSET), 0.75]))  # after it, in order
    spin_until(lambda: node.operator_commands == 2)
    assert np.allclose(node.arm.joint_positions, start - OFFSET) and node.arm.gripper == 0.75
    assert node.commands == 1
