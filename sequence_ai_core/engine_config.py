"""The engine's inputs and outputs: its configuration, the per-tick result, and what it
needs from a ``Policy``. See ``engine`` for the rules they configure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .types import FloatArray

#: Enough to sustain 0.50 s chunks at a 0.79 s refill, with headroom for a p99 of 2x median.
#: A ceiling, not a target: at the round-trip lag the request rate does not depend on it,
#: and the engine allows one while the gateway queues (``load``).
DEFAULT_MAX_IN_FLIGHT = 3
#: ``EngineConfig.freshness`` values: the whole round trip (the request floor, the default)
#: or the smallest sustainable lag (fresher plans for more requests).
FRESHNESS = ("round_trip", "fresh")
DEFAULT_FRESHNESS = "round_trip"


@dataclass(frozen=True)
class EngineConfig:
    """``prefetch=False`` is the strictly closed loop (request only when nothing is left to
    play). ``control_hz`` overrides the chunk's rate; ``options`` go to ``/v1/act``."""

    prefetch: bool = True
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    smooth_seam: int = 0
    startup_timeout_s: float = 0.0
    control_hz: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Seconds one chunk covers, from the catalogue (``Policy.describe().covers_seconds``).
    #: With it, refills before the first action are staggered so that the plan is continuous
    #: from the first action even when a chunk is shorter than the round trip.
    expected_covers_s: float | None = None
    #: ``"round_trip"`` (default): lag = the expected refill time; about one request per
    #: chunk of motion, every command about one round trip old. ``"fresh"``: anchor chunks
    #: at the smallest lag the refills sustain: fresher plans, 1.7-2.7x the requests at a
    #: 0.79 s refill. See the README's frontier for the measured trade-off.
    freshness: str = DEFAULT_FRESHNESS
    #: Back off while the gateway queues (one request in flight; see ``load``).
    backoff: bool = True

    def __post_init__(self) -> None:
        if self.freshness not in FRESHNESS:
            raise ValueError(f"freshness must be one of {FRESHNESS}, got {self.freshness!r}")
        if isinstance(self.max_in_flight, bool) or self.max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {self.max_in_flight}")
        if isinstance(self.smooth_seam, bool) or self.smooth_seam < 0:
            raise ValueError(f"smooth_seam must be >= 0, got {self.smooth_seam}")
        if not (math.isfinite(self.startup_timeout_s) and self.startup_timeout_s >= 0):
            raise ValueError(f"startup_timeout_s must be >= 0, got {self.startup_timeout_s}")
        covers = self.expected_covers_s
        if covers is not None and not (math.isfinite(covers) and covers > 0):
            raise ValueError(f"expected_covers_s must be positive, got {covers}")
        hz = self.control_hz
        if hz is not None and not (math.isfinite(hz) and hz > 0):
            raise ValueError(f"control_hz must be a positive finite number, got {hz}")


@dataclass(frozen=True)
class Tick:
    """What to do this tick. ``action`` is finite and of the run's size, or None."""

    action: FloatArray | None
    kind: str  # "action" | "waiting" (before the first action) | "underrun"
    chunk_seq: int
    step_index: int
    new_chunk: bool
    staleness_s: float
