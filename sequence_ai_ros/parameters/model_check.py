"""The parameters checked against the model's catalogue entry once the node has connected:
every declared ``model_relations``, and a warning for a view of the model left without a
camera."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .config import NodeConfig, ParameterError
from .model_relations import ModelShape
from .table import PARAMETERS


def _values(config: NodeConfig) -> dict[str, Any]:
    """The parameters the model relations read, as the config holds them."""
    return {
        "joint_names": config.joint_names,
        "camera_views": tuple(camera.view for camera in config.cameras),
        "lower_limits": config.lower_limits,
        "upper_limits": config.upper_limits,
        "max_step": config.max_step,
        "gripper_dims": config.gripper_dims,
    }


def check_against_model(
    config: NodeConfig, action_dim: int, camera_views: Sequence[str], warn: Callable[[str], None]
) -> None:
    """Cross-check parameters with the model's catalogue entry; raises ParameterError."""
    model, values = ModelShape(action_dim, tuple(camera_views)), _values(config)
    for parameter in PARAMETERS:
        for relation in parameter.model_relations:
            problem = relation.problem(parameter.name, values, model)
            if problem is not None:
                raise ParameterError(parameter.name, problem)
    missing = [view for view in model.views if view not in values["camera_views"]]
    if missing:
        warn(f"camera views {missing} of the model have no topic; requests go without them")
