"""The node's flight recorder, ROS-free: ``Control.step`` on the real simulator and engine (the
rig of test_ros_control.py, wired as the node wires it), recording through the real
``FlightRecorder``; the bag read back with rosbags and, independently, with ``mcap`` +
``mcap_ros2``. The parameters that turn it on, and what configure refuses.

The node on real rclpy records the same way: test_ros_real_recording.py.
"""

from __future__ import annotations

import importlib.abc
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore
from support import TEST_KEY
from support.control_rig import ABSOLUTE, Rig

from sequence_ai_core.errors import ConfigurationError
from sequence_ai_core.recording import topics
from sequence_ai_core.recording.config import DEFAULT_IMAGE_HZ, RecordConfig
from sequence_ai_core.recording.extras import needs
from sequence_ai_ros import diagnostics, parameters
from sequence_ai_ros.episode_recording import EpisodeRecordings
from sequence_ai_sim import GatewaySimulator

TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)
#: In the instruction every request sends, so the recorder has the key to keep out.
INSTRUCTION = f"stack the cups (token {TEST_KEY})"


def raw_params(**changes: Any) -> dict[str, Any]:
    values = {spec.name: spec.default for spec in parameters.PARAMETERS}
    values.update(changes)
    return values


@pytest.fixture
def recorded(sim: GatewaySimulator, tmp_path: Path) -> Any:
    made: list[Rig] = []

    def make(**changes: Any) -> Rig:
        made.append(Rig(sim, record_dir=str(tmp_path / "bags"), instruction=INSTRUCTION, **changes))
        return made[-1]

    yield make
    for each in made:
        each.close()


def finish(run: Rig, reason: str = "completed") -> Path:
    """End the episode as the node does (the core Episode's outcome, then ``end``), wait for
    the bag (``close``, as cleanup does) and return its directory."""
    status = run.recordings.status()
    assert status is not None
    run.episode.stop(reason)  # type: ignore[arg-type]
    run.recordings.end()
    assert run.recordings.close(wait_s=10.0)
    assert run.warnings == []
    return Path(status.path)


def rosbags_messages(bag: Path) -> list[tuple[str, int, Any]]:
    """(topic, receive time, message) in bag order, deserialized by rosbags."""
    with Reader(bag) as reader:
        return [
            (c.topic, stamp, TYPESTORE.deserialize_cdr(raw, c.msgtype))
            for c, stamp, raw in reader.messages()
        ]


def mcap_messages(bag: Path) -> list[tuple[str, int, Any]]:
    """The same, read by the independent mcap reader and decoded from the schemas in the file."""
    (path,) = bag.glob("*.mcap")
    with path.open("rb") as stream:
        reader = make_reader(stream, decoder_factories=[DecoderFactory()])
        return [
            (channel.topic, message.log_time, decoded)
            for _, channel, message, decoded in reader.iter_decoded_messages(log_time_order=True)
        ]


def on(messages: list[tuple[str, int, Any]], topic: str) -> list[Any]:
    return [message for name, _, message in messages if name == topic]


def assert_key_absent(bag: Path) -> None:
    files = [p for p in bag.rglob("*") if p.is_file()]
    assert files and all(TEST_KEY.encode() not in p.read_bytes() for p in files)


@pytest.mark.timing
def test_every_command_recorded_is_the_one_published_field_by_field(recorded: Any) -> None:
    run = recorded(max_actions=20)
    steps = run.run(300)
    assert steps[-1].ends and steps[-1].reason == "completed"
    bag = finish(run)
    published = run.action.messages
    assert len(published) == 20  # the gripper in the action vector: one message a tick
    for read in (rosbags_messages(bag), mcap_messages(bag)):
        commands = on(read, topics.COMMAND.name)
        assert len(commands) == len(published)
        for command, sent in zip(commands, published, strict=True):
            # bit for bit, in order: the values the publisher was handed
            assert np.array_equal(np.asarray(command.data), np.asarray(sent.data))
            (dim,) = command.layout.dim
            (sent_dim,) = sent.layout.dim
            assert dim.label == "joint_velocity"  # the bag labels the action space
            assert (dim.size, dim.stride) == (sent_dim.size, sent_dim.stride) == (8, 8)
            assert command.layout.data_offset == sent.layout.data_offset == 0
        (outcome,) = on(read, topics.OUTCOME.name)
        values = {kv.key: kv.value for kv in outcome.values}
        assert outcome.message == "completed" and values["actions"] == "20"
        (account,) = on(read, topics.RECORDING.name)
        assert {kv.key: kv.value for kv in account.values}["dropped"] == "0"
        (request, *_) = on(read, topics.REQUEST.name)
        instruction = {kv.key: kv.value for kv in request.values}["instruction"]
        assert instruction == INSTRUCTION.replace(TEST_KEY, "***")
    assert_key_absent(bag)


