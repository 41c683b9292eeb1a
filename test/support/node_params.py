"""The node's parameters as ROS would hand them over: every default, some changed."""

from __future__ import annotations

from typing import Any

from sequence_ai_ros import parameters


def raw_params(**changes: Any) -> dict[str, Any]:
    values = {spec.name: spec.default for spec in parameters.PARAMETERS}
    values.update(changes)
    return values
