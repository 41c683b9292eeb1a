"""What a failed refill means for the episode: wait and retry, or end it.

- ``warming`` (a cold worker) is waited out only before the first action, up to
  ``startup_timeout_s`` from the first tick, re-observing on each try; once the arm moves a
  worker going cold ends the episode (hold).
- Other transient errors (429 ``busy``, 502-504, timeouts, resets) are retried while the
  plan still covers the wait the gateway asked for; ``busy`` also tells the load monitor.
- Anything else ends the episode at once.
"""

from __future__ import annotations

import logging
import math

from ..errors import SequencesError, Unavailable
from .load import LoadMonitor, is_busy

log = logging.getLogger("sequence_ai_core.playback.engine")

#: Wait before retrying a warming worker that gave no Retry-After.
DEFAULT_WARMING_RETRY_S = 1.0


class RetryPolicy:
    def __init__(self, startup_timeout_s: float, load: LoadMonitor) -> None:
        self.startup_timeout_s = startup_timeout_s
        self.load = load
        self.retries = 0
        #: No request starts before this time.
        self.not_before = -math.inf
        #: A cold worker answered before the first action.
        self.warming = False

    def on_failure(
        self, exc: SequencesError, now: float, *, started: bool, first_tick_at: float | None,
        plan_end: float,
    ) -> None:  # fmt: skip
        """Schedule the retry, or raise ``exc`` when it ends the episode."""
        if not isinstance(exc, Unavailable):
            raise exc
        if exc.warming:
            if started:
                raise exc  # a worker went cold under a running episode: stop and hold
            first = now if first_tick_at is None else first_tick_at
            remaining = first + self.startup_timeout_s - now
            if remaining <= 0:
                raise cold_start_advice(exc, self.startup_timeout_s) from exc
            wait = exc.retry_after_s if exc.retry_after_s is not None else DEFAULT_WARMING_RETRY_S
            log.info(
                "model warming up; retrying in %.0f s (%.0f s of startup_timeout_s=%g left)",
                min(wait, remaining),
                remaining,
                self.startup_timeout_s,
            )
            self.warming = True
            self._retry_at(now + min(wait, remaining))
            return
        if is_busy(exc):
            self.load.busy()
        wait = exc.retry_after_s or 0.0
        if plan_end <= now + wait:
            raise exc  # nothing planned yet, or the plan no longer covers a retry
        self._retry_at(now + wait)

    def _retry_at(self, when: float) -> None:
        self.not_before = max(self.not_before, when)
        self.retries += 1


def cold_start_advice(exc: Unavailable, waited_s: float) -> Unavailable:
    """The warming answer that ended a run before its first action, saying what to change."""
    if waited_s > 0:
        advice = f"still warming after startup_timeout_s={waited_s:g}"
    else:  # a margin over the gateway's estimate, or over what a cold worker takes to load
        advice = (
            f"pass startup_timeout_s={math.ceil(1.25 * (exc.retry_after_s or 120.0))} "
            "to run() to wait for a cold worker"
        )
    return Unavailable(
        f"{exc.message}; {advice}",
        warming=True,
        retry_after_s=exc.retry_after_s,
        status=exc.status,
        body=exc.body,
        request_id=exc.request_id,
        code=exc.code,
        reason=exc.reason,
    )
