"""Hand-over: what the command does where one chunk gives way to the next.

Consecutive chunks of a real model disagree: each is a fresh sample, off the one before by
an offset and a drift, now and then another plan (20-70 mrad at every hand-over on real
arms). At a seam the plan's own values jump by that disagreement plus one step of motion
(``RunOutcome.max_seam_jump`` measures it, before anything here). A hand-over adds a
*correction* to the new chunk's steps that starts where the previous command stream was
heading and decays to nothing, so the arm sees the disagreement spread over several steps.

The offset: the previous chunk's next step (the one after the last it played: under the
default ``round_trip`` timing it has about one step left when the next chunk starts; past
its end it is extrapolated from its last two steps) plus the correction played with its
last step, minus the new chunk's first step played. Chunks that agree give no offset and
nothing is blended: the command is then exactly the plan, as without a hand-over. A lag
move (the plan shifting by a period at a seam) is an offset too, and is smoothed with it.

Strategies (``EngineConfig.handover``; compared in docs/handover.md):

- ``none``: the plan as it is.
- ``fade``: the offset fades linearly over ``smooth_seam`` steps (0: a third of a chunk).
- ``extrapolate``: a linear cross-fade over as many steps from the previous chunk, played on
  (extrapolated past its end), to the new one; with real overlap (refills started earlier,
  at a cost in requests) it is the classic overlap cross-fade.
- ``slew``: the offset decays linearly, no faster than ``handover_rate`` times the largest
  in-chunk step of the two chunks, so the correction adds at most that to any step and
  lasts as long as the offset needs (a small one goes in a step or two, a mode switch takes
  longer).
- ``smooth`` (the default): the same bound, on a cosine: the correction starts and ends
  with zero slope, so an absolute seam adds no velocity step. On every catalogue model at
  every disagreement level it keeps seams within 1.5x the in-chunk step, with the lowest
  jerk of the strategies that do; nothing changes where chunks agree.

Velocity and delta spaces integrate: a correction of the commanded velocity (or delta)
moves the arm elsewhere than the plan would, by its sum (``Blender.debt``). There ``fade``
and ``extrapolate`` subtract a sine hump over their own steps that makes the sum exactly
zero by their end; ``slew`` and ``smooth`` steer the correction and its sum home together
under the same bound (``blends.Steering``), one step per tick. A velocity seam of 5-12x the
in-chunk step (the simulator's ``calibrated`` level) cannot be paid back within one chunk
under 1.5x: the sum then carries over to the next seam, which steers it home with its own,
and the arm stays off the played plan (by docs/handover.md's "off plan" figures) until the
seams stop (a hold drops what is owed, with the correction).

Gripper dimensions (positions in every space, on their own controller on a real arm) are
never corrected. A hold (underrun or stop) drops any correction: the next chunk starts from
rest, as it does without a hand-over.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from ..types import FloatArray
from .blends import Steering, crossfade, fade, fixed_steps, hump, rows_from, slew, smooth

Handover = Literal["none", "fade", "extrapolate", "slew", "smooth"]
HANDOVERS: tuple[Handover, ...] = get_args(Handover)
#: Only ``slew`` and ``smooth`` keep seams within 1.5x the in-chunk step on every catalogue
#: model; ``smooth`` with the lower jerk at absolute seams (docs/performance.md, "Behind
#: the engine's constants").
DEFAULT_HANDOVER: Handover = "smooth"
#: ``slew`` and ``smooth`` add at most this fraction of the largest in-chunk step to any
#: step, so no seam's step exceeds 1.5x the plan's own (the goal). Less keeps a velocity
#: model's arm further off its plan meanwhile; more goes over 1.5x.
DEFAULT_HANDOVER_RATE = 0.5
#: ``smooth`` on a summed command: how much of the way to the braking curve each step goes
#: (``blends.Steering``), for fewer corners than ``slew``'s full steps.
SMOOTH_GAIN = 0.5
#: Offsets below this (relative to the values) are float noise between agreeing chunks.
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Seam:
    """A new chunk's first step, and the chunk that played before it."""

    new_rows: Sequence[FloatArray]
    new_index: int
    old_rows: Sequence[FloatArray]
    #: The previous chunk's step for the seam's tick (past its end when it has none left).
    old_index: int
    #: The largest step within either chunk, gripper excluded (the rate's reference).
    reference_step: float
    #: Velocity or delta space: corrections must sum to zero.
    integrating: bool


