"""``trajectory_msgs/JointTrajectory``, for ros2_control's joint_trajectory_controller: one
point per tick, or (``trajectory_mode: chunk``, see ``trajectories.py``) the rest of each
chunk as one trajectory. An empty trajectory is rejected by the controller, so a hold is a
one-point trajectory at the current positions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sequence_ai_core.node_api import FloatArray

from .. import conversions as conv
from .base import Envelope, OutputType, Point


class JointTrajectoryOutput(OutputType):
    name = "joint_trajectory"
    needs_positions = True
    names_joints = True
    streams_trajectories = True

    def message_type(self, types: conv.MessageTypes) -> Any:
        return types.JointTrajectory

    def arm_message(
        self, envelope: Envelope, command: conv.Command, *, with_gripper: bool, velocities: bool
    ) -> Any:
        # Non-zero velocities only where the controller takes them at the last point
        # (parameters/relations.py): Jazzy's default rejects a trajectory that ends moving.
        speeds = command.velocities
        if speeds is not None and np.any(speeds != 0.0) and not velocities:
            speeds = None
        return _one_point(envelope, command.positions, speeds)

    def gripper_message(self, envelope: Envelope, values: FloatArray) -> Any:
        return _one_point(envelope, values, None)

    def trajectory_message(
        self, types: conv.MessageTypes, names: Sequence[str], points: Sequence[Point], stamp: Any
    ) -> Any:
        return conv.joint_trajectory(types, names, points, stamp)


def _one_point(envelope: Envelope, positions: Any, velocities: Any) -> Any:
    point = (positions, velocities, envelope.period_s)
    return conv.joint_trajectory(envelope.types, envelope.names, [point], envelope.stamp)


OUTPUT = JointTrajectoryOutput()
