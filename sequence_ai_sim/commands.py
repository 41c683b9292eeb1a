"""What the simulated arm reads from a command message: the numbers it applies itself, and
the command a simulated ros2_control controller model (``controllers.py``) takes.

ROS-free: a message is read by its fields, so rclpy's generated classes and the tests'
Humble-shaped ones are read alike and the simulator needs no message package. A reader is
found by the message's type name, as a driver subscribes by type, not by which output type
of the node sent it: an output type needs nothing here unless it publishes a message type no
reader knows (then the simulated arm refuses it when it starts, naming the type).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, TypeAlias

from .trajectory import Trajectory, TrajectoryPoint

#: A command as a simulated controller model takes it: a trajectory, or forward commands.
ControllerCommand: TypeAlias = Trajectory | list[float]


class CommandReader(ABC):
    """How the simulated arm follows one message type."""

    #: The message type's name, as rclpy names its generated class (``JointTrajectory``).
    message: ClassVar[str]

    @abstractmethod
    def values(self, msg: Any, *, velocity: bool) -> list[float]:
        """The numbers the arm applies from ``msg`` when no controller model is in front of
        it: velocities when ``velocity`` and the message carries them, else positions."""

    def takes_controller(self, controller: str) -> bool:
        """Whether the simulated controller model ``controller`` subscribes to this type."""
        return False

    def controller_command(self, msg: Any) -> ControllerCommand:
        """``msg`` as a simulated controller model takes it."""
        raise TypeError(f"no controller model takes {self.message} messages")


def _floats(values: Any) -> list[float]:
    return [float(v) for v in values]


class ForwardCommands(CommandReader):
    """``std_msgs/Float64MultiArray``: forward_command_controller's ``~/commands``, whose
    numbers are the command as it is (velocities or positions, as the action space says)."""

    message = "Float64MultiArray"

    def values(self, msg: Any, *, velocity: bool) -> list[float]:
        return _floats(msg.data)

    def takes_controller(self, controller: str) -> bool:
        return controller == "forward_command"

    def controller_command(self, msg: Any) -> ControllerCommand:
        return _floats(msg.data)


class JointStates(CommandReader):
    """``sensor_msgs/JointState`` taken as a command: positions, and velocities if any."""

    message = "JointState"

    def values(self, msg: Any, *, velocity: bool) -> list[float]:
        return _floats(msg.velocity if velocity and len(msg.velocity) else msg.position)


class JointTrajectories(CommandReader):
    """``trajectory_msgs/JointTrajectory``: without a controller model the arm applies the
    first point; every ``jtc_*`` model takes the whole trajectory."""

    message = "JointTrajectory"

    def values(self, msg: Any, *, velocity: bool) -> list[float]:
        if not msg.points:
            return []
        point = msg.points[0]
        return _floats(point.velocities if velocity and len(point.velocities) else point.positions)

    def takes_controller(self, controller: str) -> bool:
        return controller.startswith("jtc_")

    def controller_command(self, msg: Any) -> ControllerCommand:
        return controller_trajectory(msg)


def _nanoseconds(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def controller_trajectory(msg: Any) -> Trajectory:
    """A trajectory_msgs/JointTrajectory as the simulated controllers take it."""
    points = tuple(
        TrajectoryPoint(
            tuple(float(v) for v in p.positions),
            tuple(float(v) for v in p.velocities),
            tuple(float(v) for v in p.accelerations),
            _nanoseconds(p.time_from_start),
        )
        for p in msg.points
    )
    return Trajectory(tuple(msg.joint_names), points, _nanoseconds(msg.header.stamp))


#: Every message type the simulated arm follows, by name.
READERS: Mapping[str, CommandReader] = {
    reader.message: reader for reader in (ForwardCommands(), JointStates(), JointTrajectories())
}


def reader_for(message_type: type) -> CommandReader:
    """The reader of ``message_type`` (a message class); ValueError naming the known types."""
    try:
        return READERS[message_type.__name__]
    except KeyError:
        raise ValueError(
            f"the simulated arm follows no {message_type.__name__} commands; "
            f"it reads {', '.join(READERS)}"
        ) from None


def controller_takes(controller: str, message_type: type) -> bool:
    """Whether the controller model ``controller`` subscribes to ``message_type`` (a message
    class); False for a type the simulated arm does not follow at all."""
    reader = READERS.get(message_type.__name__)
    return reader is not None and reader.takes_controller(controller)
