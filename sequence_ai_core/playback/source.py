"""What a driver plays from: the chunk-source protocol, and the one-driver guard.

``Policy`` (the gateway client) is a ``ChunkSource``; any other backend that answers an
observation with a ``Prediction`` can be one too. ``PlaybackEngine`` calls ``fetch`` on its
worker threads, so it must be thread-safe.

A source may also condition its chunks on what the engine plans to play while the request is
out (real-time chunking, ``PlannedPrefix``): one that says so (``wants_planned``, a
``PlanningSource``) is handed the plan's prefix with each request; any other is called as
before, with the observation and the options only.

One driver per source: two loops on one source would interleave their chunks and both
report success (the 0.1.0 client's documentation warns about exactly that). A driver is a
thread calling ``predict``/``next_action``, a ``run()``, or an open ``PlaybackEngine``; each
takes the source's ``guard``, and a second one is refused at once with ``SequencesError``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from ..errors import SequencesError
from ..types import FloatArray, Observation, Prediction


class DriverGuard:
    """Who drives a source now. Re-entrant for the same owner; thread-safe."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Lock()
        self._owner: object | None = None
        self._depth = 0

    def claim(self, owner: object) -> None:
        """Make ``owner`` the driver, or raise ``SequencesError`` if another one is."""
        with self._lock:
            if self._owner is not None and self._owner != owner:
                raise SequencesError(
                    f"{self._name} is already driven by another thread or engine; "
                    "use one Policy per control loop"
                )
            self._owner = owner
            self._depth += 1

    def release(self, owner: object) -> None:
        """Undo one ``claim`` by ``owner``; a release by anyone else is ignored."""
        with self._lock:
            if self._owner != owner:
                return
            self._depth -= 1
            if self._depth == 0:
                self._owner = None

    @contextlib.contextmanager
    def driving(self) -> Iterator[None]:
        """Claim the source for the calling thread for the ``with`` block."""
        owner = ("thread", threading.get_ident())
        self.claim(owner)
        try:
            yield
        finally:
            self.release(owner)


class ChunkSource(Protocol):
    """What ``PlaybackEngine`` needs from a policy backend."""

    @property
    def control_hz(self) -> float | None:
        """A rate that overrides the chunk's own, or None."""

    @property
    def guard(self) -> DriverGuard:
        """The one-driver guard every driver of this source takes."""

    def fetch(self, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        """One chunk for ``observation``; thread-safe, raises ``SequencesError`` subclasses."""


@dataclass(frozen=True)
class PlannedPrefix:
    """What the engine plans to play while one request is out, for a policy that conditions
    its new chunk on it (real-time chunking); ``playback.prefix`` says which steps are known.

    ``steps[j]`` is the step the plan has due ``j`` periods after the request's observation
    (float64, read-only, shape (k, action_dim); (0, 0) when nothing is planned). The new
    chunk's first step is expected ``delay_steps`` periods after the observation, and
    ``k <= delay_steps``: the steps in between that are not listed come from chunks the
    engine has not received yet.
    """

    steps: FloatArray
    delay_steps: int


class PlanningSource(ChunkSource, Protocol):
    """A source that takes the plan's prefix with each request (``wants_planned`` true)."""

    @property
    def wants_planned(self) -> bool:
        """True to be handed ``planned=`` by the engine; may change only at construction."""

    def fetch(
        self,
        observation: Observation,
        options: Mapping[str, Any],
        *,
        planned: PlannedPrefix | None = None,
    ) -> Prediction:
        """``ChunkSource.fetch``, conditioned on ``planned`` when it is given."""


def takes_planned(source: ChunkSource) -> TypeGuard[PlanningSource]:
    """Whether to hand ``source`` the prefix: only when it says it wants one, so a source
    written for the two-argument ``fetch`` keeps working unchanged."""
    return getattr(source, "wants_planned", False) is True


__all__ = ["ChunkSource", "DriverGuard", "PlannedPrefix", "PlanningSource", "takes_planned"]
