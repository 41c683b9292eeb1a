"""Between ROS messages and core values (sequence_ai_ros/conversions.py), on message classes
generated from Humble's real definitions."""

from __future__ import annotations

import numpy as np
import pytest
from support import humble_messages as messages

from sequence_ai_ros import conversions as conv


@pytest.fixture(scope="module")
def types() -> conv.MessageTypes:
    types: conv.MessageTypes = messages.message_types()
    return types


def test_read_joints_by_name_and_order() -> None:
    reading = conv.read_joints(["b", "g", "a"], [2.0, 0.4, 1.0], [], ["a", "b"], "g")
    assert reading.positions.tolist() == [1.0, 2.0] and reading.gripper == 0.4
    assert reading.velocities is None  # absent velocities are omitted, never zero-filled
    with_vel = conv.read_joints(["a", "b"], [1.0, 2.0], [0.1, 0.2], ["b", "a"])
    assert with_vel.velocities is not None and with_vel.velocities.tolist() == [0.2, 0.1]
    with pytest.raises(conv.InputProblem, match=r"lacks joints \['c'\]"):
        conv.read_joints(["a"], [1.0], [], ["a", "c"])
    with pytest.raises(conv.InputProblem, match="gripper joint"):
        conv.read_joints(["a"], [1.0], [], ["a"], "g")


def test_read_joints_refuses_non_finite_positions_and_drops_non_finite_velocities() -> None:
    nan = float("nan")
    with pytest.raises(conv.InputProblem, match="non-finite positions"):
        conv.read_joints(["a", "b"], [1.0, nan], [], ["a", "b"])
    with pytest.raises(conv.InputProblem, match="not finite"):
        conv.read_joints(["a", "g"], [1.0, nan], [], ["a"], "g")
    reading = conv.read_joints(["a", "b"], [1.0, 2.0], [0.1, nan], ["a", "b"])
    assert reading.velocities is None and reading.positions.tolist() == [1.0, 2.0]


def test_image_to_rgb_handles_bgr_mono_and_row_padding() -> None:
    bgr = bytes([1, 2, 3, 4, 5, 6, 0, 0])  # 2x1 pixels, 2 bytes of row padding
    rgb = conv.image_to_rgb(1, 2, "bgr8", 8, bgr)
    assert (
        rgb.shape == (1, 2, 3)
        and rgb[0, 0].tolist() == [3, 2, 1]
        and rgb[0, 1].tolist() == [6, 5, 4]
    )
    mono = conv.image_to_rgb(1, 2, "mono8", 2, bytes([7, 9]))
    assert mono[0, 1].tolist() == [9, 9, 9]
    with pytest.raises(conv.InputProblem, match="unsupported"):
        conv.image_to_rgb(1, 1, "yuv422", 2, bytes(2))
    with pytest.raises(conv.InputProblem, match="inconsistent"):
        conv.image_to_rgb(2, 2, "rgb8", 6, bytes(6))


def test_command_from_action_per_space() -> None:
    action, measured = np.array([0.5, -1.0, 0.8]), np.array([1.0, 1.0])
    vel = conv.command_from_action(
        action, action_space="joint_velocity", gripper_dims=1, measured=measured, period_s=0.1
    )
    assert vel.velocities is not None and vel.velocities.tolist() == [0.5, -1.0]
    assert vel.positions is not None and np.allclose(vel.positions, [1.05, 0.9])
    assert vel.gripper.tolist() == [0.8]
    absolute = conv.command_from_action(
        action, action_space="joint_absolute", gripper_dims=0, measured=None, period_s=0.1
    )
    assert absolute.positions is not None and absolute.positions.tolist() == [0.5, -1.0, 0.8]
    delta = conv.command_from_action(
        action, action_space="joint_delta", gripper_dims=1, measured=measured, period_s=0.1
    )
    assert delta.positions is not None and delta.positions.tolist() == [1.5, 0.0]
    ee = conv.command_from_action(
        action, action_space="ee_delta", gripper_dims=1, measured=measured, period_s=0.1
    )
    assert ee.positions is None and ee.arm.tolist() == [0.5, -1.0]


def test_message_builders_fill_humble_fields(types: conv.MessageTypes) -> None:
    array_msg = conv.float64_multi_array(types, np.array([1.0, 2.0]), "action")
    assert list(array_msg.data) == [1.0, 2.0]
    assert (
        array_msg.layout.dim[0].label,
        array_msg.layout.dim[0].size,
        array_msg.layout.dim[0].stride,
    ) == ("action", 2, 2)
    traj = conv.joint_trajectory(
        types, ["a", "b"], [(np.array([1.0, 2.0]), np.array([0.1, 0.2]), 1.25)]
    )
    point = traj.points[0]
    assert traj.joint_names == ["a", "b"] and list(point.positions) == [1.0, 2.0]
    assert list(point.velocities) == [0.1, 0.2] and list(point.accelerations) == []
    assert (point.time_from_start.sec, point.time_from_start.nanosec) == (1, 250_000_000)
    state = conv.joint_state(types, ["a"], None, np.array([0.5]))
    assert state.name == ["a"] and list(state.position) == [] and list(state.velocity) == [0.5]
    chunk = conv.chunk_trajectory(
        types,
        np.array([[1.0, 2.0], [3.0, 4.0]]),
        names=["a", "b"],
        action_space="joint_velocity",
        control_hz=4.0,
    )
    assert [list(p.velocities) for p in chunk.points] == [[1.0, 2.0], [3.0, 4.0]]
    assert [p.time_from_start.nanosec for p in chunk.points] == [0, 250_000_000]
    assert all(list(p.positions) == [] for p in chunk.points)


def test_message_classes_refuse_numpy_arrays_like_rclpy(types: conv.MessageTypes) -> None:
    msg = types.Float64MultiArray()
    with pytest.raises(AssertionError):
        msg.data = np.array([1.0])  # rclpy's generated setter asserts on a Sequence of float
    with pytest.raises(AttributeError):
        msg.bogus = 1  # type: ignore[attr-defined]
