"""Deadlines on a fixed grid: what paces ``run()`` and the ROS node's control thread."""

from __future__ import annotations

import math
from collections.abc import Callable

#: Poll interval while waiting for the first chunk (the rate is not known yet).
WAITING_POLL_S = 0.005


class Pacer:
    """Absolute deadlines ``t0 + n * period`` from the first paced tick: time spent in
    ``observe``/``act`` is absorbed, errors do not accumulate, and when more than a period
    late the missed deadlines are dropped (the plan is indexed by time, not by ticks)."""

    def __init__(
        self, clock: Callable[[], float], sleep: Callable[[float], object], lead_s: float = 0.0
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        self._lead = lead_s  # wake this long before each deadline (the node builds its command)
        self._t0: float | None = None
        self._period = 0.0
        self._n = 0
        #: The deadline the last ``wait`` was for (None after a poll): the next tick's due time.
        self.deadline: float | None = None

    def wait(self, tick_at: float, period_s: float | None) -> None:
        """Sleep until the deadline after the tick that started at ``tick_at`` (``lead_s``
        before it); a new period starts a new grid there. Without a period, a poll's sleep."""
        if period_s is None:
            self.deadline = None
            self._sleep(WAITING_POLL_S)
            return
        if self._t0 is None or period_s != self._period:
            self._t0, self._period, self._n = tick_at, period_s, 0
        self._n += 1
        now = self._clock()
        self.deadline = deadline = self._t0 + self._n * self._period
        if deadline - self._lead > now:
            self._sleep(deadline - self._lead - now)
        elif now - deadline > self._period:
            self._n = math.floor((now - self._t0) / self._period)
            self.deadline = now
