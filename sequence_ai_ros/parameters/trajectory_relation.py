"""The one relation that depends on the output type: what joint_trajectory_controller takes
at a trajectory's last point (``relations``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import outputs


@dataclass(frozen=True)
class EndsAtRest:
    """joint_trajectory output must be accepted by Humble's and Jazzy's default controller,
    or name the controller parameter that makes it acceptable: a point trajectory with
    velocities ends moving, which Jazzy's refuses unless told otherwise."""

    mode: str = "trajectory_mode"
    moving_end: str = "allow_nonzero_velocity_at_trajectory_end"

    @property
    def text(self) -> str:
        return f"not with {self.mode} point unless {self.moving_end}"

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        ends_moving = values[name] and values[self.mode] == "point"
        streams = outputs.get(values["output_type"]).streams_trajectories
        if not (ends_moving and streams) or values[self.moving_end]:
            return None
        return (
            f"with {self.mode}=point every message ends with non-zero velocity, which "
            "joint_trajectory_controller on Jazzy rejects by default ('Velocity of last "
            f"trajectory point ... is not zero'): set {self.moving_end}: true on the controller "
            f"and on this node, or {name}: false, or {self.mode}: chunk"
        )
