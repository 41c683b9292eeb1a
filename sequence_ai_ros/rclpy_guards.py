"""What real rclpy (Humble 3.3, Jazzy 7.1) would let kill the node, handled in one place.

- A parameter override of the wrong type (``-p control_hz:=15`` for a double) raises
  ``InvalidParameterTypeException`` from ``declare_parameter`` in the constructor. An integer
  for a double (or an integer list for a double list) is what YAML and ``-p`` give for a whole
  number, so it is taken as the double it means; any other mismatch is declared with its
  default and reported, and configure refuses until the parameter is set right. So is an
  override outside the range the descriptor declares (rclpy raises
  ``InvalidParameterValueException``), in the words of the parameter's rule.
- ``ChangeState`` for a transition the current state does not have (``activate`` while
  unconfigured) raises ``RCLError`` out of the lifecycle service callback and so out of
  ``spin_once`` (fixed upstream only in Kilted); the service answers ``success=False`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lifecycle_msgs.srv import ChangeState
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.parameter import Parameter

from . import parameters

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
class RefusedOverride:
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


def _descriptor(declared: parameters.Parameter) -> ParameterDescriptor:
    """The declaration's descriptor as the message (a new one per call: rclpy writes the
    type into the one it is given)."""
    made = parameters.descriptor(declared)
    message = ParameterDescriptor(
        description=made.description, additional_constraints=made.additional_constraints
    )
    if made.integer_range is not None:
        first, last = made.integer_range
        message.integer_range = [IntegerRange(from_value=first, to_value=last, step=0)]
    if made.floating_point_range is not None:
        low, high = made.floating_point_range
        message.floating_point_range = [FloatingPointRange(from_value=low, to_value=high, step=0.0)]
    return message


def _refused(declared: parameters.Parameter, override: Any, meant: Any) -> str:
    """Why an override could not be declared: outside the rule's range, or of the wrong type."""
    kind = declared.kind
    if meant is not None or override.type_ == _TYPES[kind]:
        value = meant if meant is not None else override.value
        return declared.problem(declared.value(value)) or f"refused: {value!r}"
    given = override.type_.name.lower()
    return f"expects {kind.replace('_', ' ')}, got {given} {override.value!r}"


def declare_parameters(
    node: Any, declared: Sequence[parameters.Parameter]
) -> dict[str, RefusedOverride]:
    """Declare every parameter; the overrides that could not be taken (wrong type, or out of
    the declared range), by name."""
    # rclpy 3.3 and 7.1 keep the overrides (launch, YAML, -p) in `_parameter_overrides`.
    overrides = getattr(node, "_parameter_overrides", {}) or {}
    refused: dict[str, RefusedOverride] = {}
    for each in declared:
        value = _TYPES[each.kind] if each.default is None else each.default
        try:
            node.declare_parameter(each.name, value, _descriptor(each))
            continue
        except (InvalidParameterTypeException, InvalidParameterValueException):
            pass
        override = overrides[each.name]
        taken = node.declare_parameter(each.name, value, _descriptor(each), ignore_override=True)
        meant = _as_double(each.kind, override)
        if meant is not None:
            result = node.set_parameters([Parameter(each.name, _TYPES[each.kind], meant)])[0]
            if result.successful:
                continue
        refused[each.name] = RefusedOverride(_refused(each, override, meant), taken.value)
    return refused


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
