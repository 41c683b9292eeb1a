"""What "hold" means for each action space.

A forward controller keeps executing the last command it received, so stopping the episode is
not enough: the node must send a command that keeps the arm where it is. Each space's hold
is its row's ``hold`` in ``sequence_ai_core.action_spaces``:
- velocity spaces: zero velocity;
- absolute joint spaces: the measured position (the last target if nothing was measured);
- delta spaces: a zero delta (joint-space outputs get the measured position);
- ee_absolute: the last commanded pose (the node does not measure end-effector poses).
Gripper dimensions are positions in every space here, so they keep their last value: a zero
would open or close the hand.
"""

from __future__ import annotations

import numpy as np

from sequence_ai_core.node_api import FloatArray, space_named

from .conversions import Command


def hold_command(
    *,
    action_space: str,
    gripper_dims: int,
    last_action: FloatArray | None,
    measured: FloatArray | None,
    last_target: FloatArray | None = None,
) -> Command | None:
    """The hold for the current state, or None if this episode has commanded nothing yet
    (then the controller is still holding whatever held the arm before). ``measured``: the
    fresh arm position, or None; then the hold is at ``last_target``, the last joint targets
    sent (the controller's goal), not at a stale reading."""
    if last_action is None:
        return None
    space = space_named(action_space)  # an unknown space has no hold: UnknownActionSpace
    measured = last_target if measured is None else measured
    split = len(last_action) - gripper_dims
    last_arm, gripper = last_action[:split], last_action[split:].copy()
    zeros = np.zeros(split, dtype=np.float64)
    usable = measured if measured is not None and len(measured) == split else None
    positions = usable if space.joint else None
    if space.hold == "zero_velocity":
        return Command(zeros, gripper, positions=positions, velocities=zeros)
    if space.hold == "measured_position":
        target = positions if positions is not None else last_arm.copy()
        return Command(target, gripper, positions=target)
    if space.hold == "last_command":
        return Command(last_arm.copy(), gripper)
    return Command(zeros, gripper, positions=positions)  # zero_delta
