"""The rest of a chunk as one joint trajectory, for joint_trajectory_controller. ROS-free.

joint_trajectory_controller replaces its trajectory on every message and, by default, starts
each new one from the *measured* state, so one point per tick drags a lagging arm back every
period (ros2_controllers #584). Sending the steps still planned as one trajectory, re-sent
when a new chunk starts, lets the controller play them at its own rate with one restart per
chunk (see ``bench/controllers.py`` for the measured difference).

Timing matches the one-point-per-tick output: the target of the step due at ``t`` is
reached at ``t + period``, so point j of the remaining steps is at ``(j + 1) * period``
after the stamp (the time the first of them was due). The first point is never at 0: a
zero-time first point is a step of the commanded position (trajectory.cpp samples it as
reached), and a stamp in the past with the first point already due would skip the
controller's interpolation from where the arm is.

The last point carries zero velocity when velocities are sent at all: Jazzy's default
(``allow_nonzero_velocity_at_trajectory_end: false``) rejects any other ending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sequence_ai_core.types import ABSOLUTE_SPACES, DELTA_SPACES, VELOCITY_SPACES, FloatArray

#: ``trajectory_mode`` values: the rest of the chunk per message, or one point per tick.
TRAJECTORY_MODES = ("chunk", "point")

Check = Callable[[FloatArray, "FloatArray | None"], "str | None"]


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


def check_steps(steps: FloatArray, previous: FloatArray | None, check: Check) -> str | None:
    """Every step through the same check as a single action, each against the one before
    (the first against ``previous``); the first refusal, naming the step."""
    for index, step in enumerate(steps):
        reason = check(step, previous)
        if reason:
            return f"planned step {index} of the trajectory: {reason}"
        previous = step
    return None


def _boundary_velocities(velocities: FloatArray) -> FloatArray:
    """Velocity at the end of each step: the mean of the steps either side; zero at the end."""
    following = np.vstack([velocities[1:], np.zeros((1, velocities.shape[1]))])
    ends = 0.5 * (velocities + following)
    ends[-1] = 0.0
    return ends


def _position_velocities(positions: FloatArray, start: FloatArray, period_s: float) -> FloatArray:
    """Central differences through the targets (starting from ``start``); zero at the end."""
    path = np.vstack([start[None, :], positions])
    slopes = np.gradient(path, period_s, axis=0)[1:]
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
) -> PlannedTrajectory | str:
    """Joint targets for ``steps`` (already checked), or why there are none."""
    if len(steps) == 0:
        return "no planned steps left"
    split = steps.shape[1] - gripper_dims
    arm, gripper = steps[:, :split], steps[:, split:]
    times = (np.arange(len(steps)) + 1.0) * period_s
    joint_delta = action_space in DELTA_SPACES and action_space.startswith("joint")
    if action_space in VELOCITY_SPACES or joint_delta:
        if measured is None:
            return "no measured arm position to integrate the plan from"
        per_step = arm * period_s if action_space in VELOCITY_SPACES else arm
        positions = measured + np.cumsum(per_step, axis=0)
        speeds = arm if action_space in VELOCITY_SPACES else arm / period_s
        vel = _boundary_velocities(speeds) if velocities else None
    elif action_space in ABSOLUTE_SPACES and action_space.startswith("joint"):
        positions = arm.copy()
        start = measured if measured is not None else arm[0]
        vel = _position_velocities(positions, start, period_s) if velocities else None
    else:
        return f"action space {action_space} has no joint targets"
    if not np.all(np.isfinite(positions)) or (vel is not None and not np.all(np.isfinite(vel))):
        return "planned joint targets are not finite"
    return PlannedTrajectory(positions, vel, gripper.copy(), times)


def due_offset_s(anchor: float, index: int, period_s: float, now: float) -> float:
    """How long ago (monotonic seconds) step ``index`` of a chunk anchored at ``anchor``
    was due; the trajectory's stamp is that much before the clock's now."""
    return max(0.0, now - (anchor + index * period_s))
