"""What an output type is: one ``output_type`` parameter value and everything that differs
with it. ROS-free: message classes come in as ``MessageTypes``, so the ROS-free tests build
Humble-shaped messages through the same code the node runs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from sequence_ai_core.node_api import FloatArray

from ..conversions import Command, MessageTypes

#: A trajectory point: (positions, velocities, time_from_start_s); a missing part stays empty.
Point = tuple[FloatArray | None, FloatArray | None, float]


@dataclass(frozen=True)
class Envelope:
    """What a command's message is built with besides its values: the message classes, the
    joints it names, how long its point lasts and its header stamp."""

    types: MessageTypes
    names: Sequence[str]
    period_s: float
    stamp: Any


class OutputType(ABC):
    """One way to send an action to an arm driver (the ``output_type`` parameter)."""

    #: The ``output_type`` parameter value (and the sim arm's ``command_type``).
    name: ClassVar[str]
    #: Messages carry joint position targets: a velocity or delta action needs a fresh
    #: measured arm position to build one from (a target anchored at a stale reading would
    #: pull the arm back to it).
    needs_positions: ClassVar[bool]
    #: Messages name every joint: ``joint_names`` is required, and gripper dimensions go to
    #: their own topic (gripper positions cannot share a point with arm joints).
    names_joints: ClassVar[bool]
    #: Takes a whole planned trajectory per message, so ``trajectory_mode`` applies.
    streams_trajectories: ClassVar[bool] = False

    @abstractmethod
    def message_type(self, types: MessageTypes) -> Any:
        """The message class published on ``action`` and the gripper topic (the simulated
        arm subscribes to the same class and reads it by its type, not by output type)."""

    @abstractmethod
    def arm_message(
        self, envelope: Envelope, command: Command, *, with_gripper: bool, velocities: bool
    ) -> Any:
        """The arm's message for one command (``command.positions`` is set when
        ``needs_positions``); ``with_gripper``: the gripper has no topic of its own;
        ``velocities``: send joint velocities where the message can carry them."""

    @abstractmethod
    def gripper_message(self, envelope: Envelope, values: FloatArray) -> Any:
        """The gripper topic's message: gripper positions."""

    def trajectory_message(
        self, types: MessageTypes, names: Sequence[str], points: Sequence[Point], stamp: Any
    ) -> Any:
        """A planned trajectory as one message (only where ``streams_trajectories``)."""
        raise TypeError(f"{self.name} messages carry no trajectories")
