"""Gateway load: notice when the gateway queues our requests, and back off until it clears.

A shared gateway serves a fixed number of model slots; requests beyond them wait in its
queue, first come, first served. Once every slot is busy, pipelining into that queue adds no
motion (the slots answer as many requests a second either way) but every robot's requests
wait behind more of everyone's, so every plan is older when it plays: on the simulator, 16
robots on 8 slots with three requests in flight and no backoff played plans over twice as old
as with backoff, at the same duty (docs/performance.md, "Shared gateway").

So the engine watches each refill for queueing and, while it sees it, allows one request in
flight; when refills come back at the unloaded level again it allows one more at a time. A
raise that queues again before it has held doubles the calm refills the next one waits for:
a server that runs one inference at a time (openpi's) is always calm at one request and
always queued at two, and probing it every four refills had kept its plans older.
Two signals, whichever says more:

- the gateway's own account: ``perf.queue_ms``, or ``perf.ttfa_ms - perf.inference_ms``;
- the refill latency against the lowest level measured: with ``perf.inference_ms`` present
  the model's own time is taken out first (it varies with the model, not with load), else
  the lowest median of three consecutive refills stands for the unloaded round trip.

A ``busy`` answer (HTTP 429, code ``busy``, reason ``gpu_busy`` / ``queue_timeout``) is
queueing too and cuts the limit to one at once.

A refill counts as queued when the median of the last three estimates exceeds a quarter of
the model's own time (the median ``inference_ms``; else the unloaded refill time) and two
control periods (refill latency is measured in whole
ticks, so a period of noise is normal). The median keeps one slow answer (a lognormal tail)
from halving throughput; three refills keep the reaction within about one chunk.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..errors import Unavailable
from .outcome import RunOutcome

#: Refills the queueing estimate takes the median of.
QUEUE_WINDOW = 3
#: Queueing above this fraction of the unloaded refill time counts (and two periods).
QUEUE_FRACTION = 0.25
#: Consecutive unqueued refills before one more request may be in flight again ...
RECOVER_AFTER = 4
#: ... doubled, up to this, each time a raise queued again before it held that long.
MAX_RECOVER_AFTER = 64
BUSY_REASONS = frozenset({"gpu_busy", "queue_timeout"})


def is_busy(exc: Unavailable) -> bool:
    """The gateway said it is saturated (as opposed to a network blip or a cold worker)."""
    if exc.warming:
        return False
    return exc.status == 429 or exc.code == "busy" or exc.reason in BUSY_REASONS


def _perf_ms_as_s(perf: Mapping[str, Any], key: str) -> float | None:
    """``perf[key]``, milliseconds the gateway reports, in seconds; None if absent or bad."""
    value = perf.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    seconds = float(value) / 1000.0
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def server_queue_s(perf: Mapping[str, Any]) -> float | None:
    """Seconds the gateway says the request waited for a slot, if it says."""
    queued = _perf_ms_as_s(perf, "queue_ms")
    if queued is not None:
        return queued
    ttfa, inference = _perf_ms_as_s(perf, "ttfa_ms"), _perf_ms_as_s(perf, "inference_ms")
    if ttfa is not None and inference is not None:
        return max(0.0, ttfa - inference)
    return None


class LoadMonitor:
    """How many requests may be outstanding now, from what the refills say about the queue."""

    def __init__(self, max_in_flight: int, *, enabled: bool = True) -> None:
        self.max_in_flight = max_in_flight
        self.enabled = enabled
        self.limit = max_in_flight
        self.backoffs = 0
        self.busy_answers = 0
        self.queued_refills = 0
        #: The latest queueing estimate (median of the last few), seconds.
        self.queue_s = 0.0
        self._estimates: deque[float] = deque(maxlen=QUEUE_WINDOW)
        self._recent: deque[float] = deque(maxlen=QUEUE_WINDOW)
        self._inference: deque[float] = deque(maxlen=5 * QUEUE_WINDOW)
        self._floor_overhead = math.inf  # lowest latency minus model time seen
        self._unloaded = math.inf  # lowest median of QUEUE_WINDOW refills (model time incl.)
        self._calm = 0
        self._recover_after = RECOVER_AFTER
        self._since_raise: int | None = None  # refills since the limit was last raised

    @property
    def unloaded_s(self) -> float:
        """The lowest refill level measured (NaN before the first few refills)."""
        return self._unloaded if math.isfinite(self._unloaded) else math.nan

    @property
    def queued(self) -> bool:
        return self.limit < self.max_in_flight

    def refill(self, latency_s: float, perf: Mapping[str, Any], period_s: float) -> None:
        """One chunk arrived ``latency_s`` after its observation."""
        inference = _perf_ms_as_s(perf, "inference_ms")
        self._recent.append(latency_s)
        if len(self._recent) == QUEUE_WINDOW:
            self._unloaded = min(self._unloaded, sorted(self._recent)[QUEUE_WINDOW // 2])
        estimate = server_queue_s(perf) or 0.0
        if inference is not None:
            overhead = max(0.0, latency_s - inference)
            self._floor_overhead = min(self._floor_overhead, overhead)
            estimate = max(estimate, overhead - self._floor_overhead)
        elif math.isfinite(self._unloaded):
            estimate = max(estimate, latency_s - self._unloaded)
        self._estimates.append(estimate)
        self.queue_s = sorted(self._estimates)[len(self._estimates) // 2]
        if inference is not None:  # the model's own time: queueing cannot inflate it
            self._inference.append(inference)
            base = sorted(self._inference)[len(self._inference) // 2]
        else:
            base = self._unloaded if math.isfinite(self._unloaded) else latency_s
        threshold = max(QUEUE_FRACTION * base, 2.0 * period_s)
        if self.queue_s > threshold:
            self.queued_refills += 1
            self._back_off()
        else:
            self._recover()

    def busy(self) -> None:
        """The gateway answered ``busy``."""
        self.busy_answers += 1
        self._back_off()

    def _back_off(self) -> None:
        self._calm = 0
        if self._since_raise is not None:  # the last raise did not hold: probe less often
            self._recover_after = min(2 * self._recover_after, MAX_RECOVER_AFTER)
            self._since_raise = None
        if self.enabled and self.limit > 1:
            self.limit = 1
            self.backoffs += 1

    def _recover(self) -> None:
        self._calm += 1
        if self._since_raise is not None:
            self._since_raise += 1
            if self._since_raise >= RECOVER_AFTER:  # it held
                self._since_raise = None
                if self.limit == self.max_in_flight:
                    self._recover_after = RECOVER_AFTER
        if self._calm >= self._recover_after and self.limit < self.max_in_flight:
            self.limit += 1
            self._calm = 0
            self._since_raise = 0

    def report(self, outcome: RunOutcome) -> RunOutcome:
        """``outcome`` with the fields this monitor fills."""
        return replace(
            outcome,
            backoffs=self.backoffs,
            busy_answers=self.busy_answers,
            queued_refills=self.queued_refills,
            unloaded_latency_s=self.unloaded_s,
        )

    def live(self) -> dict[str, float | int]:
        return {
            "in_flight_limit": self.limit,
            "backoffs": self.backoffs,
            "busy_answers": self.busy_answers,
            "queued_refills": self.queued_refills,
            "queue_s": self.queue_s,
            "unloaded_latency_s": self.unloaded_s,
        }
