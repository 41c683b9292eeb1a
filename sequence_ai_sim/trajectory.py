"""joint_trajectory_controller's trajectory sampling, for the simulated controllers.

Modelled on ros2_controllers ``joint_trajectory_controller/src/trajectory.cpp``
(``Trajectory::sample`` and ``Trajectory::interpolate_between_points``), the same on the
humble and jazzy branches for what is used here:

- A message whose ``header.stamp`` is zero starts when it is first sampled.
- Before the first point's time, the output moves from the state captured when the message
  was first sampled (``set_point_before_trajectory_msg``: the measured state, or the last
  command with ``open_loop_control`` / ``interpolate_from_desired_state``) to the first
  point. A first point at ``time_from_start = 0`` is therefore a step.
- Between points: linear when either end lacks velocities (velocity jumps at every point),
  cubic with positions and velocities, quintic with accelerations as well.
- Past the last point the output is the last point (missing velocities read as zero).
- A sample time before the captured state's time gives nothing (the controller keeps its
  previous command).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from sequence_ai_core.types import FloatArray


@dataclass(frozen=True)
class TrajectoryPoint:
    """trajectory_msgs/JointTrajectoryPoint; an empty tuple is an empty field."""

    positions: tuple[float, ...] = ()
    velocities: tuple[float, ...] = ()
    accelerations: tuple[float, ...] = ()
    time_from_start_ns: int = 0


@dataclass(frozen=True)
class Trajectory:
    """trajectory_msgs/JointTrajectory with ``header.stamp`` in nanoseconds (0 = start now)."""

    joint_names: tuple[str, ...]
    points: tuple[TrajectoryPoint, ...]
    stamp_ns: int = 0


@dataclass(frozen=True)
class JointSample:
    """A state of all joints; ``velocities`` / ``accelerations`` may be absent (None)."""

    positions: FloatArray
    velocities: FloatArray | None = None
    accelerations: FloatArray | None = None


def _sample_of(point: TrajectoryPoint) -> JointSample:
    def field(values: tuple[float, ...]) -> FloatArray | None:
        return np.asarray(values, dtype=np.float64) if values else None

    return JointSample(
        np.asarray(point.positions, dtype=np.float64),
        field(point.velocities),
        field(point.accelerations),
    )


def interpolate(
    time_a: float, a: JointSample, time_b: float, b: JointSample, sample_time: float
) -> JointSample:
    """``interpolate_between_points``: outside [time_a, time_b] the end is held and the
    interpolation degrades to linear (as the C++ clamps the elapsed time)."""
    span = time_b - time_a
    elapsed = sample_time - time_a
    has_velocity = a.velocities is not None and b.velocities is not None
    has_accel = has_velocity and a.accelerations is not None and b.accelerations is not None
    if elapsed < 0.0:
        elapsed, has_velocity, has_accel = 0.0, False, False
    if elapsed > span:
        elapsed, has_velocity, has_accel = span, False, False
    p0, p1 = a.positions, b.positions
    if not has_velocity:
        slope = (p1 - p0) / span if span != 0.0 else np.zeros_like(p0)
        return JointSample(p0 + slope * elapsed, slope, np.zeros_like(p0))
    assert a.velocities is not None and b.velocities is not None
    v0, v1 = a.velocities, b.velocities
    t = elapsed
    if not has_accel:
        c2 = c3 = np.zeros_like(p0)
        if span != 0.0:
            c2 = (-3.0 * p0 + 3.0 * p1 - 2.0 * v0 * span - v1 * span) / span**2
            c3 = (2.0 * p0 - 2.0 * p1 + v0 * span + v1 * span) / span**3
        position = p0 + v0 * t + c2 * t**2 + c3 * t**3
        return JointSample(position, v0 + 2.0 * c2 * t + 3.0 * c3 * t**2, 2.0 * c2 + 6.0 * c3 * t)
    assert a.accelerations is not None and b.accelerations is not None
    a0, a1 = a.accelerations, b.accelerations
    c = [p0, v0, 0.5 * a0, *(np.zeros_like(p0) for _ in range(3))]
    if span != 0.0:
        T = span
        c[3] = (20 * (p1 - p0) - (3 * a0 - a1) * T**2 - (12 * v0 + 8 * v1) * T) / (2 * T**3)
        c[4] = (30 * (p0 - p1) + (3 * a0 - 2 * a1) * T**2 + (16 * v0 + 14 * v1) * T) / (2 * T**4)
        c[5] = (12 * (p1 - p0) - (a0 - a1) * T**2 - 6 * (v0 + v1) * T) / (2 * T**5)
    position = np.zeros_like(p0)
    velocity = np.zeros_like(p0)
    acceleration = np.zeros_like(p0)
    for k in range(6):
        position = position + c[k] * t**k
        if k >= 1:
            velocity = velocity + k * c[k] * t ** (k - 1)
        if k >= 2:
            acceleration = acceleration + k * (k - 1) * c[k] * t ** (k - 2)
    return JointSample(position, velocity, acceleration)


class ActiveTrajectory:
    """One accepted message being played (``Trajectory`` in trajectory.cpp)."""

    def __init__(self, msg: Trajectory) -> None:
        self.msg = msg
        self.start_s = msg.stamp_ns * 1e-9
        self.sampled = False
        self._before_time = 0.0
        self._before: JointSample | None = None

    def set_point_before(self, time_s: float, state: JointSample) -> None:
        """``set_point_before_trajectory_msg``: where interpolation to the first point starts."""
        self._before_time = time_s
        self._before = state

    def sample(self, time_s: float) -> JointSample | None:
        """The desired state at ``time_s``, or None (the command stays as it was)."""
        points = self.msg.points
        if not points:
            return None
        if not self.sampled:
            if self.start_s == 0.0:
                self.start_s = time_s
            self.sampled = True
        if time_s < self._before_time:
            return None
        first = points[0]
        first_time = self.start_s + first.time_from_start_ns * 1e-9
        if time_s < first_time:
            before = self._before if self._before is not None else _sample_of(first)
            return interpolate(self._before_time, before, first_time, _sample_of(first), time_s)
        for point, following in itertools.pairwise(points):
            t0 = self.start_s + point.time_from_start_ns * 1e-9
            t1 = self.start_s + following.time_from_start_ns * 1e-9
            if t0 <= time_s < t1:
                return interpolate(t0, _sample_of(point), t1, _sample_of(following), time_s)
        last = _sample_of(points[-1])
        zeros = np.zeros_like(last.positions)
        return JointSample(
            last.positions,
            last.velocities if last.velocities is not None else zeros,
            last.accelerations if last.accelerations is not None else zeros,
        )
