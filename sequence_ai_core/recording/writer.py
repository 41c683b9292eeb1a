"""The recorder's writer thread: records to messages, messages to the bag, within bounds.

A record is a tuple from the control thread (``recorder``); ``RecordWriter.write`` turns it
into messages (``messages``) and writes them. It owns every limit: the size and duration
caps (past them only the outcome and the counts are written), and a failed write (an
unwritable path, a full disk), after which nothing is. Each stops recording once, with one
warning; every record not written is counted. Every text is redacted of the keys first.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..playback.outcome import RunOutcome
from ..redaction import redact
from ..types import ImageFrame, Observation, Prediction
from . import topics
from .bag import BagFile, Rosbags
from .config import RecordConfig
from .images import frame_bytes, topic_part
from .messages import OK, WARN

#: A record: its kind, the driver's time, then what the kind carries (``recorder``).
Record = tuple[Any, ...]
#: One message: topic, type, CDR bytes.
Message = tuple[str, str, bytes]
#: Records written past the caps.
FINAL = frozenset({"outcome"})
NS = 1e9
#: How often what was written goes to disk (driver seconds): a crash or a full disk then
#: loses at most this much of an episode.
FLUSH_S = 1.0


class RecordWriter:
    def __init__(
        self, path: Path, rosbags: Rosbags, config: RecordConfig, offset_ns: int,
        secrets: Sequence[str], warn: Callable[[str], None],
    ) -> None:  # fmt: skip
        self.path = path
        self._rosbags = rosbags
        self._config = config
        self._offset_ns = offset_ns
        self._secrets = [s for s in secrets if s]
        self._warn = warn
        self._bag: BagFile | None = None
        self._first_t: float | None = None
        self._flushed_t = -math.inf
        #: Messages written since the last flush: a failed flush loses them.
        self._unflushed = 0
        self._last_ns = 0
        self._action_space = ""
        self.written = 0
        self.dropped = 0
        self.stopped = ""
        #: Nothing more can be written (a plain store, read by the control thread).
        self.failed = False
        self._converters: dict[str, Callable[..., list[Message]]] = {
            "request": self._request, "image": self._image, "chunk": self._chunk,
            "event": self._event, "command": self._command, "hold": self._hold,
            "observed": self._observed, "operator": self._operator, "outcome": self._outcome,
        }  # fmt: skip

    def open(self, views: Sequence[str] = ()) -> None:
        """Before the episode, on the caller's thread: creating the bag and its topics and
        compiling rosbags' serializers hold the interpreter long enough to make a tick late
        if the writer thread did it during the episode."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._bag = BagFile(self.path, self._rosbags)
            for view in views:
                self._bag.add_topic(topics.IMAGE_PREFIX + topic_part(view), topics.IMAGE_TYPE)
        except OSError as exc:
            self._fail(f"cannot create {self.path}: {exc.strerror or exc}")

    def write(self, record: Record) -> None:
        kind, t = record[0], record[1]
        if self._first_t is None:
            self._first_t = t
        if self._bag is None or (self.stopped and kind not in FINAL):
            self.dropped += 1
            return
        ns = self._ns(t)
        messages = self._convert(self._bag, kind, ns, record[2:])
        if kind not in FINAL and self._over_cap(self._bag, t, messages):
            self.dropped += 1
            return
        for topic, msgtype, data in messages:
            self._put(topic, msgtype, ns, data)
        if self._unflushed and t - self._flushed_t >= FLUSH_S:
            self._flush(t)

    def finish(self, queue_dropped: int) -> None:
        """The recorder's counts, then the metadata: the bag is complete. An episode that
        recorded nothing (a run refused before it started) leaves no bag."""
        bag = self._bag
        if bag is None:
            return
        if self._first_t is None and not queue_dropped:
            self._discard(bag)
            return
        dropped = self.dropped + queue_dropped
        values = {"written": self.written + 1, "dropped": dropped, "stopped": self.stopped}
        level = WARN if dropped else OK
        data = bag.messages.status("recording", self.stopped or "complete", values, level=level)
        self._put(topics.RECORDING.name, topics.RECORDING.msgtype, self._last_ns, data)
        if self._bag is None:
            return
        try:
            bag.close()
        except OSError as exc:
            self._lost(f"cannot finish {self.path}: {exc.strerror or exc}")
        self._bag = None

    def _discard(self, bag: BagFile) -> None:
        self._bag = None
        try:
            bag.close()
        finally:
            shutil.rmtree(self.path, ignore_errors=True)

    def _flush(self, t: float) -> None:
        self._flushed_t = t
        if self._bag is None:
            return
        try:
            self._bag.flush()
        except OSError as exc:
            self._lost(f"write failed: {exc.strerror or exc}")
        self._unflushed = 0

    def _lost(self, why: str) -> None:
        """A flush or the close failed: what it held is dropped, not written."""
        self.written -= self._unflushed
        self.dropped += self._unflushed
        self._unflushed = 0
        self._fail(why)

    # ------------------------------------------------------------------ limits

    def _put(self, topic: str, msgtype: str, ns: int, data: bytes) -> None:
        bag = self._bag
        if bag is None:
            self.dropped += 1
            return
        try:
            bag.write(topic, msgtype, ns, data)
        except OSError as exc:
            self.dropped += 1
            self._fail(f"write failed: {exc.strerror or exc}")
            return
        self.written += 1
        self._unflushed += 1
        self._last_ns = max(self._last_ns, ns)

    def _over_cap(self, bag: BagFile, t: float, messages: list[Message]) -> bool:
        size = sum(len(data) for _, _, data in messages)
        if bag.bytes_written + size > self._config.max_bytes:
            self._stop(f"size cap of {self._config.max_bytes} bytes reached")
        limit = self._config.max_duration_s
        if limit is not None and self._first_t is not None and t - self._first_t > limit:
            self._stop(f"duration cap of {limit:g} s reached")
        return bool(self.stopped)

    def _stop(self, why: str) -> None:
        if not self.stopped:
            self.stopped = why
            self._warn(f"recording {self.path}: {why}; the episode goes on unrecorded")

    def _fail(self, why: str) -> None:
        """Nothing more can be written: drop the bag (closing it may fail again)."""
        self.failed = True
        self._bag = None
        self._stop(why)

    def _ns(self, t: float) -> int:
        return round(t * NS) + self._offset_ns

    # ------------------------------------------------------------------ records

    def _convert(self, bag: BagFile, kind: str, ns: int, fields: tuple[Any, ...]) -> list[Message]:
        return self._converters[kind](bag, ns, *fields)

    def _status(
        self, bag: BagFile, topic: topics.Topic, name: str, message: str,
        values: Mapping[str, object], level: int = OK,
    ) -> Message:  # fmt: skip
        text = self._text
        clean = {text(k): text(v) if isinstance(v, str) else v for k, v in values.items()}
        data = bag.messages.status(self._text(name), self._text(message), clean, level=level)
        return topic.name, topic.msgtype, data

    def _text(self, text: str) -> str:
        for secret in self._secrets:
            text = redact(text, secret)
        return text

    def _request(
        self, bag: BagFile, ns: int, number: int, positions: Any, velocities: Any,
        observation: Observation,
    ) -> list[Message]:  # fmt: skip
        joints = bag.messages.joint_state(ns, self._config.joint_names, positions, velocities)
        proprio = observation.proprioception
        values: dict[str, object] = {
            "request": number, "instruction": observation.instruction,
            "images": ",".join(frame.view for frame in observation.images),
            **arm_values(proprio.gripper, proprio.end_effector_pose),
        }  # fmt: skip
        observed = (topics.OBSERVATION.name, topics.OBSERVATION.msgtype, joints)
        return [observed, self._status(bag, topics.REQUEST, "request", "", values)]

    def _observed(
        self, bag: BagFile, ns: int, positions: Any, velocities: Any, gripper: float | None,
        pose: Any,
    ) -> list[Message]:  # fmt: skip
        joints = bag.messages.joint_state(ns, self._config.joint_names, positions, velocities)
        messages = [(topics.HUMAN_JOINTS.name, topics.HUMAN_JOINTS.msgtype, joints)]
        arm = arm_values(gripper, pose)
        if arm:  # neither: no message, rather than one that reads as a zero
            messages.append(self._status(bag, topics.HUMAN_STATE, "arm", "", arm))
        return messages

    def _operator(self, bag: BagFile, ns: int, values: Any, source: str) -> list[Message]:
        data = bag.messages.command(values, self._text(source))
        return [(topics.OPERATOR.name, topics.OPERATOR.msgtype, data)]

    def _image(self, bag: BagFile, ns: int, frame: ImageFrame) -> list[Message]:
        data, image_format = frame_bytes(frame, self._config.image_max_side)
        stamp = ns if frame.timestamp_ms is None else frame.timestamp_ms * 1_000_000
        view = self._text(frame.view)
        message = bag.messages.image(stamp, view, data, image_format)
        return [(topics.IMAGE_PREFIX + topic_part(view), topics.IMAGE_TYPE, message)]

    def _chunk(
        self, bag: BagFile, ns: int, number: int, seq: int, prediction: Prediction,
        observed_at: float, anchor: float, period_s: float, grippers: tuple[int, ...],
    ) -> list[Message]:  # fmt: skip
        chunk = prediction.action_chunk
        self._action_space = chunk.action_space
        trajectory = bag.messages.chunk(self._ns(anchor), prediction, period_s)
        observed_ns = self._ns(observed_at)
        values = {
            "request": number, "seq": seq, "request_id": prediction.request_id,
            "model": prediction.model, "action_space": chunk.action_space, "hz": 1.0 / period_s,
            "steps": len(chunk), "latency_s": (ns - observed_ns) / NS,
            "observed_at_s": observed_ns / NS, "anchor_s": self._ns(anchor) / NS,
            "gripper_dims": ",".join(map(str, grippers)),
        }  # fmt: skip
        info = self._status(bag, topics.CHUNK_INFO, "chunk", "", values)
        return [(topics.CHUNK.name, topics.CHUNK.msgtype, trajectory), info]

    def _event(self, bag: BagFile, ns: int, name: str, values: Mapping[str, Any]) -> list[Message]:
        if "anchor_s" in values:  # the driver's clock, as every time in the bag is not
            values = {**values, "anchor_s": self._ns(float(values["anchor_s"])) / NS}
        return [self._status(bag, topics.EVENTS_TOPIC, name, "", values)]

    def _command(self, bag: BagFile, ns: int, action: Any) -> list[Message]:
        data = bag.messages.command(action, self._action_space)
        return [(topics.COMMAND.name, topics.COMMAND.msgtype, data)]

    def _hold(self, bag: BagFile, ns: int, reason: str) -> list[Message]:
        return [self._status(bag, topics.HOLD, "hold", reason, {}, level=WARN)]

    def _outcome(self, bag: BagFile, ns: int, outcome: RunOutcome) -> list[Message]:
        level = OK if outcome.reason == "completed" else WARN
        values = outcome_values(outcome)
        return [self._status(bag, topics.OUTCOME, "outcome", outcome.reason, values, level)]


def arm_values(gripper: float | None, pose: Sequence[float] | None) -> dict[str, object]:
    """The ``gripper`` and ``end_effector_pose`` values of a request and of ``HUMAN_STATE``,
    each only when there is one; the pose comma separated, each float's repr (exact)."""
    values: dict[str, object] = {}
    if gripper is not None:
        values["gripper"] = float(gripper)
    if pose is not None:
        values["end_effector_pose"] = ",".join(repr(float(v)) for v in pose)
    return values


def outcome_values(outcome: RunOutcome) -> dict[str, object]:
    """Every field of the outcome as a number or a text (the error as its one line)."""
    values: dict[str, object] = {}
    for name, value in vars(outcome).items():
        if name == "error":
            value = "" if value is None else f"{type(value).__name__}: {value}"
        elif value is None:
            value = ""
        elif isinstance(value, float) and not math.isfinite(value):
            value = repr(value)
        values[name] = value
    return values
