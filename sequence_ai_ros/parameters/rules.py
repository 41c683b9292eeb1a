"""What one parameter's value must be. A rule checks a value and says, in the words
docs/node.md and ``ros2 param describe`` show, what it accepts: the text is rendered from the
same fields the check reads, so the two cannot say different things."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Protocol


class Rule(Protocol):
    @property
    def text(self) -> str:
        """The constraint as a reader sees it; empty: any value of the type."""

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is refused (naming the value), or None."""


@dataclass(frozen=True)
class Free:
    """Any value of the parameter's type."""

    text: str = ""

    def problem(self, value: Any) -> str | None:
        return None


@dataclass(frozen=True)
class NonEmpty:
    text: str = "non-empty"

    def problem(self, value: Any) -> str | None:
        return None if value else "must not be empty"


def _finite(value: Any) -> bool:
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return numeric and math.isfinite(value)


@dataclass(frozen=True)
class Number:
    """A finite number from ``low`` (excluded if ``above``) up to ``high`` (None: no bound)."""

    low: float
    high: float | None = None
    above: bool = False

    @property
    def text(self) -> str:
        if self.high is not None:
            return f"{self.low:g}..{self.high:g}"
        return f"{'>' if self.above else '>='} {self.low:g}"

    def accepts(self, value: Any) -> bool:
        if not _finite(value) or value < self.low or (self.above and value == self.low):
            return False
        return self.high is None or value <= self.high

    def problem(self, value: Any) -> str | None:
        return None if self.accepts(value) else f"must be {self.text}, got {value!r}"


@dataclass(frozen=True)
class Finite:
    text: str = "finite"

    def problem(self, value: Any) -> str | None:
        return None if _finite(value) else f"must be finite, got {value!r}"


@dataclass(frozen=True)
class Exactly:
    """One value with a meaning of its own (``control_hz``'s 0: the chunk's own rate)."""

    value: float

    @property
    def text(self) -> str:
        return f"{self.value:g}"

    def problem(self, value: Any) -> str | None:
        return None if value == self.value else f"must be {self.text}, got {value!r}"


@dataclass(frozen=True)
class Either:
    first: Rule
    second: Rule

    @property
    def text(self) -> str:
        return f"{self.first.text} or {self.second.text}"

    def problem(self, value: Any) -> str | None:
        if self.first.problem(value) is None or self.second.problem(value) is None:
            return None
        return f"must be {self.text}, got {value!r}"


@dataclass(frozen=True)
class Choice:
    choices: tuple[str, ...]

    @property
    def text(self) -> str:
        return " | ".join(self.choices)

    def problem(self, value: Any) -> str | None:
        if value in self.choices:
            return None
        return f"'{value}' is not one of {', '.join(self.choices)}"


@dataclass(frozen=True)
class Shape:
    """A string matching ``pattern`` (or empty, if ``optional``); ``shape`` is the pattern as
    a reader would write it."""

    pattern: str
    shape: str
    optional: bool = True

    @property
    def text(self) -> str:
        return f"empty or {self.shape}" if self.optional else self.shape

    def problem(self, value: Any) -> str | None:
        if (self.optional and value == "") or re.fullmatch(self.pattern, str(value)):
            return None
        return f"must be {self.text}, got {value!r}"
