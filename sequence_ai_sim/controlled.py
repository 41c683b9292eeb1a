"""A controller model and its servo stepped at a fixed controller rate on a caller's clock.

``send`` delivers a message at a time (the subscription callback), ``advance`` runs every
control cycle up to a time. Times are seconds on the clock the message stamps use (ROS time,
i.e. ``time.time()`` for a real node, or any virtual clock in a benchmark).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sequence_ai_core.types import FloatArray

from .controllers import Controller, JointTrajectoryControllerModel, Servo, make_controller
from .trajectory import JointSample, Trajectory

#: ros2_control's usual controller_manager update_rate for arms.
CONTROLLER_HZ = 500.0
#: Servo time constant (s): how far a position-controlled joint lags its command. A stand-in
#: for real hardware, which always lags a little; 0 makes the arm follow exactly.
SERVO_LAG_S = 0.03
#: A change of the commanded position per cycle above this counts as a jump.
JUMP_RAD = 0.005
#: The most controller time ``advance`` runs in one call.
MAX_CATCH_UP_S = 60.0


class ControlledJoints:
    def __init__(
        self,
        controller: str,
        joints: Sequence[str],
        positions: FloatArray,
        start_s: float,
        *,
        velocity_commands: bool,
        rate_hz: float = CONTROLLER_HZ,
        lag_s: float = SERVO_LAG_S,
    ) -> None:
        self.name = controller
        self.joints = tuple(joints)
        self.controller: Controller = make_controller(
            controller, joints, positions, velocity_commands=velocity_commands
        )
        self.servo = Servo(positions, lag_s, self.controller.command_interface)
        self.period_s = 1.0 / rate_hz
        self._start_s = start_s
        self._cycles = 0  # cycles run; counted, not summed, so the clock does not drift
        self._time_s = start_s
        #: Largest change of ``servo.reference`` between two control cycles, per joint max.
        self.max_command_jump = 0.0
        #: Cycles whose change exceeds ``JUMP_RAD`` (5x what 0.5 rad/s moves in 2 ms).
        self.jumps = 0

    @property
    def time_s(self) -> float:
        return self._time_s

    @property
    def rejections(self) -> list[str]:
        return self.controller.rejections.messages

    def send(self, msg: Trajectory | Sequence[float], now_s: float) -> str | None:
        """Deliver one message at ``now_s``; the controller's rejection text, or None."""
        self.advance(now_s)
        controller = self.controller
        if isinstance(controller, JointTrajectoryControllerModel):
            if not isinstance(msg, Trajectory):
                raise TypeError(f"{self.name} takes JointTrajectory messages")
            return controller.receive(msg, now_s)
        if isinstance(msg, Trajectory):
            raise TypeError(f"{self.name} takes Float64MultiArray commands, not trajectories")
        return controller.receive(msg, now_s)

    def advance(self, now_s: float) -> None:
        """Run every control cycle due by ``now_s``."""
        dt = self.period_s
        # A cycle due within a microsecond of now_s runs: float seconds since 1970 carry
        # about 0.2 µs of rounding.
        due = math.floor((now_s + 1e-6 - self._start_s) / dt)
        # Bounded: after a stall (or a clock step) the controller resumes with the last
        # MAX_CATCH_UP_S of cycles, as a controller manager that missed its deadlines.
        self._cycles = max(self._cycles, due - round(MAX_CATCH_UP_S / dt))
        while self._cycles < due:
            self._cycles += 1
            self._time_s = self._start_s + self._cycles * dt
            measured = JointSample(self.servo.positions.copy(), self.servo.velocities.copy())
            command = self.controller.update(self._time_s, dt, measured)
            before = self.servo.reference
            self.servo.step(command, dt)
            jump = float(np.max(np.abs(self.servo.reference - before), initial=0.0))
            self.max_command_jump = max(self.max_command_jump, jump)
            self.jumps += jump > JUMP_RAD

    @property
    def positions(self) -> FloatArray:
        # Typed here: numpy >= 2.4 types .copy() as typing.Self, Any to mypy at Python 3.10.
        positions: FloatArray = self.servo.positions.copy()
        return positions

    @property
    def reference(self) -> FloatArray:
        """The position the controller commands now (integrated, for velocity commands)."""
        reference: FloatArray = self.servo.reference.copy()
        return reference
