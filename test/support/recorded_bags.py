"""Recorded episodes for the report's tests, written with rosbags exactly as ``topics`` says.

``EpisodeBag`` collects messages at times in seconds (0: the first message) and writes one
rosbag2 bag (version 8, MCAP, CDR, Humble's definitions); every epoch time is ``START_S``
plus the episode's. ``record_engine`` drives the real playback engine on the exact fake clock
of ``seam_rig`` and records what it did, so that the report's numbers can be held against the
engine's own ``RunOutcome``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from sequence_ai_core.action_spaces import kind_of, skips_stale
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.recording import topics
from sequence_ai_core.types import FloatArray, Observation, Prediction, Proprioception
from support.engine_clock import Clock, NoHttp
from support.seam_rig import HZ, STEPS, Scripted

STORE = get_typestore(Stores.ROS2_HUMBLE)
TYPES = STORE.types
#: Epoch seconds of the episode's time 0 (a whole second, so stamps are exact).
START_S = 1_700_000_000


def _ns(t: float) -> int:
    return START_S * 1_000_000_000 + round(t * 1e9)


def _time(t: float) -> Any:
    ns = _ns(t)
    return TYPES["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9)


def _header(t: float, frame: str = "") -> Any:
    return TYPES["std_msgs/msg/Header"](stamp=_time(t), frame_id=frame)


def _status(name: str, message: str = "", **values: object) -> Any:
    pairs = [TYPES["diagnostic_msgs/msg/KeyValue"](key=k, value=str(v)) for k, v in values.items()]
    return TYPES["diagnostic_msgs/msg/DiagnosticStatus"](
        level=0, name=name, message=message, hardware_id="", values=pairs
    )


def _floats(values: Sequence[float] | FloatArray) -> FloatArray:
    return np.asarray(values, dtype=np.float64)


def _joint_state(t: float, positions: Sequence[float]) -> Any:
    return TYPES["sensor_msgs/msg/JointState"](
        header=_header(t), name=[], position=_floats(positions), velocity=_floats([]),
        effort=_floats([]),
    )  # fmt: skip


def _array(values: Sequence[float] | FloatArray, label: str) -> Any:
    data = _floats(values)
    dim = TYPES["std_msgs/msg/MultiArrayDimension"](label=label, size=len(data), stride=1)
    layout = TYPES["std_msgs/msg/MultiArrayLayout"](dim=[dim], data_offset=0)
    return TYPES["std_msgs/msg/Float64MultiArray"](layout=layout, data=data)


class EpisodeBag:
    def __init__(self, gripper_dims: Sequence[int] | None = ()) -> None:
        #: None: the chunk metadata names no gripper dims (an older recorder).
        self.gripper_dims = gripper_dims
        self.messages: list[tuple[float, topics.Topic, Any]] = []
        self.dropped = 0

    def add(self, t: float, topic: topics.Topic, message: Any) -> None:
        self.messages.append((t, topic, message))

    def observation(self, t: float, positions: Sequence[float], request: int) -> None:
        self.add(t, topics.OBSERVATION, _joint_state(t, positions))
        self.add(t, topics.REQUEST, _status("request", "", request=request, images=""))

    def human(self, t: float, positions: Sequence[float]) -> None:
        """The arm's joint reading while a person has it."""
        self.add(t, topics.HUMAN_JOINTS, _joint_state(t, positions))

    def operator(self, t: float, values: Sequence[float], source: str) -> None:
        self.add(t, topics.OPERATOR, _array(values, source))

    def chunk(
        self,
        t: float,
        rows: FloatArray,
        *,
        anchor: float,
        space: str,
        request: int,
        seq: int,
        observed_at: float,
        hz: float = HZ,
        model: str = "m",
    ) -> None:
        velocity = kind_of(space) == "velocity"
        empty = _floats([])
        points = [
            TYPES["trajectory_msgs/msg/JointTrajectoryPoint"](
                positions=empty if velocity else _floats(row),
                velocities=_floats(row) if velocity else empty,
                accelerations=empty,
                effort=empty,
                time_from_start=TYPES["builtin_interfaces/msg/Duration"](
                    sec=int(i / hz), nanosec=round((i / hz - int(i / hz)) * 1e9)
                ),
            )
            for i, row in enumerate(np.asarray(rows, dtype=np.float64))
        ]
        names = [f"a{i}" for i in range(np.shape(rows)[1])]
        trajectory = TYPES["trajectory_msgs/msg/JointTrajectory"](
            header=_header(anchor), joint_names=names, points=points
        )
        self.add(t, topics.CHUNK, trajectory)
        info: dict[str, object] = dict(
            request=request, seq=seq, request_id=f"r{request}", model=model,
            action_space=space, hz=hz, steps=len(points), latency_s=t - observed_at,
            observed_at_s=repr(START_S + observed_at), anchor_s=repr(START_S + anchor),
        )  # fmt: skip
        if self.gripper_dims is not None:
            info["gripper_dims"] = ",".join(map(str, self.gripper_dims))
        self.add(t, topics.CHUNK_INFO, _status("chunk", "", **info))

    def command(self, t: float, values: Sequence[float] | FloatArray, space: str) -> None:
        self.add(t, topics.COMMAND, _array(values, space))

    def hold(self, t: float, reason: str) -> None:
        self.add(t, topics.HOLD, _status("hold", reason))

    def event(self, t: float, name: str, **values: object) -> None:
        assert name in topics.EVENTS, name
        self.add(t, topics.EVENTS_TOPIC, _status(name, "", **values))

    def outcome(self, t: float, outcome: RunOutcome | Mapping[str, object]) -> None:
        if isinstance(outcome, RunOutcome):
            values = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
        else:
            values = dict(outcome)
        self.add(t, topics.OUTCOME, _status("outcome", str(values.get("reason", "")), **values))

    def write(self, path: Path, *, recording: bool = True) -> Path:
        """The bag at ``path`` (a new directory); ``/recording`` last unless not ``recording``."""
        messages = sorted(self.messages, key=lambda m: m[0])  # stable: same-time order kept
        if recording:
            end = messages[-1][0] if messages else 0.0
            counts = _status("recording", "", written=len(messages) + 1,
                             dropped=self.dropped, stopped="")  # fmt: skip
            messages.append((end, topics.RECORDING, counts))
        with Writer(path, version=8, storage_plugin=StoragePlugin.MCAP) as writer:
            connections: dict[str, Any] = {}
            for t, topic, message in messages:
                if topic.name not in connections:
                    connections[topic.name] = writer.add_connection(
                        topic.name, topic.msgtype, typestore=STORE
                    )
                data = STORE.serialize_cdr(message, topic.msgtype)
                writer.write(connections[topic.name], _ns(t), data)
        return path


