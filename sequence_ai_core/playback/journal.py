"""What playback tells a recorder, as it happens: the ``Journal`` protocol.

The engine reports the requests it starts, the chunks it accepts, the first step each chunk
plays and its events; the episode reports each command the driver sent (``Episode.settle``),
the holds and the outcome. ``recording.FlightRecorder`` is one; playback never imports it,
and with no journal (the default) nothing is called. Every call is on the control thread and must
return at once (a recorder queues and writes elsewhere). Times are the driver's clock.
"""

from __future__ import annotations

from typing import Protocol

from ..types import FloatArray, Observation, Prediction
from .outcome import RunOutcome

#: An event's values: a few numbers or short texts (``recording.topics.EVENTS``).
EventValues = dict[str, "float | int | str"]


class Journal(Protocol):
    def request(self, now: float, number: int, observation: Observation) -> None:
        """Request ``number`` (1-based) went out with ``observation``, observed at ``now``."""

    def chunk(
        self, now: float, number: int, seq: int, prediction: Prediction, observed_at: float,
        anchor: float, period_s: float, grippers: tuple[int, ...],
    ) -> None:  # fmt: skip
        """Request ``number``'s chunk was accepted as the plan's chunk ``seq``; ``grippers``
        are its gripper dimensions (which seam measures leave out)."""

    def started(self, now: float, seq: int, anchor: float, step: int) -> None:
        """Chunk ``seq`` played its first step (``step``), anchored at ``anchor``."""

    def event(self, now: float, name: str, values: EventValues) -> None:
        """An engine event (underrun, retry, backoff, skipped steps, a discarded chunk, a
        takeover and its release)."""

    def command(self, now: float, action: FloatArray) -> None:
        """``action`` went out (the driver's ``act`` or publisher took it)."""

    def observed(self, now: float, observation: Observation) -> None:
        """The arm and its cameras while a person has it (``Episode.take_over``): what a
        correction dataset needs beside the operator's commands."""

    def operator(self, now: float, values: FloatArray, source: str) -> None:
        """A command a person's device sent while the arm was taken over (``source``: where
        it came from, a topic name or a label)."""

    def hold(self, reason: str) -> None:
        """The driver was told to hold: ``underrun`` or the episode's stop reason (stamped
        by the journal's clock, the driver's)."""

    def outcome(self, outcome: RunOutcome) -> None:
        """The episode ended with ``outcome``."""


class Unrecorded:
    """The journal of an episode nobody records: every call does nothing."""

    def request(self, now: float, number: int, observation: Observation) -> None:
        pass

    def chunk(
        self, now: float, number: int, seq: int, prediction: Prediction, observed_at: float,
        anchor: float, period_s: float, grippers: tuple[int, ...],
    ) -> None:  # fmt: skip
        pass

    def started(self, now: float, seq: int, anchor: float, step: int) -> None:
        pass

    def event(self, now: float, name: str, values: EventValues) -> None:
        pass

    def command(self, now: float, action: FloatArray) -> None:
        pass

    def observed(self, now: float, observation: Observation) -> None:
        pass

    def operator(self, now: float, values: FloatArray, source: str) -> None:
        pass

    def hold(self, reason: str) -> None:
        pass

    def outcome(self, outcome: RunOutcome) -> None:
        pass


UNRECORDED: Journal = Unrecorded()
