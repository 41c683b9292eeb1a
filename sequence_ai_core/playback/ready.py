"""A chunk made ready to play on the worker that fetched it: copied, checked and split.

Right after a control loop's sleep every numpy call on the control thread costs many times
a list index (docs/performance.md, "Behind the engine's constants"), so the worker does the
per-step work once and the plan only indexes. The copy is what plays, so the copy is what
is checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidResponse
from ..types import ActionChunk, FloatArray, Prediction


def checked_period(chunk: ActionChunk, steps: object, control_hz: float | None = None) -> float:
    """The period to play ``chunk`` at, after checking its ``steps`` (the copy that will
    play) again: the wire layer validates answers too, but nothing non-finite or misshapen
    may reach the arm even if it did not."""
    dim = chunk.action_dim
    if not isinstance(steps, np.ndarray) or steps.ndim != 2 or steps.shape[0] < 1:
        raise InvalidResponse("action chunk has no steps or is not a 2-D array")
    if steps.shape[1] != dim or not np.all(np.isfinite(steps)):
        raise InvalidResponse(f"action chunk is not finite {dim}-dim steps")
    hz = control_hz or chunk.control_frequency_hz
    if not (math.isfinite(hz) and hz > 0):
        raise InvalidResponse(f"chunk control frequency {hz} is not positive")
    return 1.0 / hz


@dataclass(frozen=True)
class ReadyChunk:
    """A chunk ready to be placed on the plan (``prepare``)."""

    prediction: Prediction
    #: A read-only copy of the steps, checked finite once: nothing can change it later.
    steps: FloatArray
    #: ``steps[i]`` as views, so a tick indexes a list instead of calling numpy.
    rows: list[FloatArray]
    #: The period to play it at (``checked_period``).
    period_s: float
    #: Per dimension, the largest change between two consecutive steps (hand-over rates).
    largest_step: FloatArray | None = None


def prepare(prediction: Prediction, control_hz: float | None = None) -> ReadyChunk:
    """Copy, check and split a chunk's steps (on the worker, off the control thread)."""
    chunk = prediction.action_chunk
    steps = np.array(chunk.steps, dtype=np.float64)
    steps.flags.writeable = False
    period_s = checked_period(chunk, steps, control_hz)
    largest = np.max(np.abs(np.diff(steps, axis=0)), axis=0) if len(steps) > 1 else None
    return ReadyChunk(prediction, steps, list(steps), period_s, largest)
