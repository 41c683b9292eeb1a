"""What the engine will play while a request is out: the prefix a real-time-chunking policy
conditions on (``source.PlannedPrefix``).

A request starts at a tick, with that tick's observation. Its chunk will be anchored
``lag`` after the observation (``plan``: ``anchor = observed_at + lag`` on the period grid),
so its first step is due ``delay = lag / period`` periods after it; in the default
freshness the lag is the engine's expected refill time (``timing``). Until then the plan
plays what it has. The prefix is that, as far as the engine knows it: the steps due at the
observation's tick (the one this tick hands out, sent after the observation was taken) and
at each period after it, and it ends at the first of

- the delay: from there on this request's own chunk plays;
- the expected start of the chunk of a request still in flight (``anchor`` by the same
  rule): that chunk replaces the plan from there on, and its steps are not known yet;
- a step with no plan (the plan runs out): the arm would hold or restart there.

So with one request in flight at a time (a chunk longer than the round trip) the prefix is
the whole delay; with several (a chunk shorter than the round trip) it stops where the
chunk of the request before this one is expected to start, and the delay still counts to
this request's own chunk. Nothing is planned before the first chunk lands or after an
underrun with no request in flight: the prefix is then empty and the delay 0, since the
chunk plays from its first step when it lands and the arm does not move meanwhile (with a
request in flight, the timeline goes on with its chunk: the delay counts as usual). Steps
are what will be sent, the hand-over under way included (a chunk whose hand-over has not
started ends the prefix), and the prefix assumes ticks on time: a late tick skips a step in
absolute and velocity spaces, as it does without one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..types import FloatArray
from .inflight import Request
from .plan import DUE_TOLERANCE, ChunkPlan, PlannedChunk
from .source import PlannedPrefix

_NOTHING_PLANNED = PlannedPrefix(np.zeros((0, 0)), 0)
_NOTHING_PLANNED.steps.flags.writeable = False


def planned_prefix(
    plan: ChunkPlan, in_flight: Sequence[Request], now: float, period_s: float | None
) -> PlannedPrefix:
    """The prefix for a request whose observation is taken at ``now`` (after this tick's
    step was taken from the plan), with ``in_flight`` the requests already out."""
    if period_s is None:
        return _NOTHING_PLANNED
    steps_at = _Steps(plan, now, period_s)
    if not in_flight and steps_at(now) is None:
        return _NOTHING_PLANNED  # the arm is still: the chunk plays from its first step
    delay = max(0, round(plan.lag_s / period_s))
    known = delay
    for request in in_flight:
        starts = round((request.observed_at + plan.lag_s - now) / period_s)
        known = min(known, max(0, starts))
    rows: list[FloatArray] = []
    for j in range(known):
        row = steps_at(now + j * period_s)
        if row is None:
            break
        rows.append(row)
    steps = np.array(rows, dtype=np.float64) if rows else np.zeros((0, 0))
    steps.flags.writeable = False
    return PlannedPrefix(steps, delay)


class _Steps:
    """The step that will be sent at a time (>= ``now``), by ``ChunkPlan.due``'s rule: the
    newest chunk anchored by then owns it; absolute and velocity spaces index it by time,
    delta spaces play on from their last step one per tick. The playing chunk's steps are
    the ones the hand-over under way sends (``ChunkPlan.blended_rest``); a chunk that has
    not started has no hand-over yet, so with one configured the prefix stops at it (what
    will be sent there is not known, and is not invented)."""

    def __init__(self, plan: ChunkPlan, now: float, period_s: float) -> None:
        self._chunks: Sequence[PlannedChunk] = plan.chunks
        self._now, self._period_s = now, period_s
        self._playing = plan.playing()
        self._blends = plan.blends
        start = self._playing.last_index if self._playing is not None else -1
        self._sent = plan.blended_rest(start) if start >= 0 else None
        self._start = start

    def __call__(self, time_s: float) -> FloatArray | None:
        owner = None
        for planned in self._chunks:
            if planned.anchor <= time_s + DUE_TOLERANCE * planned.period_s:
                owner = planned
        if owner is None:
            return None
        if owner.skips:
            index = max(0, owner.index_at(time_s))
        elif owner.first_index is not None:
            index = owner.last_index + round((time_s - self._now) / self._period_s)
        else:
            index = max(0, round((time_s - owner.anchor) / self._period_s))
        if index >= owner.length:
            return None
        if owner is self._playing and self._sent is not None and index >= self._start:
            sent: FloatArray = self._sent[index - self._start]
            return sent
        if self._blends and owner.first_index is None:
            return None
        return owner.rows[index]
