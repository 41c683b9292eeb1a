"""Checks every action must pass before it is published. A failure stops the episode.

The engine already refuses non-finite and wrong-sized chunks; these checks run again on the
single action about to leave the node, together with the limits the robot owner configured.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import numpy as np

from sequence_ai_core.types import FloatArray

Validator = Callable[[FloatArray], bool]


def load_validator(spec: str) -> Validator:
    """Import ``package.module:function``; raises ValueError naming what is missing."""
    module_name, _, function_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import validator module {module_name!r}: {exc}") from exc
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"validator {spec!r}: {module_name} has no function {function_name!r}")
    return function  # type: ignore[no-any-return]


class SafetyChecks:
    """Built-in checks from parameters, plus an optional user validator."""

    def __init__(
        self,
        action_dim: int,
        *,
        lower: Sequence[float] = (),
        upper: Sequence[float] = (),
        max_step: Sequence[float] = (),
        validator: Validator | None = None,
        validator_name: str = "",
    ) -> None:
        self.action_dim = action_dim
        self._lower = np.asarray(lower, dtype=np.float64) if len(lower) else None
        self._upper = np.asarray(upper, dtype=np.float64) if len(upper) else None
        self._max_step = np.asarray(max_step, dtype=np.float64) if len(max_step) else None
        self._validator = validator
        self._validator_name = validator_name

    def check(self, action: FloatArray, previous: FloatArray | None) -> str | None:
        """None if the action may be published, else why not."""
        values = np.asarray(action, dtype=np.float64)
        if values.shape != (self.action_dim,):
            return f"action has shape {values.shape}, expected ({self.action_dim},)"
        if not np.all(np.isfinite(values)):
            return f"non-finite values at index {np.flatnonzero(~np.isfinite(values)).tolist()}"
        reason = self._bounds(values) or self._step(values, previous)
        return reason or self._custom(values)

    def _bounds(self, values: FloatArray) -> str | None:
        if self._lower is not None and np.any(values < self._lower):
            return f"below lower_limits at index {np.flatnonzero(values < self._lower).tolist()}"
        if self._upper is not None and np.any(values > self._upper):
            return f"above upper_limits at index {np.flatnonzero(values > self._upper).tolist()}"
        return None

    def _step(self, values: FloatArray, previous: FloatArray | None) -> str | None:
        if self._max_step is None or previous is None:
            return None
        # `previous` may be shorter (measured arm joints without gripper): compare the overlap.
        n = min(len(previous), len(values))
        change = np.abs(values[:n] - np.asarray(previous[:n], dtype=np.float64))
        limit = np.broadcast_to(self._max_step, values.shape)[:n]
        too_big = np.flatnonzero(change > limit)
        if too_big.size:
            i = int(too_big[0])
            return f"step change {change[i]:.4g} > max_step {limit[i]:.4g} at index {i}"
        return None

    def _custom(self, values: FloatArray) -> str | None:
        if self._validator is None:
            return None
        try:
            accepted = bool(self._validator(values.copy()))
        except Exception as exc:  # a crashing validator must stop the arm, not the node
            return f"validator {self._validator_name} raised {type(exc).__name__}: {exc}"
        return None if accepted else f"validator {self._validator_name} rejected the action"
