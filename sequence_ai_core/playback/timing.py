"""When to refill and how far behind to play: the expected refill time, the lead, the lag.

The expected refill time is the 99th percentile of the last 50 measured refills plus half
its distance from the median: latency is right-skewed, so a mean or a p95 would stall
chunk boundaries. Until five refills were measured it is the slowest one plus their range
beyond a period (``FEW_MARGIN``). Few samples say little about the tail, so a run's first
boundaries stall most; the first refill shows no spread, and a guessed lead would move
requests at a fixed latency, so none is taken. The figures behind each constant:
docs/performance.md, "Behind the engine's constants".

The lag, derived here once (``plan`` anchors chunks with it, ``engine`` asks for it). A chunk
observed at ``t_o`` arrives at ``t_o + L`` (the round trip) and is playable until
``t_o + lag + covers``: a window ``W = covers + lag - L``. With lag 0 every command would be
as fresh as the pipeline allows, but a 0.50 s chunk at a 0.8 s round trip would be entirely
in the past on arrival; with lag = L nothing is skipped but every command is L seconds old,
which a policy conditioned on the arm's observed state turns into a backward yank at every
swap. Requests start one lead (L + period) before the plan ends, so they are ``W - period``
apart and about ``L / (W - period)`` are in flight.

- ``freshness="round_trip"`` (default): lag = L, so requests are ``covers - period`` apart:
  the request floor, about one per chunk of motion, whatever ``max_in_flight`` allows.
- ``freshness="fresh"``: the smallest lag ``max_in_flight`` (M) requests sustain,
  ``L + L/M - covers + period``: plans up to L fresher, for one request per ``W - period``
  of motion (docs/performance.md, "Freshness costs requests").

Delta spaces skip nothing, so a smaller lag would only cost requests there: they keep L.
"""

from __future__ import annotations

import math

from ..action_spaces import skips_stale
from .stats import SampleWindow

LEAD_QUANTILE = 0.99
#: Added to the quantile, as a fraction of its distance from the median: 50 samples
#: estimate a p99 loosely. Less stalls more boundaries; more costs staleness.
SPREAD_MARGIN = 0.5
#: ... and this fraction while fewer than SETTLED_SAMPLES were measured (the quantile of a
#: dozen samples is about their maximum, which the next one exceeds 1 time in 13).
EARLY_MARGIN = 1.0
SETTLED_SAMPLES = 20
LATENCY_WINDOW = 50
MIN_LATENCY_SAMPLES = 5
#: Below MIN_LATENCY_SAMPLES: the slowest refill plus this multiple of the samples' range
#: beyond a period (a fixed latency, measured in whole ticks, spreads by at most a period,
#: so there nothing changes). The slowest alone is low: a new refill exceeds the slowest of
#: k before it 1 time in k+1. More costs more requests than it saves stalls.
FEW_MARGIN = 1.0
#: Startup refills (before anything was measured) start this many chunk lengths apart,
#: at most this many at once: two carry a 0.50 s chunk over a 0.79 s refill; a third only
#: queues behind the others on a saturated gateway.
STARTUP_SPACING = 0.9
STARTUP_IN_FLIGHT = 2


def startup_refill_due(
    since_last_s: float, in_flight: int, limit: int, covers_s: float | None
) -> bool:
    """Before the first chunk nothing is measured; only the catalogue's chunk length says
    how far apart refills may start and still join up (10 % margin for latency spread)."""
    if covers_s is None or in_flight >= min(limit, STARTUP_IN_FLIGHT):
        return False
    return since_last_s >= STARTUP_SPACING * covers_s


class RefillTiming:
    """The measured refill latencies and what the engine derives from them."""

    def __init__(self, freshness: str, max_in_flight: int) -> None:
        self.freshness = freshness
        self.max_in_flight = max_in_flight
        self._latency = SampleWindow(LATENCY_WINDOW)

    def add(self, latency_s: float) -> None:
        self._latency.add(latency_s)

    @property
    def measured(self) -> bool:
        return len(self._latency) > 0

    def expected_latency(self, period_s: float) -> float:
        """High quantile of recent refills plus a margin; the slowest plus a wider one while
        there are few.
        Refills are measured in whole ticks, so a spread of one period is no jitter: the
        margin counts only what lies beyond it (else a fixed latency would move the lag
        by a period, and the plan by a step at a seam, as the window fills)."""
        window = self._latency
        if len(window) < MIN_LATENCY_SAMPLES:
            slowest = window.max()
            return slowest + FEW_MARGIN * max(0.0, slowest - window.quantile(0.0) - period_s)
        high = window.quantile(LEAD_QUANTILE)
        # a few samples say little about the tail: a wider margin until there are more
        margin = SPREAD_MARGIN if len(window) >= SETTLED_SAMPLES else EARLY_MARGIN
        return high + margin * max(0.0, high - window.quantile(0.5) - period_s)

    def lead_s(self, lag_s: float, period_s: float) -> float:
        """How far ahead of the plan's end the next refill starts; inf before any refill."""
        if not self.measured:
            return math.inf
        return max(self.expected_latency(period_s), lag_s) + period_s

    def lag_target(self, period_s: float, covers_s: float, action_space: str | None) -> float:
        """The lag to move toward (derived in the module docs), L the expected refill."""
        latency = self.expected_latency(period_s)
        if self.freshness == "round_trip" or not skips_stale(action_space):
            return latency
        spacing = latency / self.max_in_flight
        return max(0.0, latency + spacing - covers_s) + period_s
