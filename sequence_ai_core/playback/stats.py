"""Bounded sample windows and the playback bookkeeping every driver shares.

``PlaybackStats`` turns a stream of ticks into the numbers a ``RunOutcome`` reports, so the
engine, ``run()`` and the benchmark baselines all measure the same way.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from ..types import FloatArray
from .outcome import RunOutcome

#: Windows up to this size take their quantiles in plain Python: the refill window (50
#: samples) is asked on every chunk arrival, on the control thread, where ``np.quantile``
#: costs much of a new chunk's tick (docs/performance.md, "Behind the engine's constants").
SMALL_WINDOW = 256


def quantile(values: Iterable[float], q: float) -> float:
    """The q-quantile (0..1, linear interpolation) of values; NaN when there are none."""
    data = np.fromiter(values, dtype=np.float64)
    if data.size == 0:
        return math.nan
    return float(np.quantile(data, q))


def sorted_quantile(ordered: Sequence[float], q: float) -> float:
    """``np.quantile(ordered, q)`` (the default linear method, the same rounding) of values
    already in ascending order; NaN when there are none."""
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    low, high, t = ordered[below], ordered[above], position - below
    difference = high - low
    # numpy's lerp: from the nearer end, so that t = 1 gives `high` exactly
    return float(high - difference * (1 - t) if t >= 0.5 else low + difference * t)


def largest_difference(a: FloatArray, b: FloatArray, index: list[int] | None = None) -> float:
    """``max |a - b|`` over two vectors of at most ``limits.MAX_ACTION_DIM`` values (over the
    dimensions in ``index`` only, if given), in plain Python: on the control thread, right
    after a sleep, a numpy reduction over so few values costs more."""
    if index is None:
        return max(map(abs, map(operator.sub, a.tolist(), b.tolist())), default=0.0)
    left, right = a.tolist(), b.tolist()
    return max((abs(left[i] - right[i]) for i in index), default=0.0)


class SampleWindow:
    """The most recent ``size`` samples, with cached quantiles (ticks ask every period)."""

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError("window size must be positive")
        self._samples: deque[float] = deque(maxlen=size)
        self._cache: dict[float, float] = {}
        self._ordered: list[float] | None = None

    def add(self, value: float) -> None:
        self._samples.append(float(value))
        self._cache.clear()
        self._ordered = None

    def __len__(self) -> int:
        return len(self._samples)

    def quantile(self, q: float) -> float:
        if q not in self._cache:
            if len(self._samples) > SMALL_WINDOW:
                self._cache[q] = quantile(self._samples, q)
            else:
                if self._ordered is None:
                    self._ordered = sorted(self._samples)
                self._cache[q] = sorted_quantile(self._ordered, q)
        return self._cache[q]

    def max(self) -> float:
        return max(self._samples) if self._samples else math.nan


# A tuple, not a frozen dataclass: one is made every tick, as a ``tick.Tick`` is; and the
# common tick's record is its first four fields, since keywords cost more than the rest.
class ActionRecord(NamedTuple):
    """What the statistics keep of an action a tick handed out, counted once it went out
    (``PlaybackStats.commit``). The defaults are the common tick's: a step that continues
    the chunk playing (``steady``: no seam, no underrun to close), sent as planned.
    ``action``: what was sent (None: ``raw``); ``blended``: a hand-over corrected it."""

    now: float
    raw: FloatArray  # the planned step before any seam blending
    staleness_s: float
    period_s: float
    new_chunk: bool = False
    steady: bool = True
    action: FloatArray | None = None
    blended: bool = False


class PlaybackStats:
    """Counts for one episode: commands, underruns, gaps, seams, staleness.

    Seams, gripper dimensions left out (``arm_index``): the *jump* is the planned values'
    (before any hand-over, docs/architecture.md §3); the *step* is what the arm was sent, the
    largest change between two commands from a seam's first command to the end of its
    hand-over.

    Time accounting: each command covers one period from its tick. Underrun seconds are the
    time between the first command and the last tick that no command covered; duty cycle is
    covered time over covered plus underrun time (waiting before the first command is
    neither).
    """

    def __init__(self, window: int = 10_000) -> None:
        self.actions = 0
        self.chunks_played = 0
        self.underruns = 0
        self.stalls = 0
        self.underrun_s = 0.0
        self.max_gap_s = 0.0
        self.max_seam_jump = 0.0
        self.skipped_stale = 0
        self.skipped_late = 0
        self.early_ticks = 0
        self.staleness = SampleWindow(window)
        #: Refill latency: from the tick that observed to the tick that saw the answer.
        self.latency = SampleWindow(window)
        self.first_action_at: float | None = None
        #: The dimensions seams are measured on (None: all; the engine leaves out grippers).
        self.arm_index: list[int] | None = None
        #: Per seam, the largest step sent from it to the end of its hand-over.
        self.seam_steps = SampleWindow(window)
        self.max_seam_step = 0.0
        #: Seams a hand-over corrected.
        self.blended_seams = 0
        self._last_action_at: float | None = None
        self._last_period = 0.0
        self._last_raw: FloatArray | None = None
        self._last_sent: FloatArray | None = None
        self._seam_step: float | None = None  # the seam under way's largest step so far
        self._open_gap_s = 0.0
        #: Takeovers (``taken_over``, ``handed_back``): how many, their closed seconds, and
        #: the hand-backs' figures (``RunOutcome``).
        self.takeovers = 0
        self.takeover_s = 0.0
        self.max_resume_s = 0.0
        self.max_resume_jump = 0.0
        self._taken_at: float | None = None
        self._released_at: float | None = None

    @property
    def in_underrun(self) -> bool:
        return self._open_gap_s > 0.0

    def action(
        self,
        now: float,
        raw: FloatArray,
        *,
        period_s: float,
        new_chunk: bool,
        staleness_s: float,
        sent: FloatArray | None = None,
        blended: bool = False,
    ) -> None:
        """A command was issued. ``raw`` is the planned step before any seam blending,
        ``sent`` what went out (None: ``raw``), ``blended`` whether a hand-over made it."""
        if self.first_action_at is None:
            self.first_action_at = now
        if self._released_at is not None:  # the first policy command after a hand-back
            self.max_resume_s = max(self.max_resume_s, now - self._released_at)
            self._released_at = None
        elif self._last_action_at is not None:
            gap = now - self._last_action_at
            self.max_gap_s = max(self.max_gap_s, gap)
            if self.in_underrun:  # scheduling jitter between two commands is not a stall
                self.underrun_s += max(0.0, gap - self._last_period)
        sent = raw if sent is None else sent
        seam = False
        if new_chunk:
            self.chunks_played += 1
            if self._last_raw is not None and self._last_raw.shape == raw.shape:
                jump = largest_difference(raw, self._last_raw, self.arm_index)
                self.max_seam_jump = max(self.max_seam_jump, jump)
                seam = True
        self._seam(sent, seam, blended)
        self.actions += 1
        self.staleness.add(staleness_s)
        self._last_action_at = now
        self._last_period = period_s
        self._last_raw = raw
        self._last_sent = sent
        self._open_gap_s = 0.0

    def _seam(self, sent: FloatArray, seam: bool, blended: bool) -> None:
        """A seam opens at its first command and stays open while a hand-over blends, up to
        and with the step back onto the plan."""
        last = self._last_sent
        if seam and last is not None:
            self.close_seam()
            self._seam_step = largest_difference(sent, last, self.arm_index)
            self.blended_seams += blended
        elif self._seam_step is not None and last is not None:
            self._seam_step = max(self._seam_step, largest_difference(sent, last, self.arm_index))
            if not blended:
                self.close_seam()

    def close_seam(self) -> None:
        """The seam under way (if any) is over: record its largest step."""
        step, self._seam_step = self._seam_step, None
        if step is not None:
            self.seam_steps.add(step)
            self.max_seam_step = max(self.max_seam_step, step)

    def commit(self, record: ActionRecord) -> None:
        """Record an action that went out (only those count). A command right after another
        of the same chunk (the engine's common tick, a hand-over's step included) takes the
        short way."""
        last = self._last_action_at
        if not record.steady or last is None:
            self.action(
                record.now,
                record.raw,
                period_s=record.period_s,
                new_chunk=record.new_chunk,
                staleness_s=record.staleness_s,
                sent=record.action,
                blended=record.blended,
            )
            return
        sent = record.raw if record.action is None else record.action
        if self._seam_step is not None and self._last_sent is not None:  # as ``_seam`` does
            step = largest_difference(sent, self._last_sent, self.arm_index)
            self._seam_step = max(self._seam_step, step)
            if not record.blended:  # back on the plan
                self.close_seam()
        now = record.now
        if now - last > self.max_gap_s:
            self.max_gap_s = now - last
        self.actions += 1
        self.staleness.add(record.staleness_s)
        self._last_action_at = now
        self._last_raw = record.raw
        self._last_sent = sent

    def underrun(self, now: float) -> float:
        """A tick after the first command with nothing to play; returns the gap so far."""
        if self._last_action_at is None:
            return 0.0
        self.close_seam()
        if self._open_gap_s == 0.0:
            self.stalls += 1
        self.underruns += 1
        gap = now - self._last_action_at
        self._open_gap_s = max(gap, 1e-9)
        return gap

    def taken_over(self, now: float) -> None:
        """A person took the arm: an underrun under way ends (its seconds so far count), and
        no gap or seam is measured across the time they have it."""
        self.close_seam()
        if self._open_gap_s > 0.0:
            self.underrun_s += max(0.0, self._open_gap_s - self._last_period)
            self._open_gap_s = 0.0
        self.takeovers += 1
        self._taken_at = now
        self._last_action_at = None
        self._last_raw = self._last_sent = None
        self._released_at = None

    def handed_back(self, now: float) -> float:
        """The person handed the arm back: the resume time runs from here. Returns the
        seconds they had it."""
        if self._taken_at is None:
            return 0.0
        held_s = max(0.0, now - self._taken_at)
        self.takeover_s += held_s
        self._taken_at = None
        self._released_at = now
        return held_s

    def resume_jump(self, steps: float) -> None:
        """The first step after a hand-back, off the arm's state by ``steps`` in-chunk steps."""
        self.max_resume_jump = max(self.max_resume_jump, steps)

    def takeover_seconds(self, now: float) -> float:
        """Closed takeovers plus one still under way at ``now``."""
        open_s = 0.0 if self._taken_at is None else max(0.0, now - self._taken_at)
        return self.takeover_s + open_s

    def underrun_seconds(self) -> float:
        """Closed gaps plus the one still open (through the slot of its latest tick)."""
        return self.underrun_s + self._open_gap_s

    def duty_cycle(self) -> float:
        """Fraction of time since the first command that a command covered."""
        covered = self.actions * self._last_period
        total = covered + self.underrun_seconds()
        return covered / total if total > 0 else math.nan

    def live(self) -> dict[str, float | int]:
        """The counts for live diagnostics."""
        return {
            "actions": self.actions,
            "chunks": self.chunks_played,
            "underruns": self.underruns,
            "stalls": self.stalls,
            "underrun_s": self.underrun_seconds(),
            "max_gap_s": self.max_gap_s,
            "max_seam_jump": self.max_seam_jump,
            "max_seam_step": self.max_seam_step,
            "takeovers": self.takeovers,
            "max_resume_s": self.max_resume_s,
            "max_resume_jump": self.max_resume_jump,
            "duty_cycle": self.duty_cycle(),
            "skipped_stale": self.skipped_stale,
            "skipped_late": self.skipped_late,
            "early_ticks": self.early_ticks,
            "latency_p50_s": self.latency.quantile(0.5),
            "latency_p95_s": self.latency.quantile(0.95),
            "staleness_p50_s": self.staleness.quantile(0.5),
            "staleness_p95_s": self.staleness.quantile(0.95),
        }

    def outcome(
        self,
        *,
        reason: str,
        stopped_early: bool,
        elapsed_s: float,
        action_space: str | None,
        retries: int,
        requests: int,
        error: BaseException | None,
    ) -> RunOutcome:
        self.close_seam()
        return RunOutcome(
            actions=self.actions,
            chunks=self.chunks_played,
            elapsed_s=elapsed_s,
            underruns=self.underruns,
            underrun_s=self.underrun_seconds(),
            max_gap_s=self.max_gap_s,
            stopped_early=stopped_early,
            reason=reason,
            max_seam_jump=self.max_seam_jump,
            action_space=action_space,
            skipped_stale=self.skipped_stale,
            retries=retries,
            requests=requests,
            latency_p50_s=self.latency.quantile(0.5),
            latency_p95_s=self.latency.quantile(0.95),
            staleness_p50_s=self.staleness.quantile(0.5),
            staleness_p95_s=self.staleness.quantile(0.95),
            duty_cycle=self.duty_cycle(),
            error=error,
            stalls=self.stalls,
            skipped_late=self.skipped_late,
            early_ticks=self.early_ticks,
            max_seam_step=self.max_seam_step,
            seam_step_p95=self.seam_steps.quantile(0.95),
            blended_seams=self.blended_seams,
            takeovers=self.takeovers,
            max_resume_s=self.max_resume_s,
            max_resume_jump=self.max_resume_jump,
        )
