"""Which chunk, and which of its steps, each recorded command played.

A bag with ``started`` events (``topics.EVENTS``) says where each chunk started, at which
step and on which anchor; from there its steps go by time in spaces that skip stale steps
and one after another in the others. Without them the timeline is read the way the engine's
plan reads it (``playback.plan``): the chunk that owns a tick is the newest by observation
that has arrived and is anchored by then; an arrival's anchor moves the chunks still waiting
for their slot with it (the plan's lag applies to them all); when the chunk playing runs out,
the first chunk waiting starts at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..action_spaces import skips_stale
from ..playback.plan import DUE_TOLERANCE
from .recorded import Floats, RecordedChunk, RecordedEpisode

#: Two times closer than this are the same tick (the recorder's nanoseconds, as seconds).
SAME_TICK_S = 1e-6


@dataclass(frozen=True)
class Attribution:
    #: Per command: the index of its chunk in ``RecordedEpisode.chunks`` (-1: none found),
    #: the step it played (-1: none) and that step as planned (NaN where none).
    chunk: npt.NDArray[np.int64]
    step: npt.NDArray[np.int64]
    planned: Floats
    #: Per chunk: the anchor it played on (NaN: it never played).
    anchors: Floats
    #: The starts came from ``started`` events, not from the recorded anchors.
    from_events: bool

    def seams(self) -> list[int]:
        """Positions of each command that started a chunk after another chunk had played."""
        chunk = self.chunk
        return [k for k in range(1, len(chunk)) if chunk[k] >= 0 and chunk[k] != chunk[k - 1]]


def attribute(episode: RecordedEpisode) -> Attribution:
    count = len(episode.command_t)
    owner = np.full(count, -1, dtype=np.int64)
    step = np.full(count, -1, dtype=np.int64)
    starts = _starts(episode)
    plan = _Plan(episode)
    last: dict[int, int] = {}  # chunk -> the last step it played
    playing = -1
    for k, now in enumerate(episode.command_t.tolist()):
        if starts:
            chosen = _as_started(episode.chunks, starts, plan.anchors, last, playing, now)
        else:
            chosen = plan.due(now, last)
        if chosen is None:
            continue
        playing, index = chosen
        if playing not in last:
            plan.played_on[playing] = plan.anchors[playing]
        owner[k], step[k], last[playing] = playing, index, index
    planned = _planned(episode, owner, step)
    return Attribution(owner, step, planned, plan.played_on, bool(starts))


def _starts(episode: RecordedEpisode) -> dict[int, tuple[int, int, float]]:
    """``started`` events by tick: (chunk, step, anchor played on)."""
    by_seq = {c.seq: i for i, c in enumerate(episode.chunks) if c.seq >= 0}
    found = {}
    for event in episode.events:
        if event.name != "started":
            continue
        try:
            seq, index = int(event.values["seq"]), int(event.values["step"])
            anchor = float(event.values["anchor_s"]) - episode.start_ns / 1e9
        except (KeyError, ValueError):
            continue
        if seq in by_seq:
            found[_tick(event.t)] = (by_seq[seq], index, anchor)
    return found


def _as_started(
    chunks: tuple[RecordedChunk, ...],
    starts: dict[int, tuple[int, int, float]],
    anchors: Floats,
    last: dict[int, int],
    playing: int,
    now: float,
) -> tuple[int, int] | None:
    """(chunk, step) at ``now`` by the ``started`` events: a chunk starting, or the next step
    of the chunk playing."""
    start = starts.get(_tick(now))
    if start is not None:
        anchors[start[0]] = start[2]
        return start[0], start[1]
    if playing < 0:
        return None
    index = _step(chunks[playing], anchors[playing], last, playing, now)
    return None if index is None else (playing, index)


class _Plan:
    """The timeline rebuilt from arrivals and recorded anchors (a bag without ``started``)."""

    def __init__(self, episode: RecordedEpisode) -> None:
        self.chunks = chunks = episode.chunks
        discarded = {e.values.get("request") for e in episode.events if e.name == "discarded"}
        kept = [i for i, c in enumerate(chunks) if str(c.request) not in discarded]
        self._arrivals = sorted(kept, key=lambda i: chunks[i].received_t)
        self._order: list[int] = []  # arrived, by observation (the plan's order)
        self.anchors = np.array([c.anchor_t for c in chunks], dtype=np.float64)
        self.played_on = np.full(len(chunks), math.nan)
        self._started: set[int] = set()

    def due(self, now: float, last: dict[int, int]) -> tuple[int, int] | None:
        """(chunk, step) due at ``now``, the plan's way."""
        self._arrive(now)
        chunks, anchors = self.chunks, self.anchors
        due = [i for i in self._order if anchors[i] <= now + DUE_TOLERANCE * chunks[i].period_s]
        if due:
            newest = due[-1]
            del self._order[: self._order.index(newest)]  # replaced from its anchor on
            index = _step(chunks[newest], anchors[newest], last, newest, now)
            if index is not None:
                self._started.add(newest)
                return newest, index
        waiting = [i for i in self._order if i not in self._started and anchors[i] > now]
        if not waiting:
            return None
        anchors[waiting[0]] = now  # the plan ran out: the first chunk waiting starts now
        self._move_waiting(waiting[0])
        self._started.add(waiting[0])
        return waiting[0], 0

    def _arrive(self, now: float) -> None:
        chunks = self.chunks
        while self._arrivals and chunks[self._arrivals[0]].received_t <= now + SAME_TICK_S:
            arrived = self._arrivals.pop(0)
            self._order.append(arrived)
            self._order.sort(key=lambda i: (_observed(chunks[i]), chunks[i].seq))
            self._move_waiting(arrived)

    def _move_waiting(self, moved: int) -> None:
        """The lag is now ``moved``'s anchor less its observation: so for every chunk waiting."""
        chunks, anchors = self.chunks, self.anchors
        base, period = _observed(chunks[moved]), chunks[moved].period_s
        for i in self._order:
            if i != moved and i not in self._started:
                slots = round((_observed(chunks[i]) - base) / period)
                anchors[i] = anchors[moved] + slots * period


def _step(
    chunk: RecordedChunk, anchor: float, last: dict[int, int], position: int, now: float
) -> int | None:
    if skips_stale(chunk.action_space):
        index = max(0, math.floor((now - anchor) / chunk.period_s + DUE_TOLERANCE))
    else:
        index = last.get(position, -1) + 1
    return index if index < len(chunk.steps) else None


def _planned(
    episode: RecordedEpisode, owner: npt.NDArray[np.int64], step: npt.NDArray[np.int64]
) -> Floats:
    planned = np.full(episode.commands.shape, math.nan)
    for k, (position, index) in enumerate(zip(owner.tolist(), step.tolist(), strict=True)):
        steps = episode.chunks[position].steps if position >= 0 else None
        if steps is not None and steps.shape[1:] == planned.shape[1:]:
            planned[k] = steps[index]
    return planned


def _tick(time_s: float) -> int:
    return round(time_s / SAME_TICK_S)


def _observed(chunk: RecordedChunk) -> float:
    return chunk.received_t if math.isnan(chunk.observed_at_t) else chunk.observed_at_t
