"""What one tick of the engine hands its driver: the ``Tick``.

A driver sends ``action`` (or says why not) and tells the ``episode.Episode`` once
(``Episode.settle``). Everything else a driver may need comes with the tick: the chunk and
step the action comes from, whether that chunk starts here, and, only when asked
(``rest()``), the rest of the chunk as it will be sent.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, NamedTuple

from ..types import ActionChunk, FloatArray

if TYPE_CHECKING:
    from .plan import ChunkPlan, PlannedChunk

#: What a tick did: played an action, waited for the first chunk, found nothing to play,
#: came in the slot of a step an earlier tick sent (``plan.EARLY``: send nothing, hold
#: nothing), found a person in control (``human``: send nothing, hold nothing), or waited for
#: the first chunk after they handed the arm back (``resuming``: the arm is held).
TickKind = Literal["action", "waiting", "underrun", "early", "human", "resuming"]


# A tuple, not a frozen dataclass: one is made every tick, on cold caches right after the
# control loop's sleep (docs/performance.md, "Behind the engine's constants").
class Tick(NamedTuple):
    """One tick's result. ``action`` is finite and of the run's size, or None (``kind``
    says why). Valid until the next tick: ``rest()`` reads the plan as it is now."""

    action: FloatArray | None
    kind: TickKind
    #: The plan's number of the chunk the action comes from (0: none).
    chunk_seq: int
    #: The step of that chunk (-1: none).
    step_index: int
    #: The chunk plays its first step at this tick.
    new_chunk: bool
    #: Seconds since the chunk's observation was taken.
    staleness_s: float
    #: The tick's time (the driver's monotonic clock): when the action is sent.
    at: float = math.nan
    #: The plan's chunk the action comes from, and the plan (for ``rest``); None for a tick
    #: with nothing to play, or one a test made by hand.
    planned: PlannedChunk | None = None
    plan: ChunkPlan | None = None

    @property
    def chunk(self) -> ActionChunk | None:
        """The chunk the action comes from, as the gateway returned it."""
        return None if self.planned is None else self.planned.chunk

    @property
    def anchor(self) -> float:
        """When the chunk's step 0 is due (monotonic seconds); NaN without a chunk."""
        return math.nan if self.planned is None else self.planned.anchor

    def rest(self) -> FloatArray | None:
        """The chunk's steps from this tick's on, as they will be sent (the hand-over under
        way included); None without a chunk. Built on each call: a copy of the chunk."""
        if self.planned is None or self.plan is None:
            return None
        return self.plan.rest_of(self.planned, self.step_index)
