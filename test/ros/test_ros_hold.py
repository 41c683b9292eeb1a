"""The hold command per action space (sequence_ai_ros/hold.py), ROS-free."""

from __future__ import annotations

import numpy as np

from sequence_ai_ros.hold import hold_command


def test_hold_per_action_space_keeps_gripper() -> None:
    last = np.array([0.3, -0.2, 0.7])  # two joints + gripper position
    measured = np.array([1.0, 2.0])
    velocity = hold_command(
        action_space="joint_velocity", gripper_dims=1, last_action=last, measured=measured
    )
    assert velocity is not None
    assert velocity.arm.tolist() == [0.0, 0.0] and velocity.gripper.tolist() == [0.7]
    assert velocity.positions is not None and velocity.positions.tolist() == [1.0, 2.0]
    absolute = hold_command(
        action_space="joint_absolute", gripper_dims=1, last_action=last, measured=measured
    )
    assert absolute is not None and absolute.arm.tolist() == [1.0, 2.0]
    blind = hold_command(
        action_space="joint_absolute", gripper_dims=1, last_action=last, measured=None
    )
    assert blind is not None and blind.arm.tolist() == [0.3, -0.2]  # last target
    delta = hold_command(
        action_space="joint_delta", gripper_dims=0, last_action=last, measured=None
    )
    assert delta is not None and delta.arm.tolist() == [0.0, 0.0, 0.0]
    pose = hold_command(action_space="ee_absolute", gripper_dims=1, last_action=last, measured=None)
    assert pose is not None and pose.arm.tolist() == [0.3, -0.2]
    assert (
        hold_command(
            action_space="joint_velocity", gripper_dims=1, last_action=None, measured=measured
        )
        is None
    )


def test_a_hold_without_a_fresh_reading_is_at_the_last_target_sent() -> None:
    last = np.array([0.3, -0.2, 0.7])
    target, measured = np.array([1.5, 2.5]), np.array([1.0, 2.0])
    stale = hold_command(
        action_space="joint_velocity", gripper_dims=1, last_action=last, measured=None,
        last_target=target,
    )  # fmt: skip
    assert stale is not None and stale.positions is not None
    assert stale.positions.tolist() == [1.5, 2.5] and stale.velocities is not None
    fresh = hold_command(
        action_space="joint_velocity", gripper_dims=1, last_action=last, measured=measured,
        last_target=target,
    )  # fmt: skip
    assert fresh is not None and fresh.positions is not None
    assert fresh.positions.tolist() == [1.0, 2.0]
