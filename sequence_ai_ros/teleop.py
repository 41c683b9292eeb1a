"""What an operator's device commanded, as numbers for the episode's bag (ROS-free).

``teleop_topic`` carries the output type's message (the device drives the same controller
interface the policy does). While a person has the arm, each message is journaled
(``Journal.operator``) as the values it commands: a ``Float64MultiArray``'s data, a
``JointTrajectory``'s first point (positions, else velocities), or a ``JointState``'s
positions (else velocities).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sequence_ai_core.node_api import FloatArray


def operator_values(msg: Any) -> FloatArray:
    """The values ``msg`` commands (empty when it carries none), read by its fields."""
    if hasattr(msg, "data"):
        values: Any = msg.data
    elif hasattr(msg, "points"):
        point = msg.points[0] if len(msg.points) else None
        if point is None:
            values = ()
        else:
            values = point.positions if len(point.positions) else point.velocities
    else:
        values = msg.position if len(msg.position) else msg.velocity
    return np.array([float(v) for v in values], dtype=np.float64)
