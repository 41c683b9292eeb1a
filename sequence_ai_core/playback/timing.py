"""When to refill and how far behind to play: the expected refill time, the lead, the lag.

The expected refill time is the 99th percentile of the last 50 measured refills plus half
its distance from the median (latency is right-skewed: with a lognormal p99 of 2x the
median, a p95 lead stalled 3-5 % of chunk boundaries; this one stays under 1 %).
Until five refills were measured it is the slowest one plus their range beyond a period
(``FEW_MARGIN``). Few samples say little about the tail, so a run's first boundaries stall
most: on the fake clock, in 18 s runs at p99 = 2x the median, the first one 46 % of the
time, the second 29 %, the third to fifth 6-10 %, the sixth to fourteenth 2-5 %, later
ones 0.7 % (5.1 % of all boundaries in runs that short). The first refill shows no
spread, at a fixed latency or not: a lead from a guessed one (half the first refill) cut
the first boundary's stalls to 22-29 % but moved requests at a fixed latency (in ``fresh``
it underran there), so it is not taken (``test_engine_jitter``).

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
  of motion (measured against the floor in bench/results/freshness.md).

Delta spaces skip nothing, so a smaller lag would only cost requests there: they keep L.
"""

from __future__ import annotations

import math

from ..action_spaces import skips_stale
from .stats import SampleWindow

LEAD_QUANTILE = 0.99
#: Added to the quantile, as a fraction of its distance from the median: 50 samples
#: estimate a p99 loosely. On an exact fake clock with a lognormal refill of p99 = 2x the
#: median (3 x 300 s per model), 0.25 stalled 0.6-1.2 % of chunk boundaries, 0.5 stalls
#: 0.3-0.6 % for 0.17 s more staleness, 1.0 stalls 0.2 % for 0.5 s more.
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
#: k before it 1 time in k+1. On the fake clock (lognormal refill, p99 = 2x the median,
#: 18 s runs, 200 seeds x 4 models), refills started with 2 / 3 / 4 samples stalled their
#: boundary 29 / 23 / 16 % of the time with the slowest alone, 17 / 9 / 3.5 % with this
#: (100 seeds); all boundaries 6.8 -> 5.1 % (5.8 -> 4.1 % at p99 = 1.4x), for 1.22 and 1.10 requests
#: per chunk of motion against 1.20 and 1.09, and 0.02-0.03 s more median staleness.
#: More costs more than it saves: 2.0 stalled 5.1 % of boundaries (100 seeds) for 1.24
#: requests per chunk, and on a shared gateway the extra early requests queue (8 robots on
#: 8 slots then moved less than with one request in flight each).
FEW_MARGIN = 1.0
#: Startup refills (before anything was measured) start this many chunk lengths apart,
#: at most this many at once: two carry a 0.50 s chunk over a 0.79 s refill; a third only
#: queued behind the others on a saturated gateway (16 robots on 2 slots: 48 requests).
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
