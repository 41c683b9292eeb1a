"""Relations between array parameters (``relations``): as many values as another has, and
each above another's at the same index."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class OnePer:
    """As many values as ``other`` has (or none, if ``unset_ok``)."""

    other: str
    unset_ok: bool = False

    @property
    def text(self) -> str:
        return ("unset or " if self.unset_ok else "") + f"one per {self.other} entry"

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        count, wanted = len(values[name]), len(values[self.other])
        if count == wanted or (self.unset_ok and count == 0):
            return None
        return f"needs one per {self.other} entry ({wanted}), got {count}"


@dataclass(frozen=True)
class Exceeds:
    """Each value above ``other``'s at the same index, where both are set."""

    other: str

    @property
    def text(self) -> str:
        return f"each above {self.other}"

    def problem(self, name: str, values: Mapping[str, Any]) -> str | None:
        upper, lower = values[name], values[self.other]
        if not (upper and lower):
            return None
        if len(upper) != len(lower):
            return f"has {len(upper)} values, {self.other} has {len(lower)}"
        bad = [i for i, (lo, hi) in enumerate(zip(lower, upper, strict=True)) if lo >= hi]
        return f"must exceed {self.other} at index {bad}" if bad else None
