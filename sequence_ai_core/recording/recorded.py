"""A recorded episode as plain data: what ``episode_log`` reads from a bag, in seconds from
its first message (``topics`` says what each stream is)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RecordedChunk:
    """One chunk as received, with its ``CHUNK_INFO`` (NaN, -1 or "" where none was)."""

    received_t: float
    anchor_t: float
    #: Seconds from the anchor to each step (``time_from_start``).
    offsets: Floats
    period_s: float
    #: Steps x dimensions, as the model sent them.
    steps: Floats
    request: int
    seq: int
    latency_s: float
    observed_at_t: float
    model: str
    action_space: str
    #: The gripper dimensions; None when the bag does not say.
    gripper_dims: tuple[int, ...] | None


@dataclass(frozen=True)
class RecordedEvent:
    t: float
    name: str
    values: Mapping[str, str]


@dataclass(frozen=True)
class RecordedEpisode:
    path: Path
    #: The first message's time, nanoseconds since the epoch: time 0 of every array.
    start_ns: int
    #: The last message's time (seconds from the first).
    end_t: float
    command_t: Floats
    #: Commands x dimensions, exactly as played.
    commands: Floats
    #: ``layout.dim[0]``'s label of the first command (the action space).
    command_label: str
    chunks: tuple[RecordedChunk, ...]
    hold_t: Floats
    hold_reasons: tuple[str, ...]
    events: tuple[RecordedEvent, ...]
    observation_t: Floats
    requests: int
    #: While taken over: each joint reading's header stamp, and each operator command's time
    #: and source (``layout.dim[0]``'s label); empty in a bag without takeovers.
    human_t: Floats
    operator_t: Floats
    operator_sources: tuple[str, ...]
    #: ``/outcome``'s values, and ``reason`` (its message); empty if the bag has none.
    outcome: Mapping[str, str]
    #: ``/recording``'s values; empty if the bag has none.
    recording: Mapping[str, str]

    def event_times(self, name: str) -> Floats:
        return np.array([e.t for e in self.events if e.name == name], dtype=np.float64)

    @property
    def action_space(self) -> str:
        named = [c.action_space for c in self.chunks if c.action_space]
        return (named or [self.outcome.get("action_space", "") or self.command_label])[0]

    @property
    def model(self) -> str:
        return next((c.model for c in self.chunks if c.model), "")

    @property
    def gripper_dims(self) -> tuple[int, ...] | None:
        return next((c.gripper_dims for c in self.chunks if c.gripper_dims is not None), None)
