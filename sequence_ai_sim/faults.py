"""Faults the simulator can inject into the next ``POST /v1/act`` answers.

Transport faults (status, warming, busy, html, not_json, reset, timeout, slow_body) apply
whatever the request was; status, warming, busy, html, not_json and reset answer before auth,
validation or model time are spent, like a proxy in front of the gateway. Body faults (nan, ragged,
empty_steps, ...) corrupt an otherwise successful 200 answer and leave error answers alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Faults that replace the answer before the request is looked at.
EARLY_KINDS = frozenset({"status", "warming", "busy", "html", "reset", "not_json"})
#: Faults that corrupt the JSON body of a successful answer.
BODY_KINDS = frozenset(
    {
        "nan",
        "ragged",
        "empty_steps",
        "dim_mismatch",
        "missing_field",
        "zero_frequency",
        "non_numeric",
        "steps",
    }
)


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour. Build it with the factory class methods."""

    kind: str
    status_code: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    name: str = ""
    count: int = 0

    @classmethod
    def status(cls, code: int, body: Any = None, headers: Mapping[str, str] | None = None) -> Fault:
        """Answer ``code``. ``body`` None: the newer error shape for that code; a dict/list is
        sent as JSON (e.g. the older ``{"detail": ...}`` shape); a str or bytes is sent raw."""
        return cls("status", status_code=code, body=body, headers=dict(headers or {}))

    @classmethod
    def warming(cls, retry_after_s: float = 118.0) -> Fault:
        """503 ``warming`` in the simulator's error shape with ``retry_after_s`` and a
        Retry-After header, as a cold worker answers (the simulator fills in the request id)."""
        return cls("warming", status_code=503, seconds=retry_after_s)

    @classmethod
    def busy(
        cls, reason: str = "gpu_busy", *, status: int = 503, retry_after_s: float = 0.0
    ) -> Fault:
        """A saturated gateway: ``status`` in the simulator's error shape; the newer one
        carries ``details: {"reason": reason}`` (``gpu_busy``, ``queue_timeout``,
        ``draining``...) and, when ``retry_after_s`` > 0, ``retry_after_s``."""
        return cls("busy", status_code=status, name=reason, seconds=retry_after_s)

    @classmethod
    def reset(cls) -> Fault:
        """Send the status line, headers and half the body, then drop the connection."""
        return cls("reset")

    @classmethod
    def slow_body(cls, seconds: float) -> Fault:
        """Send a correct answer, spreading the body over ``seconds``."""
        return cls("slow_body", seconds=seconds)

    @classmethod
    def timeout(cls, seconds: float) -> Fault:
        """Wait ``seconds`` before processing the request (then answer normally)."""
        return cls("timeout", seconds=seconds)

    @classmethod
    def not_json(cls) -> Fault:
        """200 with ``Content-Type: application/json`` and a body that is not JSON."""
        return cls("not_json")

    @classmethod
    def html(cls, status: int = 502) -> Fault:
        """An HTML error page from a proxy, with the given status."""
        return cls("html", status_code=status)

    @classmethod
    def nan(cls) -> Fault:
        """A NaN in the middle of the chunk (sent as the non-standard JSON literal ``NaN``)."""
        return cls("nan")

    @classmethod
    def ragged(cls) -> Fault:
        """One step one value short."""
        return cls("ragged")

    @classmethod
    def empty_steps(cls) -> Fault:
        return cls("empty_steps")

    @classmethod
    def dim_mismatch(cls) -> Fault:
        """Every step has ``action_dim + 1`` values while ``action_dim`` is unchanged."""
        return cls("dim_mismatch")

    @classmethod
    def missing_field(cls, name: str) -> Fault:
        """Drop ``name`` from the body, or from ``action_chunk`` if it lives there."""
        return cls("missing_field", name=name)

    @classmethod
    def zero_frequency(cls) -> Fault:
        return cls("zero_frequency")

    @classmethod
    def non_numeric(cls) -> Fault:
        """One value sent as a string."""
        return cls("non_numeric")

    @classmethod
    def steps(cls, n: int) -> Fault:
        """A chunk of ``n`` steps instead of the catalogue horizon (covers_seconds follows)."""
        return cls("steps", count=n)
