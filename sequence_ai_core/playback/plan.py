"""The time-indexed plan: chunks on one timeline, and the step due at a given time.

A chunk's step *i* is due at ``anchor + i/hz``. The anchor is the monotonic time the chunk's
observation was taken plus the run's *lag* (derived in ``timing``, once); steps due before
the chunk arrived are skipped (absolute and velocity spaces). The plan moves toward the
engine's lag target in a bounded number of chunks (``adapt_lag``).

A chunk that arrives while the arm holds still (first chunk, after an underrun) plays from
its first step (the arm did not move meanwhile, so that step is still the right next
command) and its round trip becomes the lag; the lag then moves toward the engine's target.
Every chunk continues one timeline: a newer chunk replaces the older one from its anchor on,
so a swap never goes back in the plan; a lag change of s seconds moves it s seconds more
(shrink) or less (growth) than a tick normally does.

Where a newer chunk takes over, the ``handover.Blender`` (if any) corrects the steps played
from it so that the chunks' disagreement is spread over several steps; ``PlannedStep.raw``
stays the plan's value (seams are measured on it) and ``action`` is what to send.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import numpy as np

from ..action_spaces import kind_of, names_where, skips_stale
from ..types import ActionChunk, FloatArray, Prediction
from .handover import Blender, Seam
from .ready import ReadyChunk

#: A tick up to this fraction of a period early still plays the step due: sleeps and timers
#: overshoot by milliseconds, and a tick landing just before a slot must not replay a step.
DUE_TOLERANCE = 0.25
#: ``take``'s answer for a tick in the slot of a step that already went out (a tick right
#: after a late one lands there): sending it again would replay it, and holding would stop
#: a plan that is still playing, so the tick sends nothing.
EARLY: Final = "early"
#: Spaces where a step whose time has passed may be skipped (the table's ``skips_stale``;
#: delta and unknown spaces play every step), as a set for the engine's tick.
SKIPPING_SPACES = names_where(lambda space: space.skips_stale)
#: Hysteresis before the lag shrinks, so latency jitter does not make the timeline wobble:
#: the lag settles within this many periods above its target.
LAG_SHRINK_PERIODS = 1
#: A lag move reaches its target within this many chunks at any control rate: each chunk
#: moves it by the distance to the target (when the move began) over this, and at least a
#: period. One period per chunk took 0.6 s / 5 ms = 120 chunks (two minutes) at 200 Hz.
#: The cost is a seam: a move of s seconds plays s seconds more or less of the plan at once.
LAG_CONVERGE_CHUNKS = 6


def largest_arm_step(planned: PlannedChunk, arm: Sequence[int]) -> float:
    """The chunk's largest in-chunk step on the arm's dimensions (0.0: none known)."""
    step = planned.largest_step
    return 0.0 if step is None else max([0.0, *(float(step[i]) for i in arm)])


def _on_period(time_s: float, period_s: float) -> float:
    return max(0.0, round(time_s / period_s) * period_s)


@dataclass
class PlannedChunk:
    prediction: Prediction
    seq: int
    observed_at: float
    anchor: float
    period_s: float
    #: The plan's own read-only, checked rows of the chunk's steps (see ``ready.prepare``).
    rows: list[FloatArray]
    first_index: int | None = None
    last_index: int = -1
    largest_step: FloatArray | None = None
    #: Plain attributes, not properties: every tick reads them (see ``ready.prepare``).
    length: int = field(init=False)
    skips: bool = field(init=False)

    def __post_init__(self) -> None:
        self.length = len(self.rows)
        self.skips = skips_stale(self.prediction.action_chunk.action_space)

    @property
    def chunk(self) -> ActionChunk:
        return self.prediction.action_chunk

    def index_at(self, now: float) -> int:
        return math.floor((now - self.anchor) / self.period_s + DUE_TOLERANCE)

    def end(self, now: float) -> float:
        """When this chunk's last step ends (in order-played spaces: from ``now`` on)."""
        if self.skips or self.first_index is None:
            return self.anchor + self.length * self.period_s
        return now + (self.length - self.last_index - 1) * self.period_s


@dataclass(slots=True)
class PlannedStep:
    planned: PlannedChunk
    index: int
    #: The planned values, before any hand-over (seams are measured on these).
    raw: FloatArray
    #: What to send: ``raw`` plus the hand-over's correction, if one is under way.
    action: FloatArray
    new_chunk: bool
    #: Steps of a newly started chunk that were due before it arrived.
    skipped_stale: int
    #: Steps passed over because this tick came late (more than 3/4 period).
    skipped_late: int
    #: ``action`` is ``raw`` plus a correction (computed, so checked again before sending).
    blended: bool = False


