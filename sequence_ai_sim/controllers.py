"""ros2_control controllers as they accept and play streamed commands, for the simulated arm.

Each model takes messages the way the real controller's subscription does (accept, or reject
with the real controller's log text) and writes a command at the controller rate. Behind
them a servo with a first-order lag stands in for the hardware, so what "interpolate from the
measured state" does to a lagging arm shows up in the commanded positions.

Sources (ros2_controllers, humble and jazzy branches):
- ``forward_command_controller/src/forward_controllers_base.cpp``
  (``ForwardControllersBase::update``): the last ``~/commands`` message is written every
  cycle, forever; a message of the wrong size is logged ("command size ... does not match
  number of interfaces ...") and nothing is written while it is the last one. Jazzy starts
  the command at NaN and resets it on activation: nothing moves before the first message.
- ``joint_trajectory_controller/src/joint_trajectory_controller.cpp``
  (``validate_trajectory_msg``, ``topic_callback``, ``update``): checks below; a valid
  message always replaces the current trajectory; on its first sample the state before it is
  the measured state, or the last command with Humble's ``open_loop_control`` / Jazzy's
  ``interpolate_from_desired_state``. Jazzy writes the sample one cycle ahead
  (``command_next_``); Humble the sample at the cycle's time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from sequence_ai_core.types import FloatArray

from .trajectory import ActiveTrajectory, JointSample, Trajectory, TrajectoryPoint

#: ``std::numeric_limits<float>::epsilon()``, Jazzy's threshold for "non-zero" end velocity.
FLOAT_EPSILON = 1.1920928955078125e-07


@dataclass(frozen=True)
class JtcSettings:
    """The joint_trajectory_controller parameters that decide acceptance and interpolation.

    ``allow_nonzero_velocity_at_trajectory_end`` does not exist on Humble (no such check
    there): #567 added it with default true, #834 made the default false for Jazzy.
    """

    distro: str  # "humble" | "jazzy"
    joints: tuple[str, ...]
    allow_partial_joints_goal: bool = False
    allow_nonzero_velocity_at_trajectory_end: bool = False
    #: Humble ``open_loop_control`` / Jazzy ``interpolate_from_desired_state``.
    from_desired_state: bool = False


def humble_defaults(joints: Sequence[str], *, from_desired_state: bool = False) -> JtcSettings:
    return JtcSettings(
        "humble",
        tuple(joints),
        allow_nonzero_velocity_at_trajectory_end=True,
        from_desired_state=from_desired_state,
    )


def jazzy_defaults(
    joints: Sequence[str],
    *,
    from_desired_state: bool = False,
    allow_nonzero_velocity_at_trajectory_end: bool = False,
) -> JtcSettings:
    return JtcSettings(
        "jazzy",
        tuple(joints),
        allow_nonzero_velocity_at_trajectory_end=allow_nonzero_velocity_at_trajectory_end,
        from_desired_state=from_desired_state,
    )


def _ns_as_s(ns: int) -> float:
    return ns * 1e-9


def _field_size(
    names: int, values: tuple[float, ...], label: str, index: int, empty_ok: bool
) -> str | None:
    """``validate_trajectory_point_field``."""
    if empty_ok and not values:
        return None
    if len(values) != names:
        return (
            f"Mismatch between joint_names size ({names}) and {label} ({len(values)}) "
            f"at point #{index}."
        )
    return None


def _points_problem(msg: Trajectory) -> str | None:
    previous = 0
    names = len(msg.joint_names)
    for i, point in enumerate(msg.points):
        if i > 0 and point.time_from_start_ns <= previous:
            return (
                f"Time between points {i - 1} and {i} is not strictly increasing, it is "
                f"{_ns_as_s(previous):f} and {_ns_as_s(point.time_from_start_ns):f} respectively"
            )
        previous = point.time_from_start_ns
        problem = (
            _field_size(names, point.positions, "positions", i, False)
            or _field_size(names, point.velocities, "velocities", i, True)
            or _field_size(names, point.accelerations, "accelerations", i, True)
        )
        if problem:
            return problem
    return None


def _end_velocity_problem(msg: Trajectory) -> str | None:
    for name, velocity in zip(msg.joint_names, msg.points[-1].velocities, strict=False):
        if abs(velocity) > FLOAT_EPSILON:
            return f"Velocity of last trajectory point of joint {name} is not zero: {velocity:.15f}"
    return None


def _stamp_problem(msg: Trajectory, now_s: float) -> str | None:
    """Modelled with the end at the last point's time, as both branches compute it now
    (older 2.x releases summed every point's time_from_start, which only accepts more)."""
    if msg.stamp_ns == 0:
        return None
    start = _ns_as_s(msg.stamp_ns)
    end = start + (_ns_as_s(msg.points[-1].time_from_start_ns) if msg.points else 0.0)
    if end < now_s:
        return (
            f"Received trajectory with non-zero start time ({start:f}) "
            f"that ends in the past ({end:f})"
        )
    return None


def validate_trajectory(settings: JtcSettings, msg: Trajectory, now_s: float) -> str | None:
    """``validate_trajectory_msg``: None if accepted, else the controller's error text.
    The checks run in each branch's order, so the first failing one is the one logged."""
    if not settings.allow_partial_joints_goal and len(msg.joint_names) != len(settings.joints):
        return "Joints on incoming trajectory don't match the controller joints."
    if not msg.joint_names:
        return "Empty joint names on incoming trajectory."
    if not msg.points:  # ros2_controllers #902, backported to humble
        return "Empty trajectory received."
    unknown = [name for name in msg.joint_names if name not in settings.joints]
    if settings.distro == "humble":
        # Humble: stamp, then names; no end-velocity check (#567/#834 never reached humble).
        problem = _stamp_problem(msg, now_s)
        if problem or unknown:
            return problem or f"Incoming joint {unknown[0]} doesn't match the controller's joints."
        return _points_problem(msg)
    if unknown:
        return f"Incoming joint {unknown[0]} doesn't match the controller's joints."
    if not settings.allow_nonzero_velocity_at_trajectory_end:
        problem = _end_velocity_problem(msg)
        if problem:
            return problem
    return _stamp_problem(msg, now_s) or _points_problem(msg)


@dataclass
class Rejections:
    """What the controller logged instead of acting, in order."""

    messages: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.messages.append(text)

    def __len__(self) -> int:
        return len(self.messages)


class JointTrajectoryControllerModel:
    """Position command interface; position and velocity state interfaces."""

    command_interface = "position"

    def __init__(self, settings: JtcSettings, positions: FloatArray) -> None:
        self.settings = settings
        self.rejections = Rejections()
        self.accepted = 0
        self._pending: Trajectory | None = None
        self._active: ActiveTrajectory | None = None
        self.is_active = True
        self._last = JointSample(np.zeros(len(positions)))
        self.activate(positions)

    def activate(self, measured: FloatArray) -> None:
        """``on_activate``: hold the measured position; no trajectory."""
        self.is_active = True
        self._pending = self._active = None
        self._last = JointSample(np.array(measured, dtype=np.float64), np.zeros(len(measured)))

    def deactivate(self) -> None:
        """Inactive: ``topic_callback`` drops messages (``subscriber_is_active_``), nothing is
        written."""
        self.is_active = False

    def receive(self, msg: Trajectory, now_s: float) -> str | None:
        """``topic_callback``: validate, then always replace the trajectory."""
        if not self.is_active:
            return "(not logged by the controller) inactive: message dropped"
        problem = validate_trajectory(self.settings, msg, now_s)
        if problem:
            self.rejections.add(problem)
            return problem
        self._pending = self._in_local_order(msg)
        self.accepted += 1
        return None

    def _in_local_order(self, msg: Trajectory) -> Trajectory:
        """``fill_partial_goal`` + ``sort_to_local_joint_order``: missing joints keep their
        last command with zero velocity."""
        order = [
            msg.joint_names.index(n) if n in msg.joint_names else -1 for n in self.settings.joints
        ]
        last = self._last.positions

        def remap(values: tuple[float, ...], fill: FloatArray) -> tuple[float, ...]:
            if not values:
                return ()
            return tuple(values[j] if j >= 0 else float(fill[i]) for i, j in enumerate(order))

        zeros = np.zeros(len(order))
        points = tuple(
            TrajectoryPoint(
                remap(p.positions, last),
                remap(p.velocities, zeros),
                remap(p.accelerations, zeros),
                p.time_from_start_ns,
            )
            for p in msg.points
        )
        return Trajectory(self.settings.joints, points, msg.stamp_ns)

    def update(self, time_s: float, period_s: float, measured: JointSample) -> FloatArray | None:
        """One control cycle: the position command, or None (command unchanged)."""
        if not self.is_active:
            return None
        if self._pending is not None:
            self._active, self._pending = ActiveTrajectory(self._pending), None
        active = self._active
        if active is None:
            return None
        if not active.sampled:
            before = self._last if self.settings.from_desired_state else measured
            active.set_point_before(time_s, before)
        desired = active.sample(time_s)  # the first sample also fixes a zero stamp's start
        if self.settings.distro == "jazzy":
            desired = active.sample(time_s + period_s)  # Jazzy's command_next_
        if desired is None:
            return None
        self._last = desired
        # Typed here: numpy >= 2.4 types .copy() as typing.Self, Any to mypy at Python 3.10.
        positions: FloatArray = desired.positions.copy()
        return positions


class ForwardCommandControllerModel:
    """forward_command_controller with one interface (position or velocity) per joint. Humble
    and Jazzy stream alike; Jazzy's NaN start and Humble's empty buffer both mean that
    nothing is written before the first message."""

    def __init__(self, interfaces: int, command_interface: str) -> None:
        self.interfaces = interfaces
        self.command_interface = command_interface
        self.rejections = Rejections()
        self.accepted = 0
        self._command: FloatArray | None = None  # the realtime buffer's message
        self.is_active = True

    def activate(self, measured: FloatArray) -> None:
        """``on_activate`` resets the buffer (on both branches): a command that arrived while
        inactive is not replayed, and nothing is written before the next message."""
        self.is_active = True
        self._command = None

    def deactivate(self) -> None:
        self.is_active = False
        self._command = None

    def receive(self, data: Sequence[float], now_s: float) -> str | None:
        """The subscription stores every message; the size is only checked in ``update``."""
        self._command = np.asarray(list(data), dtype=np.float64)
        if len(self._command) != self.interfaces:
            problem = (
                f"command size ({len(self._command)}) does not match number of interfaces "
                f"({self.interfaces})"
            )
            self.rejections.add(problem)
            return problem
        self.accepted += 1
        return None

    def update(self, time_s: float, period_s: float, measured: JointSample) -> FloatArray | None:
        command = self._command
        if not self.is_active or command is None or len(command) != self.interfaces:
            return None  # nothing received, or update() returns ERROR: interfaces unchanged
        # Typed here: numpy >= 2.4 types .copy() as typing.Self, Any to mypy at Python 3.10.
        copied: FloatArray = command.copy()
        return copied


Controller = JointTrajectoryControllerModel | ForwardCommandControllerModel

#: Names accepted by ``make_controller`` (and the ``controller`` parameter of the sim arm).
CONTROLLER_MODELS = (
    "forward_command",
    "jtc_humble",
    "jtc_jazzy",
    "jtc_humble_open_loop",
    "jtc_jazzy_desired_state",
)


def make_controller(
    name: str, joints: Sequence[str], positions: FloatArray, *, velocity_commands: bool
) -> Controller:
    """``forward_command`` commands velocities for velocity action spaces, else positions."""
    if name == "forward_command":
        kind = "velocity" if velocity_commands else "position"
        return ForwardCommandControllerModel(len(joints), kind)
    settings = {
        "jtc_humble": humble_defaults(joints),
        "jtc_jazzy": jazzy_defaults(joints),
        "jtc_humble_open_loop": humble_defaults(joints, from_desired_state=True),
        "jtc_jazzy_desired_state": jazzy_defaults(joints, from_desired_state=True),
    }.get(name)
    if settings is None:
        raise ValueError(f"unknown controller {name!r}; known: {', '.join(CONTROLLER_MODELS)}")
    return JointTrajectoryControllerModel(settings, positions)


class Servo:
    """The hardware: joints follow the command with a first-order lag ``lag_s``.

    Position interface: the position follows the commanded position. Velocity interface:
    the velocity follows the command and the position integrates it. A NaN or absent
    command holds (position) or stops (velocity), as drivers treat "no command".
    """

    def __init__(self, positions: FloatArray, lag_s: float, command_interface: str) -> None:
        self.positions = np.array(positions, dtype=np.float64)
        self.velocities = np.zeros_like(self.positions)
        self.lag_s = lag_s
        self.command_interface = command_interface
        #: What the command asks the position to be: the position command, or the integral of
        #: the velocity command (so the two interfaces are compared on one quantity).
        self.reference = self.positions.copy()
        self._command = (
            self.positions.copy()
            if command_interface == "position"
            else np.zeros_like(self.positions)
        )

    def step(self, command: FloatArray | None, dt: float) -> None:
        if command is not None and np.all(np.isfinite(command)):
            self._command = command
        follow = 1.0 - math.exp(-dt / self.lag_s) if self.lag_s > 0 else 1.0
        before = self.positions.copy()
        if self.command_interface == "position":
            self.reference = self._command.copy()
            self.positions = self.positions + (self._command - self.positions) * follow
            self.velocities = (self.positions - before) / dt
        else:
            self.reference = self.reference + self._command * dt
            self.velocities = self.velocities + (self._command - self.velocities) * follow
            self.positions = self.positions + self.velocities * dt
