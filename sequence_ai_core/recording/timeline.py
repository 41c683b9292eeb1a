"""A recorded episode's commands and underrun ticks, in time order, counted the way
``playback.stats.PlaybackStats`` counts a live episode: underruns and their spells, the time
no command covered, the largest gap between commands, and each seam's jump (the plan's) and
step (what was sent).

A takeover starts the count afresh, as at the episode's start: the command after a release is
no seam and ends no gap (the plan before it is never played again; the outcome's resume
fields measure the hand-back), and the time a person had the arm is neither gap nor underrun.
"""

from __future__ import annotations

import math

import numpy as np

from .recorded import Floats, RecordedEpisode
from .replay import Attribution

#: The position of a tick that is no command (commands' are 0, 1, ...).
UNDERRUN, TAKEOVER = -1, -2


class Timeline:
    """Counted on construction; ``arm`` are the dimensions seams are measured on."""

    def __init__(self, episode: RecordedEpisode, played: Attribution, arm: list[int]) -> None:
        self.underruns = self.stalls = self.seams = self.blended_seams = 0
        self.underrun_s = self.max_seam_jump = self.max_gap_s = 0.0
        self.seam_steps: list[float] = []
        self.staleness: list[float] = []
        self._arm = arm
        self._period = 0.0
        self._actions = 0
        self._open_gap = 0.0
        self._seam: float | None = None
        times = episode.command_t.tolist()
        underruns = episode.event_times("underrun").tolist()
        takeovers = episode.event_times("takeover").tolist()
        ticks = sorted(
            [(t, k) for k, t in enumerate(times)]
            + [(t, UNDERRUN) for t in underruns]
            + [(t, TAKEOVER) for t in takeovers]
        )
        last: tuple[float, int] | None = None  # the last command: time, position
        for now, k in ticks:
            if k == UNDERRUN:
                self._underrun(now, last)
            elif k == TAKEOVER:
                self._take_over()
                last = None
            else:
                self._command(episode, played, now, k, last)
                last = now, k
        self._close()

    def _underrun(self, now: float, last: tuple[float, int] | None) -> None:
        if last is None:
            return
        self._close()
        self.stalls += self._open_gap == 0.0
        self.underruns += 1
        self._open_gap = max(now - last[0], 1e-9)

    def _take_over(self) -> None:
        """An underrun spell open when a person took the arm ends there, as a command would
        end it."""
        self._close()
        self.underrun_s += max(0.0, self._open_gap - self._period)
        self._open_gap = 0.0

    def _command(
        self,
        episode: RecordedEpisode,
        played: Attribution,
        now: float,
        k: int,
        last: tuple[float, int] | None,
    ) -> None:
        position = int(played.chunk[k])
        chunk = episode.chunks[position] if position >= 0 else None
        sent, planned = episode.commands[k], played.planned[k]
        raw = sent if chunk is None else planned
        blended = chunk is not None and bool((sent != planned).any())
        if last is not None:
            self.max_gap_s = max(self.max_gap_s, now - last[0])
            if self._open_gap > 0.0:
                self.underrun_s += max(0.0, now - last[0] - self._period)
        if chunk is not None:
            self._period = chunk.period_s
            self.staleness.append(now - chunk.observed_at_t)
        previous = None if last is None else last[1]
        new_chunk = chunk is not None and (previous is None or played.chunk[previous] != position)
        if previous is not None and new_chunk:
            before = played.planned[previous]
            before = episode.commands[previous] if np.isnan(before).any() else before
            self.max_seam_jump = max(self.max_seam_jump, _largest(raw, before, self._arm))
            self.seams += 1
            self._close()
            self._seam = _largest(sent, episode.commands[previous], self._arm)
            self.blended_seams += blended
        elif self._seam is not None and previous is not None:
            self._seam = max(self._seam, _largest(sent, episode.commands[previous], self._arm))
            if not blended:
                self._close()
        self._actions += 1
        self._open_gap = 0.0

    def _close(self) -> None:
        if self._seam is not None:
            self.seam_steps.append(self._seam)
        self._seam = None

    def underrun_seconds(self) -> float:
        """Closed gaps plus the one still open at the end."""
        return self.underrun_s + self._open_gap

    def duty_cycle(self) -> float:
        covered = self._actions * self._period
        total = covered + self.underrun_seconds()
        return covered / total if total > 0 else math.nan


def _largest(a: Floats, b: Floats, index: list[int]) -> float:
    return peak(np.abs(a[index] - b[index]))


def peak(values: Floats) -> float:
    """The largest value, 0 for none (no ``max(initial=)``: numpy 2.5's stubs lack it)."""
    return float(np.max(values)) if values.size else 0.0
