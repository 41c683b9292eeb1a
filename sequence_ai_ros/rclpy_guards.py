"""What real rclpy (Humble 3.3, Jazzy 7.1) would let kill the node, handled in one place.

- A parameter override of the wrong type (``-p control_hz:=15`` for a double) raises
  ``InvalidParameterTypeException`` from ``declare_parameter`` in the constructor. An integer
  for a double (or an integer list for a double list) is what YAML and ``-p`` give for a whole
  number, so it is taken as the double it means; any other mismatch is declared with its
  default and reported, and configure refuses until the parameter is set right.
- ``ChangeState`` for a transition the current state does not have (``activate`` while
  unconfigured) raises ``RCLError`` out of the lifecycle service callback and so out of
  ``spin_once`` (fixed upstream only in Kilted); the service answers ``success=False`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lifecycle_msgs.srv import ChangeState
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException
from rclpy.parameter import Parameter

from .declarations import ParamSpec

_TYPES = {
    "bool": Parameter.Type.BOOL,
    "integer": Parameter.Type.INTEGER,
    "double": Parameter.Type.DOUBLE,
    "string": Parameter.Type.STRING,
    "integer_array": Parameter.Type.INTEGER_ARRAY,
    "double_array": Parameter.Type.DOUBLE_ARRAY,
    "string_array": Parameter.Type.STRING_ARRAY,
}


@dataclass(frozen=True)
class WrongType:
    """An override that could not be taken; stands until the parameter is set to another value."""

    problem: str
    declared: Any  # the value declared in its place (the default)


def _as_double(kind: str, override: Any) -> Any:
    """The override as the double (list) it means, or None if it is not an integer (list)."""
    if kind == "double" and override.type_ == Parameter.Type.INTEGER:
        return float(override.value)
    if kind == "double_array" and override.type_ == Parameter.Type.INTEGER_ARRAY:
        return [float(v) for v in override.value]
    return None


def declare_parameters(node: Any, specs: Sequence[ParamSpec]) -> dict[str, WrongType]:
    """Declare every parameter of ``specs``; the overrides that had the wrong type, by name."""
    # rclpy 3.3 and 7.1 keep the overrides (launch, YAML, -p) in `_parameter_overrides`.
    overrides = getattr(node, "_parameter_overrides", {}) or {}
    wrong: dict[str, WrongType] = {}
    for spec in specs:
        descriptor = ParameterDescriptor(
            description=spec.description, additional_constraints=spec.constraints
        )
        value = _TYPES[spec.kind] if spec.default is None else spec.default
        try:
            node.declare_parameter(spec.name, value, descriptor)
            continue
        except InvalidParameterTypeException:
            pass
        override = overrides[spec.name]
        declared = node.declare_parameter(spec.name, value, descriptor, ignore_override=True)
        meant = _as_double(spec.kind, override)
        if meant is not None:
            node.set_parameters([Parameter(spec.name, _TYPES[spec.kind], meant)])
            continue
        given = override.type_.name.lower()
        wrong[spec.name] = WrongType(
            f"expects {spec.kind.replace('_', ' ')}, got {given} {override.value!r}",
            declared.value,
        )
    return wrong


def refuse_unregistered_transitions(node: Any, log: Callable[[str], None]) -> None:
    """Make the node's ChangeState service answer ``success=False`` where rclpy would raise."""
    for service in node.services:
        if service.srv_type is ChangeState:
            service.callback = _refusing(service.callback, log)


def _refusing(callback: Callable[[Any, Any], Any], log: Callable[[str], None]) -> Any:
    def change_state(request: Any, response: Any) -> Any:
        try:
            return callback(request, response)
        except Exception as exc:  # rclpy's RCLError: "Transition is not registered"
            transition = request.transition
            log(f"lifecycle transition {transition.id} '{transition.label}' refused: {exc}")
            response.success = False
            return response

    return change_state
