"""``std_msgs/Float64MultiArray``: the action's numbers as they are, for ros2_control's
forward_command_controller (``~/commands``). Needs no measured position: a velocity goes out
as a velocity."""

from __future__ import annotations

from typing import Any

import numpy as np

from sequence_ai_core.node_api import FloatArray

from .. import conversions as conv
from .base import Envelope, OutputType


class Float64MultiArrayOutput(OutputType):
    name = "float64_multi_array"
    needs_positions = False
    names_joints = False

    def message_type(self, types: conv.MessageTypes) -> Any:
        return types.Float64MultiArray

    def arm_message(
        self, envelope: Envelope, command: conv.Command, *, with_gripper: bool, velocities: bool
    ) -> Any:
        values = np.concatenate([command.arm, command.gripper]) if with_gripper else command.arm
        return conv.float64_multi_array(envelope.types, values, "action")

    def gripper_message(self, envelope: Envelope, values: FloatArray) -> Any:
        return conv.float64_multi_array(envelope.types, values, "gripper")


OUTPUT = Float64MultiArrayOutput()
