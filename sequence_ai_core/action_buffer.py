"""The buffer behind ``Policy.next_action``: one chunk's actions handed out one per call, and
a new chunk fetched only once they are all gone.

This is the simple loop a user writes by hand, so the arm stops while each refill is in
flight; ``run()`` keeps it moving with prefetch and a time-indexed plan instead.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from .errors import ChunkExhausted
from .types import FloatArray, Observation, Prediction


class ActionBuffer:
    """The actions of the last chunk not yet handed out. Not thread-safe: its owner holds
    the driver guard around every call."""

    def __init__(self) -> None:
        self._actions: deque[FloatArray] = deque()

    def __len__(self) -> int:
        return len(self._actions)

    def clear(self) -> None:
        self._actions.clear()

    def pop(
        self, observation: Observation | None, fetch: Callable[[Observation], Prediction]
    ) -> FloatArray:
        """The next action, refilled from ``fetch(observation)`` first when none is left;
        ``ChunkExhausted`` when none is left and there is no observation to ask with."""
        if not self._actions:
            if observation is None:
                raise ChunkExhausted(
                    "action buffer is empty and no observation was given; "
                    "pass observation= on every call"
                )
            self._actions.extend(fetch(observation).action_chunk.steps)
        return self._actions.popleft()