def test_a_command_split_over_two_topics_is_recorded_whole(recorded: Any) -> None:
    """gripper_topic: the arm's values on action, the gripper's on its own topic; the bag
    has the one command they were cut from."""
    run = recorded(max_actions=12, gripper_topic="gripper")
    assert run.run(300)[-1].reason == "completed"
    bag = finish(run)
    arm, gripper = run.action.messages, run.gripper.messages
    assert len(arm) == len(gripper) == 12
    commands = on(rosbags_messages(bag), topics.COMMAND.name)
    sent = [np.concatenate([a.data, g.data]) for a, g in zip(arm, gripper, strict=True)]
    assert len(commands) == 12
    assert all(np.array_equal(c.data, s) for c, s in zip(commands, sent, strict=True))


@pytest.mark.parametrize("lateness", [1.0, 2.5])
def test_a_chunk_trajectory_records_the_step_each_tick_plays(
    recorded: Any, lateness: float
) -> None:
    """trajectory_mode chunk: a trajectory per chunk, one command per tick, each the point
    of the trajectory in force that the controller is at (absolute targets, so a point's
    positions are the step itself), in order and none twice; also when every tick comes
    late (``lateness`` periods) and skips steps."""
    run = recorded(max_actions=40, **ABSOLUTE)
    playing: list[tuple[Any, Any]] = []  # the trajectories in force at each committed tick
    for _ in range(400):
        run.feed()
        actions = run.episode.actions
        step = run.control.step(run.engine, run.episode, run.checks, time.monotonic())
        if run.episode.actions > actions:
            playing.append((run.action.messages[-1], run.gripper.messages[-1]))
        if step.ends:
            break
        time.sleep(step.period_s * lateness)
    assert step.ends and step.reason == "completed"
    assert 1 < len(run.action.messages) < 40  # whole chunks, not a message a tick
    commands = on(rosbags_messages(finish(run)), topics.COMMAND.name)
    assert len(commands) == len(playing) == 40
    position, previous = -1, None
    for command, (arm, gripper) in zip(commands, playing, strict=True):
        if arm is not previous:
            position = -1  # a new trajectory replaced the one before
        rows = [np.asarray(point.positions) for point in arm.points]
        later = [i for i, row in enumerate(rows) if i > position]
        matches = [i for i in later if np.array_equal(rows[i], command.data[:6])]
        assert matches, (command.data, rows)
        position = matches[0]
        assert np.array_equal(gripper.points[position].positions, command.data[6:])
        previous = arm


def test_without_record_dir_nothing_is_recorded(sim: GatewaySimulator, tmp_path: Path) -> None:
    run = Rig(sim, max_actions=3)
    try:
        assert run.config.record is None and run.recordings.status() is None
        assert run.run(200)[-1].reason == "completed"
        run.recordings.end()
        assert run.recordings.status() is None
    finally:
        run.close()


# ---------------------------------------------------------------------- parameters


def test_the_recording_parameters_are_the_core_recorders_settings() -> None:
    specs = {spec.name: spec for spec in parameters.PARAMETERS}
    assert (specs["record_dir"].kind, specs["record_dir"].default) == ("string", "")
    assert specs["record_image_hz"].kind == "double"
    assert specs["record_image_hz"].default == DEFAULT_IMAGE_HZ == RecordConfig(".").image_hz
    assert parameters.parse(raw_params()).record is None  # off by default
    joints = [f"j{i}" for i in range(7)]
    config = parameters.parse(raw_params(record_dir="/data/bags", joint_names=joints)).record
    assert config == RecordConfig("/data/bags", joint_names=tuple(joints))
    assert parameters.parse(raw_params(record_dir=" ", record_image_hz=0)).record is None


def test_record_dir_is_made_absolute_and_home_expanded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    home = parameters.parse(raw_params(record_dir="~/bags")).record
    relative = parameters.parse(raw_params(record_dir="runs/today")).record
    assert home is not None and relative is not None
    assert home.directory == str(tmp_path / "home" / "bags")
    assert relative.directory == str(tmp_path / "runs" / "today")


