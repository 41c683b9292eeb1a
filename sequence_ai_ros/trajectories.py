"""The rest of a chunk as one joint trajectory, for joint_trajectory_controller. ROS-free.

joint_trajectory_controller replaces its trajectory on every message and, by default, starts
each new one from the *measured* state, so one point per tick drags a lagging arm back every
period (ros2_controllers #584). Sending the steps still planned as one trajectory, re-sent
when a new chunk starts, lets the controller play them at its own rate, without the jumps
(docs/performance.md, "Controllers").

Timing matches the one-point-per-tick output: the target of the step due at ``t`` is
reached at ``t + period``, so point j of the remaining steps is at ``(j + 1) * period``
after the stamp (the time the first of them was due). The first trajectory after the arm
held still has no point at 0, so the controller interpolates from where the arm is (a
point at 0 would be a step: trajectory.cpp samples it as reached). Every later one starts
with a point at 0 where the trajectory before it has the arm at the stamp, so the
controller carries on instead of restarting from the lagging measured state.

The last point carries zero velocity when velocities are sent at all: Jazzy's default
(``allow_nonzero_velocity_at_trajectory_end: false``) rejects any other ending.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sequence_ai_core.node_api import FloatArray, find_space

#: ``trajectory_mode`` values: the rest of the chunk per message, or one point per tick.
TRAJECTORY_MODES = ("chunk", "point")


@dataclass(frozen=True)
class PlannedTrajectory:
    """Rows are points: arm joint ``positions`` (n, joints), optional ``velocities``,
    ``gripper`` positions (n, gripper_dims) and ``times_s`` after the stamp."""

    positions: FloatArray
    velocities: FloatArray | None
    gripper: FloatArray
    times_s: FloatArray

    def __len__(self) -> int:
        return len(self.times_s)


def _boundary_velocities(velocities: FloatArray) -> FloatArray:
    """Velocity at the end of each step: the mean of the steps either side; zero at the end."""
    following = np.vstack([velocities[1:], np.zeros((1, velocities.shape[1]))])
    ends: FloatArray = 0.5 * (velocities + following)
    ends[-1] = 0.0
    return ends


def _position_velocities(positions: FloatArray, start: FloatArray, period_s: float) -> FloatArray:
    """Central differences through the targets (starting from ``start``); zero at the end."""
    path = np.vstack([start[None, :], positions])
    slopes: FloatArray = np.asarray(np.gradient(path, period_s, axis=0), dtype=np.float64)[1:]
    slopes[-1] = 0.0
    return slopes


def plan_trajectory(
    steps: FloatArray,
    *,
    action_space: str,
    gripper_dims: int,
    measured: FloatArray | None,
    period_s: float,
    velocities: bool,
    continue_from: FloatArray | None = None,
) -> PlannedTrajectory | str:
    """Joint targets for ``steps`` (already checked), or why there are none.

    ``continue_from``: where the trajectory sent before has the arm at the stamp. It becomes
    a first point at time 0, which the controller samples as already reached: the new
    trajectory carries on from the old one instead of restarting from the measured state.
    """
    if len(steps) == 0:
        return "no planned steps left"
    space = find_space(action_space)
    if space is None or not space.joint:
        return f"action space {action_space} has no joint targets"
    split = steps.shape[1] - gripper_dims
    arm, gripper = steps[:, :split], steps[:, split:]
    times: FloatArray = np.arange(1, len(steps) + 1, dtype=np.float64) * period_s
    base = continue_from if continue_from is not None else measured
    if space.kind == "absolute":
        positions = arm.copy()
        start = base if base is not None else arm[0]
        vel = _position_velocities(positions, start, period_s) if velocities else None
        first_speed = (positions[0] - start) / period_s
    else:  # velocities and deltas: integrated from where the arm is
        if base is None:
            return "no measured arm position to integrate the plan from"
        velocity = space.kind == "velocity"
        per_step = arm * period_s if velocity else arm
        positions = base + np.cumsum(per_step, axis=0)
        speeds = arm if velocity else arm / period_s
        vel = _boundary_velocities(speeds) if velocities else None
        first_speed = speeds[0]
    if continue_from is not None:
        positions = np.vstack([continue_from[None, :], positions])
        vel = None if vel is None else np.vstack([first_speed[None, :], vel])
        gripper = np.vstack([gripper[:1], gripper])
        times = np.concatenate([np.zeros(1), times])
    if not np.all(np.isfinite(positions)) or (vel is not None and not np.all(np.isfinite(vel))):
        return "planned joint targets are not finite"
    return PlannedTrajectory(positions, vel, gripper.copy(), times)


#: A new chunk continues from the trajectory sent before only while the measured position is
#: within this of where that trajectory has the arm; beyond it (the trajectory was refused,
#: or something else commands the arm) the controller starts again from the measured state.
CONTINUE_TOLERANCE_RAD = 0.1


class ChunkStreamer:
    """Plans each chunk's trajectory so that it continues the one sent before it."""

    def __init__(self, *, action_space: str, gripper_dims: int, velocities: bool) -> None:
        self.action_space = action_space
        self.gripper_dims = gripper_dims
        self.velocities = velocities
        self._sent: tuple[float, PlannedTrajectory, FloatArray] | None = None

    def reset(self) -> None:
        """After a hold, or at a new episode: the next trajectory starts from the arm."""
        self._sent = None

    def position_at(self, time_s: float) -> FloatArray | None:
        """Where the last trajectory sent has the arm at ``time_s`` (linear between points,
        from the measured position it was planned from; past its end the controller holds
        the last point); None before it or when nothing was sent."""
        if self._sent is None:
            return None
        stamp, planned, origin = self._sent
        elapsed = time_s - stamp
        times = planned.times_s
        if elapsed < 0.0:
            return None
        if times[0] > 0.0:
            times = np.concatenate([np.zeros(1), times])
            rows = np.vstack([origin[None, :], planned.positions])
        else:
            rows = planned.positions
        return np.array([np.interp(elapsed, times, rows[:, j]) for j in range(rows.shape[1])])

    def plan(
        self, steps: FloatArray, *, measured: FloatArray | None, period_s: float, stamp_s: float
    ) -> PlannedTrajectory | str:
        carry_on = self.position_at(stamp_s)
        if carry_on is not None and (
            measured is None or np.max(np.abs(carry_on - measured)) > CONTINUE_TOLERANCE_RAD
        ):
            carry_on = None
        planned = plan_trajectory(
            steps,
            action_space=self.action_space,
            gripper_dims=self.gripper_dims,
            measured=measured,
            period_s=period_s,
            velocities=self.velocities,
            continue_from=carry_on,
        )
        if not isinstance(planned, str):
            origin = measured if measured is not None else planned.positions[0]
            self._sent = (stamp_s, planned, origin)
        return planned


def due_offset_s(anchor: float, index: int, period_s: float, now: float) -> float:
    """How long ago (monotonic seconds) step ``index`` of a chunk anchored at ``anchor``
    was due; the trajectory's stamp is that much before the clock's now."""
    return max(0.0, now - (anchor + index * period_s))
