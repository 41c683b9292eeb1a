"""Where a hand-back starts from: the arm as a person left it, in the run's action space.

When a person hands the arm back (``Episode.hand_back``), nothing planned before is played
again: the first chunk after it is handed over from the arm's *measured* state, as from a
chunk that had played it, with the same hand-over rules as any seam (``plan.ChunkPlan``).
That state is what a hold sends, by the action space's row (``action_spaces``): the measured
position in absolute spaces, and rest (zeros) for speeds and changes. An absolute
end-effector space takes the observation's ``end_effector_pose``; without one nothing is
measured and the chunk plays from its first step, as the first chunk of a run does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..action_spaces import find_space
from ..types import FloatArray, Observation


def measured_row(
    space: str | None, observation: Observation, dim: int, arm_index: Sequence[int]
) -> FloatArray | None:
    """The arm's state in ``space`` as a ``dim``-wide action (gripper dimensions: the
    observation's gripper, else 0; hand-overs never correct them), or None when it cannot be
    told (an unknown space, no pose, a reading of another size)."""
    row = find_space(space)
    if row is None:
        return None
    if row.kind != "absolute":
        return np.zeros(dim, dtype=np.float64)
    proprioception = observation.proprioception
    values = proprioception.joint_positions if row.joint else proprioception.end_effector_pose
    if values is None:
        return None
    if len(values) == dim:
        return np.array(values, dtype=np.float64)
    if len(values) != len(arm_index):
        return None
    out = np.full(dim, proprioception.gripper or 0.0, dtype=np.float64)
    out[list(arm_index)] = values
    return out