@pytest.mark.parametrize("hz", [-1.0, math.nan, math.inf])
@pytest.mark.parametrize("directory", ["", "/data/bags"])
def test_a_bad_image_rate_is_a_parameter_error_with_the_cores_reason(
    hz: float, directory: str
) -> None:
    """Refused whether or not recording is on: a wrong value is wrong before it is used."""
    with pytest.raises(ValueError) as core:
        RecordConfig(".", image_hz=hz)
    with pytest.raises(parameters.ParameterError) as node:
        parameters.parse(raw_params(record_dir=directory, record_image_hz=hz))
    assert node.value.name == "record_image_hz"
    assert str(core.value).endswith(node.value.problem)
    assert str(node.value).startswith("parameter 'record_image_hz': must be a finite number >= 0")


def test_a_record_dir_that_cannot_be_made_refuses_configure(tmp_path: Path) -> None:
    occupied = tmp_path / "a_file"
    occupied.write_text("not a directory")
    recordings = EpisodeRecordings(lambda text: None)
    for where in (occupied, occupied / "bags"):
        with pytest.raises(parameters.ParameterError) as refused:
            recordings.configure(RecordConfig(str(where)))
        assert refused.value.name == "record_dir" and str(where) in refused.value.problem
    made = tmp_path / "new" / "bags"
    recordings.configure(RecordConfig(str(made)))
    assert made.is_dir()


class NoRosbags(importlib.abc.MetaPathFinder):
    """An interpreter without rosbags installed, as far as an import can tell."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name.split(".")[0] == "rosbags":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


def test_recording_without_rosbags_refuses_configure_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [m for m in sys.modules if m == "rosbags" or m.startswith("rosbags.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [NoRosbags(), *sys.meta_path])
    recordings = EpisodeRecordings(lambda text: None)
    recordings.configure(None)  # not recording: rosbags is never asked for
    with pytest.raises(ConfigurationError) as refused:
        recordings.configure(RecordConfig(str(tmp_path / "bags")))
    text = str(refused.value)
    assert text == needs("recording", "rosbags", "record") and "\n" not in text
    assert not (tmp_path / "bags").exists()  # refused before anything was made


# ---------------------------------------------------------------------- diagnostics


def test_diagnostics_show_the_bag_and_its_drops_redacted() -> None:
    base = diagnostics.Health("active", "pi05-droid", False, 1, 20, False)
    bag = f"/data/{TEST_KEY}/20260101-000000.000_pi05-droid"
    clean = diagnostics.RecordingStatus(bag, 0)
    level, _, values = diagnostics.evaluate(
        diagnostics.Health(**{**vars(base), "recording": clean, "secret": TEST_KEY})
    )
    found = dict(values)
    assert level == diagnostics.OK
    assert found["recording"] == bag.replace(TEST_KEY, "***") and found["recording_dropped"] == "0"
    assert "recording_stopped" not in found
    lossy = diagnostics.RecordingStatus("/data/bag", 7, "size cap of 10 bytes reached")
    level, message, values = diagnostics.evaluate(
        diagnostics.Health(**{**vars(base), "recording": lossy})
    )
    assert level == diagnostics.WARN and "recording dropped 7 messages" in message
    assert dict(values)["recording_stopped"] == "size cap of 10 bytes reached"
    _, _, values = diagnostics.evaluate(base)
    assert not any(key.startswith("recording") for key, _ in values)


@pytest.mark.parametrize("changes", [{}, ABSOLUTE], ids=["per-tick", "chunk-trajectory"])
def test_the_report_of_a_node_episode_counts_what_its_outcome_counted(
    recorded: Any, changes: dict[str, Any]
) -> None:
    """`sequence-ai report` on the node's bags: the same numbers as the episode's outcome."""
    from sequence_ai_core.recording.episode_log import read_episode
    from sequence_ai_core.recording.measures import measure

    run = recorded(max_actions=40, **changes)
    assert run.run(400)[-1].reason == "completed"
    bag = finish(run)
    outcome = run.episode.outcome
    measures = measure(read_episode(bag))
    for name in ("actions", "chunks", "requests", "underruns", "stalls", "blended_seams"):
        assert getattr(measures, name) == getattr(outcome, name), name
    for name in ("max_seam_jump", "max_seam_step", "duty_cycle"):
        assert getattr(measures, name) == pytest.approx(getattr(outcome, name)), name
    assert measures.dropped == 0 and measures.unattributed == 0
