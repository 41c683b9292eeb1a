"""The simulated arm reads command messages by their fields (sequence_ai_sim.commands), so
any object shaped like the ROS message will do: here plain namespaces, no message package.
test_ros_outputs.py reads what the node's command sink builds; the real-ROS tier, rclpy's."""

from __future__ import annotations

from types import SimpleNamespace as Msg

import pytest

from sequence_ai_sim.commands import READERS, controller_takes, controller_trajectory, reader_for
from sequence_ai_sim.trajectory import Trajectory, TrajectoryPoint


def _named(name: str) -> type:
    """A class named like a message type: the readers go by the name alone."""
    return type(name, (), {})


def _stamp(sec: int, nanosec: int) -> Msg:
    return Msg(sec=sec, nanosec=nanosec)


def test_a_reader_is_found_by_the_message_type_s_name() -> None:
    assert set(READERS) == {"Float64MultiArray", "JointState", "JointTrajectory"}
    for name, reader in READERS.items():
        assert reader_for(_named(name)) is reader
    with pytest.raises(ValueError, match=r"no Twist commands; it reads Float64MultiArray"):
        reader_for(_named("Twist"))
    assert not controller_takes("forward_command", _named("Twist"))


def test_what_the_arm_applies_without_a_controller_model() -> None:
    forward = reader_for(_named("Float64MultiArray"))
    assert forward.values(Msg(data=[1, 2.5]), velocity=True) == [1.0, 2.5]
    state = reader_for(_named("JointState"))
    moving = Msg(position=[0.1, 0.2], velocity=[0.5, -0.5])
    assert state.values(moving, velocity=True) == [0.5, -0.5]
    assert state.values(moving, velocity=False) == [0.1, 0.2]
    assert state.values(Msg(position=[0.1], velocity=[]), velocity=True) == [0.1]  # none sent
    trajectory = reader_for(_named("JointTrajectory"))
    first = Msg(positions=[0.3], velocities=[], accelerations=[])
    later = Msg(positions=[0.9], velocities=[1.0], accelerations=[])
    assert trajectory.values(Msg(points=[first, later]), velocity=True) == [0.3]
    assert trajectory.values(Msg(points=[]), velocity=False) == []


def test_what_a_controller_model_is_sent() -> None:
    forward = reader_for(_named("Float64MultiArray"))
    assert forward.controller_command(Msg(data=(0.5, 1))) == [0.5, 1.0]
    with pytest.raises(TypeError, match="no controller model takes JointState"):
        reader_for(_named("JointState")).controller_command(Msg(position=[0.0]))
    points = [
        Msg(
            positions=[0.1, 0.2],
            velocities=[],
            accelerations=[],
            time_from_start=_stamp(0, 66_666_667),
        ),
        Msg(
            positions=[0.3, 0.4],
            velocities=[0.0, 0.0],
            accelerations=[],
            time_from_start=_stamp(1, 5),
        ),
    ]
    msg = Msg(joint_names=["a", "b"], points=points, header=Msg(stamp=_stamp(1_800_000_000, 7)))
    expected = Trajectory(
        ("a", "b"),
        (
            TrajectoryPoint((0.1, 0.2), (), (), 66_666_667),
            TrajectoryPoint((0.3, 0.4), (0.0, 0.0), (), 1_000_000_005),
        ),
        1_800_000_000_000_000_007,
    )
    assert controller_trajectory(msg) == expected
    assert reader_for(_named("JointTrajectory")).controller_command(msg) == expected
