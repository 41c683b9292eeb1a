"""``sensor_msgs/JointState`` with joint names, positions and (for velocity actions)
velocities, for drivers that take a joint state as their command."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sequence_ai_core.types import FloatArray

from .. import conversions as conv
from .base import OutputType


class JointStateOutput(OutputType):
    name = "joint_state"
    needs_positions = True
    names_joints = True

    def message_type(self, types: conv.MessageTypes) -> Any:
        return types.JointState

    def arm_message(
        self,
        types: conv.MessageTypes,
        command: conv.Command,
        *,
        names: Sequence[str],
        with_gripper: bool,
        period_s: float,
        velocities: bool,
        stamp: Any,
    ) -> Any:
        return conv.joint_state(types, names, command.positions, command.velocities, stamp)

    def gripper_message(
        self,
        types: conv.MessageTypes,
        values: FloatArray,
        *,
        names: Sequence[str],
        period_s: float,
        stamp: Any,
    ) -> Any:
        return conv.joint_state(types, names, values, None, stamp)

    def decode(self, msg: Any, *, velocity: bool) -> list[float]:
        values = msg.velocity if velocity and len(msg.velocity) else msg.position
        return [float(v) for v in values]


OUTPUT = JointStateOutput()
