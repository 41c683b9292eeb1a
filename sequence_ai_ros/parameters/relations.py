"""Constraints between parameters, as objects that check the parsed values and render their
own text (as ``rules`` do for one value); a parameter's constraint text is its rule's and
its relations', in that order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .rules import Rule


class Relation(Protocol):
    @property
    def text(self) -> str: ...

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        """Why parameter ``name``'s value is refused given the others' (``values``, parsed)."""


@dataclass(frozen=True)
class When:
    """Another parameter's value as accepted by ``rule``: the condition of a relation."""

    other: str
    rule: Rule

    @property
    def text(self) -> str:
        return f"{self.other} {self.rule.text}"

    def holds(self, values: Mapping[str, Any]) -> bool:
        return self.rule.problem(values[self.other]) is None

    def given(self, values: Mapping[str, Any]) -> str:
        return f"{self.other}={values[self.other]}"


@dataclass(frozen=True)
class RequiredWith:
    """Set whenever every condition holds; ``why`` says what goes wrong without it."""

    conditions: tuple[When, ...]
    why: str = ""

    @property
    def text(self) -> str:
        return "required with " + " and ".join(c.text for c in self.conditions)

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        if values[name] or not all(c.holds(values) for c in self.conditions):
            return None
        given = " and ".join(c.given(values) for c in self.conditions)
        return f"is required with {given}" + (f": {self.why}" if self.why else "")


@dataclass(frozen=True)
class OnlyWith:
    condition: When

    @property
    def text(self) -> str:
        return f"only with {self.condition.text}"

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        if not values[name] or self.condition.holds(values):
            return None
        return f"is set but {self.condition.other} is {values[self.condition.other]!r}"


@dataclass(frozen=True)
class ExactlyWith:
    """Set when the condition holds, and only then."""

    condition: When

    @property
    def text(self) -> str:
        return f"required with {self.condition.text}, and only then"

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        return None if bool(values[name]) == self.condition.holds(values) else f"is {self.text}"


@dataclass(frozen=True)
class NotIn:
    other: str

    @property
    def text(self) -> str:
        return f"not one of {self.other}"

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        value = values[name]
        return f"'{value}' is also listed in {self.other}" if value in values[self.other] else None
