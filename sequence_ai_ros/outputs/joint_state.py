"""``sensor_msgs/JointState`` with joint names, positions and (for velocity actions)
velocities, for drivers that take a joint state as their command."""

from __future__ import annotations

from typing import Any

from sequence_ai_core.node_api import FloatArray

from .. import conversions as conv
from .base import Envelope, OutputType


class JointStateOutput(OutputType):
    name = "joint_state"
    needs_positions = True
    names_joints = True

    def message_type(self, types: conv.MessageTypes) -> Any:
        return types.JointState

    def arm_message(
        self, envelope: Envelope, command: conv.Command, *, with_gripper: bool, velocities: bool
    ) -> Any:
        return conv.joint_state(
            envelope.types, envelope.names, command.positions, command.velocities, envelope.stamp
        )

    def gripper_message(self, envelope: Envelope, values: FloatArray) -> Any:
        return conv.joint_state(envelope.types, envelope.names, values, None, envelope.stamp)


OUTPUT = JointStateOutput()
