"""The shapes of a hand-over's correction, one row per step (``handover`` uses them).

Each takes the correction's starting value per dimension (the *offset*: where the previous
command stream was heading, minus the new chunk's step) and returns the rows to add to the
new chunk's steps, ending at zero. ``steer`` also pays back what corrections of a velocity
or delta command moved the arm, under the same bound on every step.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..limits import MAX_STEPS
from ..types import FloatArray

#: No correction lasts longer than this many steps, whatever the offset.
MAX_BLEND_STEPS = MAX_STEPS
#: Fixed-length blends (``fade``, ``extrapolate``) last a third of a chunk unless
#: ``smooth_seam`` says otherwise.
FIXED_FRACTION = 3


def fixed_steps(setting: int, chunk_length: int) -> int:
    """Steps of a ``fade`` or ``extrapolate``: the setting, else a third of the chunk."""
    return setting if setting > 0 else max(1, chunk_length // FIXED_FRACTION)


def fade(offset: FloatArray, steps: int) -> FloatArray:
    """``offset`` fading linearly to zero: ``steps`` rows, each ``1/(steps+1)`` less."""
    weights = 1.0 - np.arange(1, steps + 1, dtype=np.float64) / (steps + 1)
    result: FloatArray = np.outer(weights, offset).astype(np.float64)
    return result


def crossfade(old: FloatArray, new: FloatArray) -> FloatArray:
    """The correction that turns ``new`` into a linear cross-fade from ``old`` (same shape:
    one row per step) to ``new``."""
    steps = len(old)
    weights = 1.0 - np.arange(1, steps + 1, dtype=np.float64) / (steps + 1)
    result: FloatArray = weights[:, None] * (old - new)
    return result


def _transitions(offset: FloatArray, rate: float, per_unit: float) -> int:
    largest = float(np.max(np.abs(offset)))
    return min(MAX_BLEND_STEPS, max(1, math.ceil(per_unit * largest / rate - 1e-9)))


def slew(offset: FloatArray, rate: float) -> FloatArray:
    """``offset`` decaying linearly by at most ``rate`` per step (every dimension ends
    together, so the arm moves along a straight line toward the plan)."""
    return fade(offset, _transitions(offset, rate, 1.0) - 1)


def smooth(offset: FloatArray, rate: float) -> FloatArray:
    """``offset`` decaying along half a cosine, zero slope at both ends, by at most
    ``rate`` per step (the cosine's steepest step is pi/2 times a linear one's)."""
    transitions = _transitions(offset, rate, math.pi / 2)
    phase = np.arange(1, transitions, dtype=np.float64) / transitions
    weights = (1.0 + np.cos(math.pi * phase)) / 2.0
    result: FloatArray = np.outer(weights, offset).astype(np.float64)
    return result


def hump(length: int, shape: Literal["sine", "triangle", "cosine"]) -> FloatArray:
    """A positive bump over ``length`` steps that sums to 1 (zero just outside both ends)."""
    position = np.arange(1, length + 1, dtype=np.float64) / (length + 1)
    if shape == "triangle":
        bump = np.minimum(position, 1.0 - position)
    elif shape == "cosine":
        bump = np.sin(math.pi * position) ** 2
    else:
        bump = np.sin(math.pi * position)
    result: FloatArray = bump / bump.sum()
    return result


def rows_from(rows: Sequence[FloatArray], start: int, count: int) -> FloatArray:
    """``count`` rows from ``rows[start]`` on; past the end, extrapolated linearly from the
    last two (a one-row chunk: held)."""
    last = len(rows) - 1
    slope = rows[last] - rows[last - 1] if last >= 1 else np.zeros_like(rows[last])
    out = [rows[i] if i <= last else rows[last] + (i - last) * slope
           for i in range(start, start + count)]  # fmt: skip
    return np.array(out, dtype=np.float64)


class Steering:
    """Corrections of a summed command (velocity, delta) steered back to zero together with
    their running sum, what they moved the arm: a double integrator brought home with no
    correction more than ``rate`` from the one before. Each step moves (``gain`` of the way,
    at most ``rate``) toward the largest correction that still stops in time,
    |e| = sqrt(2 rate |sum|); a dimension that can finish takes the exact last step, so the
    sum ends at zero. One step per tick (``next``), so a seam costs no loop on the control
    thread. Paying back only after the offset decayed would drift: the next seam cuts every
    decay short before its payback begins (docs/performance.md, "Behind the engine's constants").

    Plain Python floats, not numpy: it runs on every tick of a hand-over, over at most
    ``limits.MAX_ACTION_DIM`` values, where numpy's calls right after the control loop's
    sleep cost twice the plain loop (docs/performance.md, "Behind the engine's constants")."""

    def __init__(self, offset: FloatArray, rate: float, gain: float = 1.0) -> None:
        self.rate, self.gain = rate, gain
        self._value: list[float] = offset.astype(np.float64).tolist()
        #: The dimensions that are home (their corrections are zero from then on).
        self._home = [False] * len(self._value)

    def next(self, owed: Sequence[float]) -> list[float] | None:
        """The next correction, given what all corrections so far sum to (``owed``); None
        once every dimension is home. numpy's float rules: a NaN stays NaN."""
        home = self._home
        if all(home):
            return None
        rate, gain, reach = self.rate, self.gain, 2.0 * self.rate
        following = []
        for dim, (paid, value) in enumerate(zip(owed, self._value, strict=True)):
            ahead = paid + value
            if home[dim]:
                following.append(0.0)
            elif abs(paid) <= rate and abs(ahead) <= rate:  # the last step: exactly home
                following.append(-paid)
                home[dim] = True
            else:
                # toward zero; at zero either sign of the target gives the same step
                root = math.sqrt(reach * abs(ahead))
                wanted = gain * ((-root if ahead > 0 else root) - value)
                wanted = rate if wanted > rate else -rate if wanted < -rate else wanted  # clip
                following.append(value + wanted)
        self._value = following
        return following


def steer(owed: FloatArray, offset: FloatArray, rate: float, gain: float = 1.0) -> FloatArray:
    """Every row ``Steering`` plays from ``owed`` and ``offset`` (for tests and plots)."""
    steering, total = Steering(offset, rate, gain), owed.astype(np.float64).tolist()
    rows = []
    for _ in range(MAX_BLEND_STEPS):
        row = steering.next(total)
        if row is None:
            break
        total = list(map(operator.add, total, row))
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), len(offset))
