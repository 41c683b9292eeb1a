"""Recorded episodes for the recording tests: run() on the simulator with ``record=``, and
the bag read back by the ``mcap`` library's own reader and ROS 2 decoder (not rosbags, which
wrote it)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory

from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import connect
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_core.types import FloatArray, ImageFrame, Observation, Prediction
from sequence_ai_sim.arm import SimulatedArm
from sequence_ai_sim.catalogue import SimModel
from support import TEST_KEY


@dataclass
class Episode:
    """What the caller saw: every action act() received, each chunk, each observation."""

    outcome: RunOutcome
    sent: list[FloatArray] = field(default_factory=list)
    chunks: list[Prediction] = field(default_factory=list)
    frames: list[ImageFrame] = field(default_factory=list)
    holds: int = 0

    @property
    def bag(self) -> Path:
        assert self.outcome.recording is not None
        return Path(self.outcome.recording)


def record_episode(
    url: str,
    model: str | SimModel,
    record: RecordConfig,
    *,
    max_actions: int,
    act: Callable[[FloatArray], None] | None = None,
    instruction: str = "",
    prefetch: bool | None = None,
) -> Episode:
    arm = SimulatedArm(model, image_size=(48, 64))
    name = model if isinstance(model, str) else model.short_id
    seen: Episode = Episode(outcome=None)  # type: ignore[arg-type]

    def observe() -> Observation:
        observation = arm.observe(instruction)
        seen.frames.extend(observation.images)
        return observation

    def send(action: FloatArray) -> None:
        seen.sent.append(np.array(action, dtype=np.float64))
        (act or arm.act)(action)

    def hold() -> None:
        seen.holds += 1

    with connect(name, api_key=TEST_KEY, base_url=url, allow_insecure_http=True) as policy:
        seen.outcome = policy.run(
            observe,
            send,
            max_actions=max_actions,
            validate=lambda action: True,
            hold=hold,
            on_chunk=seen.chunks.append,
            record=record,
            prefetch=prefetch,
        )
    return seen


@dataclass(frozen=True)
class Message:
    log_time_ns: int
    message: Any


def read_bag(bag: Path) -> dict[str, list[Message]]:
    """Every message of the bag's one MCAP file by topic, decoded by mcap_ros2."""
    (path,) = bag.glob("*.mcap")
    topics: dict[str, list[Message]] = defaultdict(list)
    with path.open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        for _schema, channel, message, decoded in reader.iter_decoded_messages():
            topics[channel.topic].append(Message(message.log_time, decoded))
    return dict(topics)


def values_of(status: Any) -> dict[str, str]:
    """A DiagnosticStatus's key-values."""
    return {pair.key: pair.value for pair in status.values}


def only(messages: Sequence[Message]) -> Any:
    assert len(messages) == 1, len(messages)
    return messages[0].message