class Blender:
    """The hand-over between chunks, per ``Handover`` strategy (see module docs).

    ``start`` at a new chunk's first step; ``take(owner, index)`` then gives the correction
    to add to that chunk's step ``index`` (None when there is none); ``reset`` on a hold.
    ``arm`` is 1.0 on the dimensions blended, 0.0 on grippers (``resolve``). A correction is
    either rows fixed at the seam (``_rows``) or, for ``slew`` and ``smooth`` on summed
    commands, steered tick by tick (``_steering``). What a tick adds (``take``) and what the
    corrections sum to (``debt``) are plain floats, as ``blends.Steering`` computes them."""

    def __init__(self, strategy: Handover, *, steps: int = 0, rate: float = 0.5) -> None:
        self.strategy = strategy
        self._steps = steps
        self._rate = rate
        self.arm: FloatArray | None = None
        #: What the corrections played so far sum to, per dimension (integrating spaces).
        self.debt: list[float] = []
        self._rows: FloatArray | None = None
        self._steering: Steering | None = None
        self._owner: object = None
        self._seam_index = 0
        self._integrating = False
        #: The step index and correction last played.
        self._last: tuple[int, list[float]] | None = None

    def resolve(self, dim: int, gripper: Sequence[int]) -> FloatArray:
        """The arm mask for ``dim``-wide chunks with gripper dimensions ``gripper``."""
        arm = np.ones(dim, dtype=np.float64)
        for index in gripper:
            if 0 <= index < dim:
                arm[index] = 0.0
        self.arm, self.debt = arm, [0.0] * dim
        return arm

    def reset(self) -> None:
        """A hold: drop the correction under way and what it owed."""
        self._end()
        self.debt = [0.0] * len(self.debt)

    def _end(self) -> None:
        self._rows, self._steering, self._owner, self._last = None, None, None, None

    def take(self, owner: object, index: int) -> list[float] | None:
        """The correction for ``owner``'s step ``index`` (counted as played), or None."""
        if owner is not self._owner:
            return None
        correction = self._next(index)
        if correction is None:
            self._end()
            return None
        self._last = (index, correction)
        if self._integrating:
            self.debt = list(map(operator.add, self.debt, correction))
        return correction

    def preview(self, owner: object, index: int, rows: FloatArray) -> FloatArray:
        """``rows`` (``owner``'s steps from ``index`` on, ``index`` the one just played) as
        the hand-over under way will send them: for outputs that send the rest of a chunk
        at once (a whole-chunk joint trajectory). Nothing under way is changed."""
        out = np.array(rows, dtype=np.float64)
        last = self._last
        if owner is not self._owner or last is None or last[0] != index:
            return out
        if self._steering is None:
            ahead = self._rows[index - self._seam_index :] if self._rows is not None else rows[:0]
            out[: len(ahead)] += ahead[: len(out)]
            return out
        steering, owed = copy.deepcopy(self._steering), self.debt
        out[0] += last[1]
        for row in out[1:]:
            correction = steering.next(owed)
            if correction is None:
                break
            owed = list(map(operator.add, owed, correction))
            row += correction
        return out

    def _next(self, index: int) -> list[float] | None:
        if self._steering is not None:
            return self._steering.next(self.debt)
        rows, done = self._rows, index - self._seam_index
        return rows[done].tolist() if rows is not None and done < len(rows) else None

    def start(self, seam: Seam, owner: object, previous: object) -> bool:
        """Begin the hand-over to ``owner`` (the new chunk) from ``previous``; True if a
        correction started. Without an arm mask (``resolve``) nothing is blended."""
        arm = self.arm
        if self.strategy == "none" or arm is None:
            return False
        debt = np.array(self.debt, dtype=np.float64)
        chunk_length = len(seam.new_rows)
        steps = fixed_steps(self._steps, chunk_length) if self._fixed else 1
        old = rows_from(seam.old_rows, seam.old_index, steps)
        new = rows_from(seam.new_rows, seam.new_index, steps)
        played = self._played(previous, seam.old_index - 1)
        # from the correction last played: its own next change would add to this seam's
        offset = arm * (old[0] + played - new[0])
        if self._rows is not None and previous is self._owner:
            old += self._rows_after(seam.old_index, steps)
        owed = debt if seam.integrating else np.zeros_like(debt)
        self._end()
        self._owner, self._seam_index, self._integrating = owner, seam.new_index, seam.integrating
        scale = _TOLERANCE * max(1.0, float(np.max(np.abs(new[0]))))
        if float(np.max(np.abs(offset))) <= scale and float(np.max(np.abs(owed))) <= scale:
            return False
        rate = self._rate * seam.reference_step
        if not rate > 0:  # a still plan has no step to bound by: a third of a chunk
            rate = max(np.abs(offset).max(), np.abs(owed).max()) / fixed_steps(0, chunk_length)
        if seam.integrating and self.strategy in ("slew", "smooth"):
            gain = SMOOTH_GAIN if self.strategy == "smooth" else 1.0
            self._steering = Steering(offset, rate, gain)
        else:
            self._rows = arm * self._rows_for(offset, owed, arm * old, arm * new, rate)
        return True

    @property
    def _fixed(self) -> bool:
        return self.strategy in ("fade", "extrapolate")

    def _played(self, previous: object, index: int) -> FloatArray:
        """The correction played with ``previous``'s step ``index`` (zeros if none)."""
        last = self._last
        if previous is self._owner and last is not None and last[0] == index:
            return np.array(last[1], dtype=np.float64)
        return np.zeros_like(self.arm) if self.arm is not None else np.zeros(0)

    def _rows_after(self, old_index: int, steps: int) -> FloatArray:
        """What the fixed correction under way adds from the previous chunk's step
        ``old_index`` on, ``steps`` rows (zeros past its end)."""
        rows = self._rows
        out = np.zeros((steps, 0 if rows is None else rows.shape[1]), dtype=np.float64)
        done = old_index - self._seam_index
        if rows is not None and done >= 0:
            left = rows[done:][:steps]
            out[: len(left)] = left
        return out

    def _rows_for(
        self, offset: FloatArray, owed: FloatArray, old: FloatArray, new: FloatArray, rate: float
    ) -> FloatArray:
        """The fixed correction rows for one seam, by strategy (module docs)."""
        strategy = self.strategy
        if strategy == "extrapolate":
            decay = crossfade(old, new)
        elif strategy == "fade":
            decay = fade(offset, len(old))
        else:
            decay = slew(offset, rate) if strategy == "slew" else smooth(offset, rate)
        if not self._integrating:
            return decay
        # a fixed-length blend pays back over its own steps
        paid: FloatArray = decay - np.outer(hump(len(decay), "sine"), owed + decay.sum(axis=0))
        return paid
