"""Every safety rule an action meets before it leaves the node. A failure stops the episode.

The engine already refuses non-finite and wrong-sized chunks; these checks run again on the
single action about to leave the node, together with the limits the robot owner configured
(``SafetyChecks``), on every point of a trajectory before it is sent (``check_trajectory``),
and with the rules that decide what an action is compared with (``check_action``):
- ``max_step`` compares with what the arm was last commanded, a hold included
  (``after_hold``): after an underrun hold a velocity restarts from zero;
- the first velocity of an episode is bounded from rest (the arm is still);
- the first absolute target is bounded from the measured position, which must be fresh;
- a target built from a measured position needs a fresh one (a stale reading would pull the
  arm back to it).
"""

from __future__ import annotations

import importlib
import math
import operator
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from sequence_ai_core.node_api import FloatArray, find_space

from .conversions import Command
from .inputs import InputStore
from .parameters import NodeConfig, ParameterError

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
    return cast(Validator, function)  # callable; SafetyChecks takes its result with bool()


class SafetyChecks:
    """Built-in checks from parameters, plus an optional user validator.

    On plain floats: an action has at most ``limits.MAX_ACTION_DIM`` values, and each numpy
    call on the control thread, right after its sleep, costs more than the whole loop over
    them (docs/performance.md, "Measured on real rclpy")."""

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
        self._lower = _per_dimension(lower, action_dim)
        self._upper = _per_dimension(upper, action_dim)
        self._max_step = _per_dimension(max_step, action_dim)  # one value is for every one
        self._validator = validator
        self._validator_name = validator_name

    def check(self, action: FloatArray, previous: FloatArray | None) -> str | None:
        """None if the action may be published, else why not."""
        values = np.asarray(action, dtype=np.float64)
        if values.shape != (self.action_dim,):
            return f"action has shape {values.shape}, expected ({self.action_dim},)"
        row: list[float] = values.tolist()
        if not all(map(math.isfinite, row)):
            bad = [i for i, value in enumerate(row) if not math.isfinite(value)]
            return f"non-finite values at index {bad}"
        reason = self._bounds(row) or self._step(row, previous)
        return reason or self._custom(values)

    def _bounds(self, row: list[float]) -> str | None:
        lower, upper = self._lower, self._upper
        if lower is not None and any(map(operator.lt, row, lower)):
            return f"below lower_limits at index {_where(operator.lt, row, lower)}"
        if upper is not None and any(map(operator.gt, row, upper)):
            return f"above upper_limits at index {_where(operator.gt, row, upper)}"
        return None

    def _step(self, row: list[float], previous: FloatArray | None) -> str | None:
        limit = self._max_step
        if limit is None or previous is None:
            return None
        # `previous` may be shorter (measured arm joints without gripper): compare the overlap.
        before: list[float] = np.asarray(previous, dtype=np.float64).tolist()
        for i, (value, last, most) in enumerate(zip(row, before, limit, strict=False)):
            change = abs(value - last)
            if change > most:
                return f"step change {change:.4g} > max_step {most:.4g} at index {i}"
        return None

    def _custom(self, values: FloatArray) -> str | None:
        if self._validator is None:
            return None
        try:
            accepted = bool(self._validator(values.copy()))
        except Exception as exc:  # a crashing validator must stop the arm, not the node
            return f"validator {self._validator_name} raised {type(exc).__name__}: {exc}"
        return None if accepted else f"validator {self._validator_name} rejected the action"


def _per_dimension(values: Sequence[float], action_dim: int) -> list[float] | None:
    """One bound per dimension (one value stands for all), or None for no bound."""
    if not len(values):
        return None
    bounds = [float(v) for v in values]
    if len(bounds) == 1:
        return bounds * action_dim
    if len(bounds) != action_dim:
        raise ValueError(f"{len(bounds)} bounds for {action_dim} dimensions")
    return bounds


def _where(
    compare: Callable[[float, float], bool], row: list[float], bounds: list[float]
) -> list[int]:
    return [
        i for i, (value, bound) in enumerate(zip(row, bounds, strict=True)) if compare(value, bound)
    ]


def checks_from_config(config: NodeConfig, action_dim: int) -> SafetyChecks:
    """The node's checks from its parameters; a validator that cannot be imported is a
    ``ParameterError`` naming ``validator`` (configure fails, nothing runs unchecked)."""
    validator = None
    if config.validator:
        try:
            validator = load_validator(config.validator)
        except ValueError as exc:
            raise ParameterError("validator", str(exc)) from exc
    return SafetyChecks(
        action_dim,
        lower=config.lower_limits,
        upper=config.upper_limits,
        max_step=config.max_step,
        validator=validator,
        validator_name=config.validator,
    )


def check_action(
    checks: SafetyChecks,
    action: FloatArray,
    *,
    action_space: str,
    last_action: FloatArray | None,
    measured: FloatArray | None,
    arm_problem: str | None,
    gripper_dims: int,
    builds_positions: bool,
) -> str | None:
    """None if ``action`` may be sent, else why not. ``last_action``: what the arm was last
    commanded this episode (None before the first command); ``measured``: the fresh arm
    position or None, with ``arm_problem`` saying why; ``builds_positions``: the output type
    turns this action into joint targets from the measured position."""
    space = find_space(action_space)
    kind = None if space is None else space.kind
    absolute_joints = space is not None and space.joint and kind == "absolute"
    first_absolute = last_action is None and absolute_joints
    needs_measured = first_absolute or (builds_positions and kind != "absolute")
    if measured is None and needs_measured:
        return f"no fresh arm position: {arm_problem}"
    previous = last_action
    if first_absolute:
        previous = measured  # the first target must not jump away from where the arm is
    elif previous is None and kind == "velocity":
        # The arm is still: bound the first velocity too (arm dims; the gripper is a position).
        previous = np.zeros(len(action) - gripper_dims)
    return checks.check(action, previous)


def check_trajectory(
    checks: SafetyChecks, steps: FloatArray, previous: FloatArray | None
) -> str | None:
    """Every planned step through the same checks as a single action, each against the one
    before (the first against ``previous``, the action ``check_action`` passed); the first
    refusal, naming the step."""
    for index, step in enumerate(steps):
        reason = checks.check(step, previous)
        if reason:
            return f"planned step {index} of the trajectory: {reason}"
        previous = step
    return None


def trajectory_steps(
    chunk_steps: FloatArray, action: FloatArray, remaining: int | None
) -> FloatArray:
    """The steps a trajectory may carry from the playing one on: ``action`` (what the engine
    plays now and ``check_action`` passed) first, and no more than the episode's
    ``remaining`` actions. An absolute episode ends on its last target without a hold: the
    controller would play whatever steps past max_actions the trajectory still carried."""
    steps: FloatArray = np.array(chunk_steps, dtype=np.float64)
    if remaining is not None:
        steps = steps[: max(1, remaining)]
    steps[0] = action
    return steps


def after_hold(hold: Command) -> FloatArray:
    """What ``max_step`` compares the next action with after a hold: the hold itself."""
    held: FloatArray = np.concatenate([hold.arm, hold.gripper])
    return held


def stale_input(inputs: InputStore, config: NodeConfig) -> str | None:
    """Why motion must end at this tick, for every output type alike: the arm reading is
    unusable or older than ``max_observation_age_s``. Motion and the episode then end within
    that age plus one control period of the last reading: a plan must not play on (nor a
    target be built) on a frozen reading."""
    return inputs.arm_stale(config.max_observation_age_s)