class _Requests(Scripted):
    """``Scripted``, keeping when each request observed (its observation's time)."""

    observed: dict[int, float]
    #: Requests answered since the last tick (the engine harvests them on the next).
    answered: list[int]

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        n = self.requests
        self.observed[n] = self.clock.now

        def answer(observation: Observation) -> Any:
            self.answered.append(n)
            return fn(observation)

        return super().submit(answer, *args, **kwargs)


def record_engine(
    path: Path,
    chunk: Callable[[int, float], FloatArray],
    *,
    space: str = "joint_absolute",
    seconds: float = 6.0,
    latency: Callable[[int], float] = lambda n: 0.79,
    config: EngineConfig | None = None,
    started_events: bool = True,
    gripper_dims: Sequence[int] | None = (),
) -> RunOutcome:
    """Play ``seconds`` of the real engine on the exact clock (``seam_rig``: request *n*
    answered with ``chunk(n, observed_at)`` after ``latency(n)``) and record it at ``path``
    as a driver would: every tick's command, underrun, hold and skip. Returns its outcome."""
    clock = Clock()
    gateway = _Requests(clock, chunk, space=space, latency=latency)
    gateway.observed, gateway.answered = {}, []
    accepted: set[int] = set()
    bag = EpisodeBag(gripper_dims)
    settings = dataclasses.replace(
        config or EngineConfig(), expected_covers_s=STEPS / HZ, expected_control_hz=HZ,
        gripper_dims=0, expected_gripper_dims=tuple(gripper_dims or ()),
    )  # fmt: skip
    engine: PlaybackEngine

    def on_chunk(prediction: Prediction) -> None:
        n = int(prediction.id[1:])
        accepted.add(n)
        seq = max(p.seq for p in engine._plan.chunks)  # the plan's newest (the recorder's view)
        planned = next(p for p in engine._plan.chunks if p.seq == seq)
        bag.chunk(
            clock.now, np.asarray(prediction.action_chunk.steps), anchor=planned.anchor,
            space=space, request=n + 1, seq=seq, observed_at=gateway.observed[n],
        )  # fmt: skip

    def observe() -> Observation:
        bag.observation(clock.now, [clock.now], request=gateway.requests + 1)
        return Observation(proprioception=Proprioception(joint_positions=[clock.now]))

    engine = PlaybackEngine(
        NoHttp(), settings, clock=clock, on_chunk=on_chunk,
        on_underrun=lambda gap: bag.event(clock.now, "underrun"), executor=gateway,
    )  # fmt: skip
    held = False
    last_index = -1
    with engine:
        for k in range(round(seconds * HZ)):
            now = k / HZ
            gateway.advance(now)
            result = engine.tick(now, observe)
            for n in gateway.answered:  # answered, harvested this tick, and not planned
                if n not in accepted:
                    bag.event(now, "discarded", request=n + 1, latency_s=now - gateway.observed[n])
            gateway.answered.clear()
            if result.action is None:
                if result.kind == "early":
                    bag.event(now, "early")
                if result.kind == "underrun" and not held:
                    bag.hold(now, "underrun")
                held = held or result.kind == "underrun"
                continue
            held = False
            engine.commit()
            bag.command(now, result.action, space)
            late = 0 if result.new_chunk else result.step_index - last_index - 1
            if result.new_chunk and skips_stale(space) and result.step_index > 0:
                bag.event(now, "skipped_stale", steps=result.step_index)
            if late > 0:
                bag.event(now, "skipped_late", steps=late)
            last_index = result.step_index
            if result.new_chunk and started_events:
                current = engine.current_chunk
                assert current is not None
                bag.event(now, "started", seq=result.chunk_seq, step=result.step_index,
                          anchor_s=repr(START_S + current[1]))  # fmt: skip
        end = round(seconds * HZ) / HZ
        clock.now = end
        outcome = engine.outcome(reason="completed", stopped_early=False)
    bag.outcome(end, outcome)
    bag.write(path)
    return outcome
