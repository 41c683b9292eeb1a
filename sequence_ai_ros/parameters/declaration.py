"""One node parameter, declared once: its name, ROS type, default, rule and meaning. The
parser, the ROS descriptor and docs/node.md's table are all read from it.

Array parameters without a sensible default are declared statically typed and unset
(``default`` None) rather than with ``[]``: rclpy infers BYTE_ARRAY from an empty list, after
which a string array from a YAML file is rejected as a type mismatch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .model_relations import ModelRelation
from .relations import Relation
from .rules import Free, Rule

Kind = Literal[
    "bool", "integer", "double", "string", "integer_array", "double_array", "string_array"
]
#: A value as its kind holds it in Python (ROS may hand an integer to a double parameter;
#: rclpy_guards refuses any other mismatch).
_SCALAR: dict[str, Callable[[Any], Any]] = {
    "bool": bool,
    "integer": int,
    "double": float,
    "string": str,
}
_ANY = Free()


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: Kind
    default: Any  # None: statically typed and unset
    meaning: str
    rule: Rule = _ANY
    relations: tuple[Relation, ...] = ()
    #: Checked against the model's catalogue entry, once connected.
    model_relations: tuple[ModelRelation, ...] = ()
    #: A string's surrounding whitespace is dropped (not the instruction's: it is the model's).
    strip: bool = True

    @property
    def constraints(self) -> str:
        """What the value must be, as docs/node.md and ``ros2 param describe`` show it."""
        texts = [self.rule.text, *(r.text for r in self.relations)]
        texts += [r.text for r in self.model_relations]
        return "; ".join(text for text in texts if text)

    def value(self, raw: Any) -> Any:
        """``raw`` (None: unset) as the kind holds it: arrays as tuples, strings stripped."""
        if self.kind.endswith("_array"):
            element = _SCALAR[self.kind.removesuffix("_array")]
            return tuple(element(v) for v in (raw or ()))
        if self.kind == "string":
            text = "" if raw is None else str(raw)
            return text.strip() if self.strip else text
        return _SCALAR[self.kind](raw)

    def problem(self, value: Any) -> str | None:
        """Why the (converted) ``value`` breaks the rule, or None; naming the value."""
        return self.rule.problem(value)