class ChunkPlan:
    """The timeline. ``blender`` hands over between chunks (None: every step as planned);
    ``gripper(dim)`` are the dimensions it never touches (``EngineConfig.gripper_indices``)."""

    def __init__(
        self,
        blender: Blender | None = None,
        gripper: Callable[[int], Sequence[int]] = lambda dim: (),
    ) -> None:
        self.lag_s = 0.0
        #: Seconds the lag moves per chunk in the move under way (signed; 0: settled).
        self._lag_step = 0.0
        #: A tick time the plan was (re)started at: anchors are kept on its period grid.
        self._origin: float | None = None
        self._blender = blender
        self._gripper = gripper
        #: The dimensions that are not grippers (None until the first chunk's width is known).
        self.arm_index: list[int] | None = None
        self._chunks: list[PlannedChunk] = []
        #: Chunks replaced by a newer one before they played a step.
        self.superseded = 0
        self._last_played: PlannedChunk | None = None
        #: The arm's state at a hand-back (``resume_from``): the next chunk to start is
        #: handed over from it, as from a chunk that played it.
        self._resume_from: FloatArray | None = None

    def clear(self) -> int:
        """A person took the arm: every chunk goes, none may play after the hand-back (the
        arm is elsewhere by then), and the hand-over under way with them. Returns how many
        had not played a step."""
        unplayed = sum(p.first_index is None for p in self._chunks)
        self.superseded += unplayed
        self._chunks.clear()
        self._hold()
        self._resume_from = None
        return unplayed

    def resume_from(self, row: FloatArray | None) -> None:
        """The arm's state at a hand-back (``resume.measured_row``; None: not known): the
        first chunk to start after it is handed over from this (module docs)."""
        self._resume_from = row

    def add(
        self,
        ready: ReadyChunk,
        *,
        seq: int,
        observed_at: float,
        period_s: float,
        now: float,
        holding: bool,
        restart: bool = False,
    ) -> PlannedChunk | None:
        """Place an arrived chunk on the timeline; None if it is older than the chunk
        playing or every step of it is already past.

        ``holding``: nothing is playing now. A chunk later than the timeline then starts at
        once from its first step and its round trip becomes the lag (the lag only grows this
        way; it shrinks in ``adapt_lag``). A chunk early for the timeline waits for its slot,
        because requests in flight were timed for that timeline, unless ``restart`` (nothing
        else in flight: a fresh start, as in the closed loop).
        """
        playing = self.playing()
        if playing is not None and observed_at < playing.observed_at:
            return None  # older than what already played (answers can overtake each other)
        anchor = self._on_grid(observed_at + self.lag_s, period_s)
        if holding and (restart or anchor <= now + DUE_TOLERANCE * period_s):
            self._origin = now
            latency_lag = max(0.0, round((now - observed_at) / period_s) * period_s)
            self._set_lag(latency_lag if restart else max(self.lag_s, latency_lag), period_s)
            self._lag_step = 0.0
            anchor = now
        planned = PlannedChunk(
            ready.prediction,
            seq,
            observed_at,
            anchor,
            period_s,
            ready.rows,
            largest_step=ready.largest_step,
        )
        if self.arm_index is None:
            self._resolve(len(ready.rows[0]))
        if not holding and planned.skips and planned.index_at(now) >= planned.length:
            return None
        self._chunks.append(planned)
        self._chunks.sort(key=lambda p: p.observed_at)
        return planned

    def adapt_lag(self, target_s: float, period_s: float) -> None:
        """Move the lag toward ``target_s`` (rounded to the period grid) by one step per
        chunk; it shrinks only while more than ``LAG_SHRINK_PERIODS`` above it.

        The step is set when a move starts: the distance over ``LAG_CONVERGE_CHUNKS``, on the
        period grid, at least one period; so a move ends within that many chunks (plus one
        for rounding) whatever the rate, and a small move costs one step at the seam.
        """
        target = _on_period(target_s, period_s)
        if target > self.lag_s + period_s / 2:
            direction = 1.0
        elif target < self.lag_s - LAG_SHRINK_PERIODS * period_s - period_s / 2:
            direction = -1.0
        else:
            self._lag_step = 0.0
            return
        if self._lag_step * direction <= 0:  # a new move, or the target crossed over
            periods = math.ceil(abs(target - self.lag_s) / LAG_CONVERGE_CHUNKS / period_s)
            self._lag_step = direction * max(1, periods) * period_s
        moved = self.lag_s + self._lag_step
        lag = min(moved, target) if direction > 0 else max(moved, target, 0.0)
        self._set_lag(lag, period_s)

    def lag_after(self, chunks: int, target_s: float, period_s: float) -> float:
        """The smallest the lag can be once ``chunks`` more chunks have arrived while it
        moves toward ``target_s``: requests in flight are timed against it, since a shrink
        moves their window's end earlier."""
        floor = _on_period(target_s, period_s)
        step = max(period_s, -self._lag_step, self._largest_step(target_s, period_s))
        return max(min(self.lag_s, floor), self.lag_s - chunks * step)

    def _largest_step(self, target_s: float, period_s: float) -> float:
        periods = math.ceil(
            max(0.0, self.lag_s - _on_period(target_s, period_s)) / LAG_CONVERGE_CHUNKS / period_s
        )
        return periods * period_s

    def _set_lag(self, lag_s: float, period_s: float) -> None:
        """Chunks waiting for their slot move with the timeline, or the first to start
        would jump by the change."""
        self.lag_s = lag_s
        for planned in self._chunks:
            if planned.first_index is None:
                planned.anchor = self._on_grid(planned.observed_at + lag_s, period_s)

    def _on_grid(self, time_s: float, period_s: float) -> float:
        """The nearest slot of the grid the plan plays on. Observations are taken at ticks,
        but a tick can run late; anchored off the grid, a chunk would start a step early or
        late and the next seam would jump by up to two steps (measured under load)."""
        if self._origin is None:
            return time_s
        return self._origin + round((time_s - self._origin) / period_s) * period_s

    def advance_to(self, now: float) -> tuple[PlannedChunk, int] | None:
        """Drop the chunks a newer one has replaced by ``now``; the chunk that owns ``now``
        (the newest anchored by then) and its step due, or None."""
        chunks = self._chunks
        owner = None
        for position, planned in enumerate(chunks):
            if planned.anchor <= now + DUE_TOLERANCE * planned.period_s:
                owner = position
        if owner is None:
            return None
        if owner:
            self.superseded += sum(p.first_index is None for p in chunks[:owner])
            del chunks[:owner]  # replaced from the newer chunk's anchor on
        planned = chunks[0]
        index = max(0, planned.index_at(now)) if planned.skips else planned.last_index + 1
        return (planned, index) if index < planned.length else None

    def take(self, now: float) -> PlannedStep | Literal["early"] | None:
        """Consume the step due at ``now``; ``EARLY`` when it already went out, None when
        nothing is planned for now."""
        due = self.advance_to(now)
        if due is None and self._start_waiting(now):
            due = self.advance_to(now)
        if due is None:
            self._hold()
            return None
        planned, index = due
        if index <= planned.last_index:
            return EARLY
        raw = planned.rows[index]
        new_chunk = planned.first_index is None
        skipped = late = 0
        if new_chunk:
            planned.first_index = index
            skipped = index if planned.skips else 0
            self._hand_over(planned, index)
        else:
            late = max(0, index - planned.last_index - 1)
        planned.last_index = index
        self._last_played = planned
        action, blended = self._corrected(planned, index, raw)
        return PlannedStep(planned, index, raw, action, new_chunk, skipped, late, blended)

    def _corrected(
        self, planned: PlannedChunk, index: int, raw: FloatArray
    ) -> tuple[FloatArray, bool]:
        """What to send for ``planned``'s step ``index``: ``raw`` plus the hand-over's
        correction, and whether one was added; always a new array (the plan's rows stay
        untouched). In plain floats, as the correction is (``Blender.take``)."""
        correction = None if self._blender is None else self._blender.take(planned, index)
        # a correction of zeros (a hand-over finished at once) leaves the plan as it was
        if correction is None or not any(correction):
            return raw.copy(), False
        return np.array(list(map(operator.add, raw.tolist(), correction)), dtype=np.float64), True

    def _hand_over(self, planned: PlannedChunk, index: int) -> None:
        """A chunk plays its first step: start the hand-over from the one that played, or
        from the arm's state at a hand-back."""
        previous, blender, arm = self._last_played, self._blender, self.arm_index
        resume, self._resume_from = self._resume_from, None
        kind = kind_of(planned.chunk.action_space)
        if blender is None or arm is None or kind is None:
            return
        integrating = kind != "absolute"  # velocity and delta values are summed by the arm
        if previous is None:
            if resume is not None:  # one row, held: rows_from extrapolates it unchanged
                reference = largest_arm_step(planned, arm)
                seam = Seam(planned.rows, index, (resume,), 0, reference, integrating)
                blender.start(seam, planned, resume)
            return
        # the step after the last played, not the one due now: a lag move shifts the plan
        # by a period at a seam (1.7x the in-chunk step on lingbot-va-5b), smoothed too
        old_index = previous.last_index + 1
        reference = max(largest_arm_step(previous, arm), largest_arm_step(planned, arm))
        seam = Seam(planned.rows, index, previous.rows, old_index, reference, integrating)
        blender.start(seam, planned, previous)

    def _hold(self) -> None:
        """Nothing to play: the arm holds, and a hand-over under way is dropped with it."""
        self._last_played = None
        if self._blender is not None:
            self._blender.reset()

    def _resolve(self, dim: int) -> None:
        grippers = {index for index in self._gripper(dim) if 0 <= index < dim}
        self.arm_index = [index for index in range(dim) if index not in grippers]
        if self._blender is not None:
            self._blender.resolve(dim, sorted(grippers))

    def steady_until(self) -> float:
        """Until when the chunk playing keeps the timeline with no seam and no skip decision
        (absolute and velocity spaces): ticks before it may ``take_steady``, which adds the
        hand-over under way as ``take`` does. Only an arriving chunk changes this."""
        if not self._chunks or not self._chunks[0].skips:
            return -math.inf
        playing = self._chunks[0]
        if playing.first_index is None:
            return -math.inf
        period = playing.period_s
        until = playing.anchor + (playing.length - DUE_TOLERANCE) * period
        if len(self._chunks) > 1:
            until = min(until, self._chunks[1].anchor - DUE_TOLERANCE * period)
        return until

    def take_steady(
        self, now: float
    ) -> tuple[PlannedChunk, int, FloatArray, FloatArray, int, bool] | None:
        """``take`` for a tick before ``steady_until``: the chunk playing, by time index, as
        (chunk, index, raw, action, skipped late, blended), or None when that step already
        went out (``EARLY``). The common tick, so it does the least: no search, no seam, and
        a plain tuple, not a ``PlannedStep`` (docs/performance.md, "Behind the engine's
        constants")."""
        planned = self._chunks[0]
        index = math.floor((now - planned.anchor) / planned.period_s + DUE_TOLERANCE)
        late = index - planned.last_index - 1
        if late < 0:
            return None
        planned.last_index = index
        raw = planned.rows[index]
        action, blended = self._corrected(planned, index, raw)
        return planned, index, raw, action, late, blended

    def _start_waiting(self, now: float) -> bool:
        """The plan ran out while a chunk waits for its slot: start it now, from its first
        step, and let the lag shrink to its round trip. The arm holds meanwhile, so that
        step is still the right next command; waiting would stop the arm with a chunk in
        hand (on a queueing gateway, where the lag follows a long tail: 0.4-0.6 s per
        chunk). Never happens while chunks arrive in time."""
        waiting = [p for p in self._chunks if p.first_index is None and p.anchor > now]
        if not waiting:  # (``advance_to`` found nothing: whatever started has run out)
            return False
        first = waiting[0]
        self._origin = now
        self._set_lag(
            max(0.0, round((now - first.observed_at) / first.period_s)) * first.period_s,
            first.period_s,
        )
        self._lag_step = 0.0
        first.anchor = now
        return True

    def end(self, now: float) -> float:
        """When the planned steps run out (``now`` if nothing is planned)."""
        return max([now] + [planned.end(now) for planned in self._chunks])

    def pending(self, now: float) -> bool:
        """A chunk is waiting for its anchor."""
        return any(p.first_index is None and p.anchor > now for p in self._chunks)

    def blended_rest(self, index: int) -> FloatArray | None:
        """The playing chunk's steps from ``index`` (the one just played) on, as they will be
        sent with the hand-over under way (``Blender.preview``); None if nothing plays."""
        playing = self.playing()
        return None if playing is None else self.rest_of(playing, index)

    def rest_of(self, planned: PlannedChunk, index: int) -> FloatArray | None:
        """``planned``'s steps from ``index`` on, as they will be sent with the hand-over
        under way; None if ``index`` is not one of its steps."""
        if not 0 <= index < planned.length:
            return None
        rows = np.array(planned.rows[index:], dtype=np.float64)
        return rows if self._blender is None else self._blender.preview(planned, index, rows)

    @property
    def chunks(self) -> tuple[PlannedChunk, ...]:
        """The chunks planned, playing and waiting for their slot, oldest observation first
        (read-only: ``advance_to`` is what advances them)."""
        return tuple(self._chunks)

    @property
    def blends(self) -> bool:
        """Whether a hand-over changes what is sent at a seam (any strategy but ``none``)."""
        return self._blender is not None

    def playing(self) -> PlannedChunk | None:
        """The chunk that owns the timeline now (it has played at least one step)."""
        started = [p for p in self._chunks if p.first_index is not None]
        return started[-1] if started else None
