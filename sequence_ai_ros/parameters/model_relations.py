"""Constraints between parameters and the model's catalogue entry (its action size and
camera views), checked once the node has connected; each renders its own text, as
``relations`` do."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ModelShape:
    action_dim: int
    views: tuple[str, ...]


class ModelRelation(Protocol):
    @property
    def text(self) -> str: ...

    def problem(self, name: str, values: Mapping[str, Any], model: ModelShape) -> str | None:
        """Why parameter ``name``'s value does not fit ``model``, or None."""


def _arm_dims(values: Mapping[str, Any], model: ModelShape) -> int:
    return model.action_dim - int(values["gripper_dims"])


@dataclass(frozen=True)
class LeavesArm:
    text: str = "leaving at least one arm dim"

    def problem(self, name: str, values: Mapping[str, Any], model: ModelShape) -> str | None:
        if _arm_dims(values, model) >= 1:
            return None
        return f"{values[name]} leaves no arm dims of {model.action_dim}"


@dataclass(frozen=True)
class ArmDims:
    """One joint per arm dim; a model with none left is ``LeavesArm``'s to refuse."""

    text: str = "one per arm dim (action_dim - gripper_dims)"

    def problem(self, name: str, values: Mapping[str, Any], model: ModelShape) -> str | None:
        joints, arm = values[name], _arm_dims(values, model)
        if not joints or arm < 1 or len(joints) == arm:
            return None
        return (
            f"has {len(joints)} joints; the model's {model.action_dim} action dims "
            f"minus gripper_dims={values['gripper_dims']} leave {arm}"
        )


@dataclass(frozen=True)
class ActionDims:
    """One value per action dim (or, if ``or_one``, one for all), when set."""

    or_one: bool = False

    @property
    def text(self) -> str:
        return ("1 or " if self.or_one else "") + "action_dim values"

    def problem(self, name: str, values: Mapping[str, Any], model: ModelShape) -> str | None:
        count, dim = len(values[name]), model.action_dim
        if count in ((0, 1, dim) if self.or_one else (0, dim)):
            return None
        if self.or_one:
            return f"needs 1 or {dim} values, got {count}"
        return f"has {count} values, the model has {dim} action dims"


@dataclass(frozen=True)
class ModelViews:
    text: str = "each a view of the model"

    def problem(self, name: str, values: Mapping[str, Any], model: ModelShape) -> str | None:
        unknown = [view for view in values[name] if view not in model.views]
        return f"{unknown} not among the model's views {list(model.views)}" if unknown else None
