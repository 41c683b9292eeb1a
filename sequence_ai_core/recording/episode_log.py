"""A recorded episode read back: a bag (the topics of ``topics``) into plain numpy arrays.

Times are seconds from the bag's first message; the epoch seconds the chunk metadata carries
(``observed_at_s``) are put on the same origin. Needs rosbags (the ``report`` extra).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ..action_spaces import kind_of
from . import topics
from .extras import MissingExtra
from .recorded import RecordedChunk, RecordedEpisode, RecordedEvent


def read_episode(path: str | Path) -> RecordedEpisode:
    """The episode recorded at ``path``: a bag directory or its ``.mcap`` file.
    ``ValueError`` (with the path and what is wrong) for anything else."""
    bag = Path(path)
    if not bag.exists():
        raise ValueError(f"{bag}: no such bag (a directory with metadata.yaml, or a .mcap file)")
    if bag.is_dir() and not (bag / "metadata.yaml").is_file():
        raise ValueError(f"{bag} is not a rosbag2 bag: it has no metadata.yaml")
    if bag.is_file() and bag.suffix != ".mcap":
        raise ValueError(f"{bag} is not a bag: give the bag's directory or its .mcap file")
    try:
        from rosbags.rosbag2 import Reader, ReaderError
        from rosbags.typesys import Stores, get_typestore
    except ImportError:
        raise MissingExtra("reading a recorded episode", "rosbags", "report") from None
    store = get_typestore(Stores.ROS2_HUMBLE)
    try:
        with Reader(bag) as reader:
            ours = [c for c in reader.connections if c.topic in _EXPECTED]
            _check(bag, ours, sorted({c.topic for c in reader.connections}))
            found: dict[str, list[tuple[int, Any]]] = {name: [] for name in _EXPECTED}
            for conn, stamp, raw in reader.messages(connections=ours):
                found[conn.topic].append((stamp, store.deserialize_cdr(raw, conn.msgtype)))
            start = reader.start_time if reader.message_count else 0
    except (ReaderError, OSError) as exc:
        raise ValueError(f"{bag}: cannot read the bag: {exc}") from None
    return _episode(bag, start, found)


_EXPECTED = {topic.name: topic.msgtype for topic in topics.TOPICS}


def _check(bag: Path, ours: list[Any], present: list[str]) -> None:
    if not ours:
        listed = ", ".join(present) or "no topics at all"
        raise ValueError(
            f"{bag} holds no topic of a recorded episode (expected {', '.join(_EXPECTED)}; "
            f"found {listed})"
        )
    for conn in ours:
        if conn.msgtype != _EXPECTED[conn.topic]:
            raise ValueError(
                f"{bag}: {conn.topic} is {conn.msgtype}, a recorded episode's is "
                f"{_EXPECTED[conn.topic]}"
            )


def _episode(bag: Path, start: int, found: dict[str, list[tuple[int, Any]]]) -> RecordedEpisode:
    def t(stamp: int) -> float:
        return (stamp - start) / 1e9

    last = max((stamp for messages in found.values() for stamp, _ in messages), default=start)
    commands = found[topics.COMMAND.name]
    dims = [len(m.data) for _, m in commands]
    width = dims[0] if dims else 0
    rows = [np.asarray(m.data, dtype=np.float64) for _, m in commands if len(m.data) == width]
    label = next((m.layout.dim[0].label for _, m in commands if m.layout.dim), "")
    holds = found[topics.HOLD.name]
    observations = found[topics.OBSERVATION.name]
    outcome = found[topics.OUTCOME.name]
    recording = found[topics.RECORDING.name]
    operator = found[topics.OPERATOR.name]
    return RecordedEpisode(
        path=bag,
        start_ns=start,
        end_t=t(last),
        command_t=np.array([t(s) for s, m in commands if len(m.data) == width], np.float64),
        commands=np.array(rows, dtype=np.float64).reshape(len(rows), width),
        command_label=label,
        chunks=_chunks(found, start),
        hold_t=np.array([t(stamp) for stamp, _ in holds], dtype=np.float64),
        hold_reasons=tuple(str(m.message) for _, m in holds),
        events=tuple(
            RecordedEvent(t(stamp), str(m.name), _values(m))
            for stamp, m in found[topics.EVENTS_TOPIC.name]
        ),
        observation_t=np.array([t(_stamp(m.header.stamp)) for _, m in observations], np.float64),
        requests=len(found[topics.REQUEST.name]),
        human_t=np.array(
            [t(_stamp(m.header.stamp)) for _, m in found[topics.HUMAN_JOINTS.name]], np.float64
        ),
        operator_t=np.array([t(stamp) for stamp, _ in operator], dtype=np.float64),
        operator_sources=tuple(m.layout.dim[0].label if m.layout.dim else "" for _, m in operator),
        outcome={**_values(outcome[-1][1]), "reason": str(outcome[-1][1].message)}
        if outcome
        else {},
        recording=_values(recording[-1][1]) if recording else {},
    )


def _chunks(found: dict[str, list[tuple[int, Any]]], start: int) -> tuple[RecordedChunk, ...]:
    """Each chunk with the ``CHUNK_INFO`` of the same receive time (the n-th of that time)."""
    infos: dict[int, list[Mapping[str, str]]] = {}
    for stamp, message in found[topics.CHUNK_INFO.name]:
        infos.setdefault(stamp, []).append(_values(message))
    chunks = []
    for stamp, message in found[topics.CHUNK.name]:
        waiting = infos.get(stamp, [])
        chunks.append(_chunk(stamp, message, waiting.pop(0) if waiting else {}, start))
    return tuple(chunks)


def _chunk(stamp: int, message: Any, info: Mapping[str, str], start: int) -> RecordedChunk:
    space = info.get("action_space", "")
    velocity = kind_of(space) == "velocity"
    points = message.points
    values = [p.velocities if velocity else p.positions for p in points]
    if points and not len(values[0]):  # the other field, whatever the metadata said
        values = [p.positions if velocity else p.velocities for p in points]
    width = len(values[0]) if values else 0
    offsets = np.array([_stamp(p.time_from_start) / 1e9 for p in points], dtype=np.float64)
    hz = _number(info, "hz")
    if hz > 0:
        period = 1.0 / hz
    else:
        period = float(np.median(np.diff(offsets))) if len(offsets) > 1 else math.nan
    grippers = info.get("gripper_dims")
    return RecordedChunk(
        received_t=(stamp - start) / 1e9,
        anchor_t=(_stamp(message.header.stamp) - start) / 1e9,
        offsets=offsets,
        period_s=period,
        steps=np.array(values, dtype=np.float64).reshape(len(values), width),
        request=int(_number(info, "request", -1)),
        seq=int(_number(info, "seq", -1)),
        latency_s=_number(info, "latency_s"),
        observed_at_t=_number(info, "observed_at_s") - start / 1e9,
        model=info.get("model", ""),
        action_space=space,
        gripper_dims=None
        if grippers is None
        else tuple(int(x) for x in grippers.split(",") if x.strip()),
    )


def _values(message: Any) -> dict[str, str]:
    return {str(kv.key): str(kv.value) for kv in message.values}


def _number(values: Mapping[str, str], key: str, default: float = math.nan) -> float:
    try:
        return float(values[key])
    except (KeyError, ValueError):
        return default


def _stamp(stamp: Any) -> int:
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
