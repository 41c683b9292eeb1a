"""Records as CDR bytes of the standard ROS 2 messages ``topics`` names.

``rosbags`` (imported by whoever builds a ``Messages``) defines the types, from ROS 2
Humble's definitions, which Jazzy's match for every type used here. Commands, one a tick,
skip its generic serializer, which costs several times more: a command's bytes are its
layout's, fixed for the run, and the action's float64 values, which end the message
(docs/performance.md, "Figures the code relies on"; ``test_recording_messages`` holds the
two byte-equal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..action_spaces import kind_of
from ..types import FloatArray, Prediction
from . import topics

NS = 1_000_000_000
#: DiagnosticStatus levels.
OK, WARN = 0, 1


class Messages:
    """Builds each record's CDR bytes with ``typestore`` (a rosbags ``Typestore``)."""

    def __init__(self, typestore: Any) -> None:
        self._store = typestore
        self._types = typestore.types
        self._command_prefix: dict[tuple[str, int], bytes] = {}

    def warm(self) -> None:
        """Serialize one of each type: rosbags compiles a type's serializer on first use,
        which would hold up the writer during an episode."""
        empty = np.empty(0, dtype=np.float64)
        self.joint_state(0, (), empty, empty)
        self.image(0, "", b"", "jpeg")
        self.status("", "", {"": ""})
        self.command(np.zeros(1), "")
        t = self._types
        point = t["trajectory_msgs/msg/JointTrajectoryPoint"](
            positions=empty, velocities=empty, accelerations=empty, effort=empty,
            time_from_start=self._duration(0),
        )  # fmt: skip
        trajectory = t[topics.CHUNK.msgtype](
            header=self._header(0, ""), joint_names=[], points=[point]
        )
        self.serialize(topics.CHUNK.msgtype, trajectory)

    def serialize(self, msgtype: str, message: object) -> bytes:
        return bytes(self._store.serialize_cdr(message, msgtype))

    def command(self, action: FloatArray, label: str) -> bytes:
        """``std_msgs/msg/Float64MultiArray``, ``data`` the action, ``layout.dim[0]`` labelled
        ``label`` (a command's action space, an operator command's source)."""
        values = np.ascontiguousarray(action, dtype="<f8")
        key = (label, values.size)
        prefix = self._command_prefix.get(key)
        if prefix is None:
            template = self.serialize(topics.COMMAND.msgtype, self._array(label, values))
            prefix = self._command_prefix[key] = template[: len(template) - 8 * values.size]
        return prefix + values.tobytes()

    def _array(self, label: str, values: FloatArray) -> object:
        t = self._types
        size = values.size
        dim = t["std_msgs/msg/MultiArrayDimension"](label=label, size=size, stride=size)
        layout = t["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
        return t["std_msgs/msg/Float64MultiArray"](layout=layout, data=values)

    def joint_state(
        self, stamp_ns: int, names: Sequence[str], positions: FloatArray, velocities: FloatArray
    ) -> bytes:
        t = self._types
        message = t["sensor_msgs/msg/JointState"](
            header=self._header(stamp_ns, ""),
            name=list(names) if len(names) == positions.size else [],
            position=positions,
            velocity=velocities,
            effort=np.empty(0, dtype=np.float64),
        )
        return self.serialize(topics.OBSERVATION.msgtype, message)

    def image(self, stamp_ns: int, view: str, data: bytes, image_format: str) -> bytes:
        message = self._types[topics.IMAGE_TYPE](
            header=self._header(stamp_ns, view),
            format=image_format,
            data=np.frombuffer(data, dtype=np.uint8),
        )
        return self.serialize(topics.IMAGE_TYPE, message)

    def chunk(self, anchor_ns: int, prediction: Prediction, period_s: float) -> bytes:
        """``trajectory_msgs/msg/JointTrajectory``: the steps as the model sent them."""
        t = self._types
        chunk = prediction.action_chunk
        steps = np.asarray(chunk.steps, dtype=np.float64)
        velocity = kind_of(chunk.action_space) == "velocity"
        empty = np.empty(0, dtype=np.float64)
        points = [
            t["trajectory_msgs/msg/JointTrajectoryPoint"](
                positions=empty if velocity else row.copy(),
                velocities=row.copy() if velocity else empty,
                accelerations=empty,
                effort=empty,
                time_from_start=self._duration(round(i * period_s * NS)),
            )
            for i, row in enumerate(steps)
        ]
        message = t[topics.CHUNK.msgtype](
            header=self._header(anchor_ns, ""),
            joint_names=[f"a{i}" for i in range(steps.shape[1])],
            points=points,
        )
        return self.serialize(topics.CHUNK.msgtype, message)

    def status(
        self, name: str, message: str, values: Mapping[str, object], *, level: int = OK,
        hardware_id: str = "",
    ) -> bytes:  # fmt: skip
        """``diagnostic_msgs/msg/DiagnosticStatus``, each value as text."""
        t = self._types
        key_value = t["diagnostic_msgs/msg/KeyValue"]
        pairs = [key_value(key=k, value=_text(v)) for k, v in values.items()]
        status = t[topics.HOLD.msgtype](
            level=level, name=name, message=message, hardware_id=hardware_id, values=pairs
        )
        return self.serialize(topics.HOLD.msgtype, status)

    def _header(self, stamp_ns: int, frame_id: str) -> object:
        t = self._types
        stamp = t["builtin_interfaces/msg/Time"](sec=stamp_ns // NS, nanosec=stamp_ns % NS)
        return t["std_msgs/msg/Header"](stamp=stamp, frame_id=frame_id)

    def _duration(self, ns: int) -> object:
        return self._types["builtin_interfaces/msg/Duration"](sec=ns // NS, nanosec=ns % NS)


def _text(value: object) -> str:
    if isinstance(value, float):
        return repr(value)  # round-trips exactly
    if isinstance(value, (list, tuple)):
        return ",".join(_text(v) for v in value)
    return str(value)
