"""When the engine starts its next refill: the plan's projected end against the lead.

The next request starts when the plan, including what the requests in flight will cover,
ends sooner than one lead from now (``timing`` derives the lead and the lag). Before the
first chunk nothing is measured: one request is outstanding, or two staggered by the
catalogue's chunk length as played (``timing.startup_refill_due``). While the gateway queues,
at most one is outstanding (``load``). Without prefetch a request starts only when nothing is
left.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from .engine_config import EngineConfig
from .inflight import InFlight
from .load import LoadMonitor
from .plan import SKIPPING_SPACES, ChunkPlan
from .timing import RefillTiming, startup_refill_due


class RefillSchedule:
    """The refill decision over the engine's plan, requests, load and timing; ``lead()`` is
    how far ahead of the plan's end a refill starts (``PlaybackEngine.lead_s``). The due time
    is computed once per change (a chunk arrives, a request starts: ``changed``), so the
    ticks in between compare one number."""

    def __init__(
        self,
        config: EngineConfig,
        plan: ChunkPlan,
        requests: InFlight,
        load: LoadMonitor,
        timing: RefillTiming,
        lead: Callable[[], float],
    ) -> None:
        self._config = config
        self._plan = plan
        self._requests = requests
        self._load = load
        self._timing = timing
        self._lead = lead
        #: Seconds the latest chunk covers (what a request in flight is expected to add).
        self.covers_s = 0.0
        #: (projected plan end, lead): the next refill is due once less than the lead is left
        self._due_at: tuple[float, float] | None = None

    def changed(self) -> None:
        """A chunk arrived or a request started: the due time moves."""
        self._due_at = None

    def lag_target(self, period_s: float, action_space: str | None) -> float:
        return self._timing.lag_target(period_s, self.covers_s, action_space)

    def wants_request(
        self, now: float, *, waiting: bool, playing: bool, period_s: float, space: str | None
    ) -> bool:
        """Whether a request should start at ``now``. ``waiting``: nothing played yet;
        ``playing``: this tick played an action."""
        in_flight = len(self._requests)
        if waiting:
            return in_flight == 0 or self._startup_stagger_due(now, in_flight)
        if not self._config.prefetch:
            return in_flight == 0 and not playing and not self._plan.pending(now)
        if in_flight >= self._load.limit:
            return False
        if self._due_at is None or space not in SKIPPING_SPACES:
            self._due_at = self._next_request_at(now, period_s, space)
        projected, lead = self._due_at
        return projected - now < lead

    def quiet_until(self, now: float, period_s: float, space: str | None) -> float:
        """Until when ticks need neither a chunk arrival, a seam nor a refill decision: the
        plan's steady span, cut at the next refill's due time."""
        until = self._plan.steady_until()
        if until == -math.inf or not self._config.prefetch:
            return until
        if len(self._requests) < self._load.limit:
            if self._due_at is None:
                self._due_at = self._next_request_at(now, period_s, space)
            until = min(until, self._due_at[0] - self._due_at[1])
        return until

    def _next_request_at(
        self, now: float, period_s: float, space: str | None
    ) -> tuple[float, float]:
        """When the plan, with what the requests in flight will add, ends one lead from now.
        It changes only when a chunk arrives or a request starts (skipping spaces: the plan
        ends at fixed times)."""
        # each request's chunk is playable until observed_at + lag + covers, with the lag
        # it will have when it lands (it may shrink meanwhile)
        projected = self._plan.end(now)
        target = self.lag_target(period_s, space)
        ordered = sorted(self._requests.requests, key=lambda r: r.observed_at)
        for position, request in enumerate(ordered):
            lag = self._plan.lag_after(position + 1, target, period_s)
            projected = max(projected, request.observed_at + lag + self.covers_s)
        return projected, self._lead()

    def _startup_stagger_due(self, now: float, in_flight: int) -> bool:
        if not self._config.prefetch:
            return False
        limit, covers = self._load.limit, self._config.played_covers_s
        return startup_refill_due(now - self._requests.last_start_at, in_flight, limit, covers)
