"""A parameter's ROS descriptor, as plain values (``rclpy_guards`` makes the message): its
meaning, its constraint text, and the range rclpy enforces where the rule is one inclusive
range (``ros2 param set`` is then refused out of it, with the same bounds as the text)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from .declaration import Parameter
from .rules import Number

#: The widest range a descriptor holds: rcl_interfaces' int64 and float64.
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class Descriptor:
    description: str
    additional_constraints: str
    #: (from, to), both included; None: no range (the rule is not one, or not a number's).
    integer_range: tuple[int, int] | None = None
    floating_point_range: tuple[float, float] | None = None


def descriptor(parameter: Parameter) -> Descriptor:
    rule, kind = parameter.rule, parameter.kind
    plain = Descriptor(parameter.meaning, parameter.constraints)
    if not isinstance(rule, Number) or rule.above:  # rclpy's ranges include both ends
        return plain
    if kind == "integer":
        top = _INT64_MAX if rule.high is None else int(rule.high)
        return replace(plain, integer_range=(int(rule.low), top))
    if kind == "double":
        high = sys.float_info.max if rule.high is None else float(rule.high)
        return replace(plain, floating_point_range=(float(rule.low), high))
    return plain
