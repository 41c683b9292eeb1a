"""What an array parameter's values must be, as rules (``rules``): each checks the whole
array and renders its own constraint text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .rules import Rule


@dataclass(frozen=True)
class Names:
    """Non-empty names; each at most once if ``distinct``."""

    distinct: bool = True

    @property
    def text(self) -> str:
        return "distinct names" if self.distinct else "non-empty names"

    def problem(self, values: Sequence[Any]) -> str | None:
        if not all(str(value).strip() for value in values):
            return "contains an empty name"
        if self.distinct and len(set(values)) != len(values):
            return f"contains duplicates: {list(values)}"
        return None


@dataclass(frozen=True)
class Each:
    rule: Rule

    @property
    def text(self) -> str:
        return f"each {self.rule.text}"

    def problem(self, values: Sequence[Any]) -> str | None:
        for index, value in enumerate(values):
            problem = self.rule.problem(value)
            if problem is not None:
                return f"value {index}: {problem}"
        return None


@dataclass(frozen=True)
class Sized:
    """Exactly ``count`` values, each accepted by ``each``."""

    count: int
    each: Rule

    @property
    def text(self) -> str:
        return f"{self.count} values, each {self.each.text}"

    def problem(self, values: Sequence[Any]) -> str | None:
        if len(values) != self.count:
            return f"needs {self.count} values, got {list(values)}"
        return Each(self.each).problem(values)
