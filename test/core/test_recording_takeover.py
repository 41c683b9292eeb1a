"""The flight recorder through a takeover: the takeover and release events, the arm's joint
readings, its gripper and end-effector pose (when the observation has them, never a zero in
their place) and camera images while a person has it (images under the requests' per-view
rate), the operator's commands, the release hold and an outcome with the takeover fields and a
label, each at its stamp, in a real rosbag2 bag read back by the ``mcap`` library's decoder
and by the project's own reader. The key is in no byte; the queue and the size cap bound the
new records as every other.

The recorder is fed on the control thread's side as the episode feeds it, on a driver clock
set by hand, so every stamp is known.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from rosbags.rosbag2 import Reader
from support import TEST_KEY
from support.recorded import Message, only, read_bag, values_of

from sequence_ai_core.frames import RawFrame
from sequence_ai_core.playback.journal import Journal
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.recording import topics
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_core.recording.episode_log import read_episode
from sequence_ai_core.recording.recorder import FlightRecorder
from sequence_ai_core.recording.takeovers import takeovers
from sequence_ai_core.types import ImageFrame, Observation, Proprioception

MODEL = "pi05-droid"
SPACE = "joint_velocity"
JOINTS = ("j0", "j1", "j2")
SPACEMOUSE = "/spacemouse/command"
#: Driver seconds: the takeover, the release (2.0 s later), the outcome.
TAKEOVER, RELEASE, END = 100.1, 102.1, 102.6
#: The joint readings while taken over, at 10 Hz (exact decimals, so the image rule's
#: ``now + 0.5`` lands on them).
OBSERVED = [(1001 + k) / 10 for k in range(20)]
#: The operator's commands at 20 Hz; the last five from a device whose label holds the key.
OPERATED = [(2002 + k) / 20 for k in range(40)]


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (32, 24), (10, 200, 30)).save(out, format="PNG")
    return out.getvalue()


PNG = _png()


def _gripper(t: float) -> float:
    """The gripper at ``t``: thirds, which only an exact text gives back (0.0 at the first
    request, a real zero)."""
    return (t - 100.0) / 3


def _pose(t: float) -> list[float]:
    """The end-effector pose at ``t``: x, y, z, then a quaternion."""
    return [t, -t / 3, 0.25, 0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)]


def _observation(t: float) -> Observation:
    """The arm at ``t``: joints, gripper and pose from ``t``, a raw frame (encoded when first
    read) and a PNG."""
    pixels = np.full((48, 64, 3), int(t * 10) % 256, dtype=np.uint8)
    frames = (
        RawFrame("front", pixels, size=None, timestamp_ms=None),
        ImageFrame("wrist", PNG),
    )
    proprio = Proprioception(
        joint_positions=[t, -t, 0.5], joint_velocities=[0.1, 0.2, 0.3],
        end_effector_pose=_pose(t), gripper=_gripper(t),
    )  # fmt: skip
    return Observation(proprio, frames)


def _arm_only(gripper: float | None, pose: Any) -> Observation:
    """An observation with one joint and only the gripper and pose given."""
    return Observation(Proprioception([0.5], gripper=gripper, end_effector_pose=pose))


def _operator_source(k: int) -> str:
    return SPACEMOUSE if k < 35 else f"leader {TEST_KEY}"


def _outcome() -> RunOutcome:
    return RunOutcome(
        actions=10, chunks=2, elapsed_s=2.6, underruns=0, underrun_s=0.0, max_gap_s=0.02,
        stopped_early=True, reason="stopped", max_seam_jump=0.0, action_space=SPACE,
        skipped_stale=0, retries=0, requests=2, latency_p50_s=0.3, latency_p95_s=0.3,
        staleness_p50_s=0.3, staleness_p95_s=0.3, duty_cycle=1.0,
        error=RuntimeError(f"device said {TEST_KEY}"), takeovers=1, takeover_s=2.0,
        max_resume_s=0.3, max_resume_jump=0.4, label="success",
    )  # fmt: skip


def feed_a_takeover(recorder: FlightRecorder, now: list[float]) -> None:
    """Five commands, a takeover (20 joint readings, 40 operator commands), a release with
    its hold and a fresh request, five commands, the outcome."""
    journal: Journal = recorder
    journal.request(100.0, 1, _observation(100.0))
    for i in range(5):
        journal.command(100.0 + i * 0.02, np.full(3, float(i)))
    journal.event(TAKEOVER, "takeover", {})
    calls = [(t, -1) for t in OBSERVED] + [(t, k) for k, t in enumerate(OPERATED)]
    for t, k in sorted(calls):  # a reading before a command of the same time
        if k < 0:
            journal.observed(t, _observation(t))
        else:
            journal.operator(t, np.array([k * 0.01, 0.0, -k * 0.01]), _operator_source(k))
    journal.event(RELEASE, "release", {"takeover_s": RELEASE - TAKEOVER})
    now[0] = RELEASE
    journal.hold("release")
    journal.request(RELEASE, 2, _observation(RELEASE))
    for i in range(5):
        journal.command(102.4 + i * 0.02, np.full(3, -float(i)))
    now[0] = END
    journal.outcome(_outcome())


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[FlightRecorder, dict[str, list[Message]]]:
    now = [100.0]
    config = RecordConfig(tmp_path, image_hz=2.0, joint_names=JOINTS)
    recorder = FlightRecorder(
        config, model=MODEL, clock=lambda: now[0], secrets=[TEST_KEY], views=("front", "wrist")
    )
    feed_a_takeover(recorder, now)
    assert recorder.close()
    assert recorder.dropped == 0
    return recorder, read_bag(recorder.path)


def _offset(bag: dict[str, list[Message]]) -> int:
    """The recording's clock offset (epoch ns less driver ns), from the first command."""
    return bag[topics.COMMAND.name][0].log_time_ns - round(100.0 * 1e9)


def _ns(offset: int, t: float) -> int:
    return offset + round(t * 1e9)


def _stamp(message: Any) -> int:
    stamp = message.header.stamp
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def test_the_arm_s_readings_while_taken_over_are_on_their_own_topic_at_their_stamps(
    recorded: tuple[FlightRecorder, dict[str, list[Message]]],
) -> None:
    _, bag = recorded
    offset = _offset(bag)
    readings = bag[topics.HUMAN_JOINTS.name]
    assert [m.log_time_ns for m in readings] == [_ns(offset, t) for t in OBSERVED]
    for t, reading in zip(OBSERVED, readings, strict=True):
        state = reading.message
        assert _stamp(state) == _ns(offset, t)
        assert list(state.name) == list(JOINTS)
        assert list(state.position) == [t, -t, 0.5]
        assert list(state.velocity) == [0.1, 0.2, 0.3]
    # the requests' readings stay on theirs
    assert len(bag[topics.OBSERVATION.name]) == len(bag[topics.REQUEST.name]) == 2


def test_the_gripper_and_the_pose_while_taken_over_are_beside_each_reading(
    recorded: tuple[FlightRecorder, dict[str, list[Message]]],
) -> None:
    _, bag = recorded
    offset = _offset(bag)
    readings, states = bag[topics.HUMAN_JOINTS.name], bag[topics.HUMAN_STATE.name]
    assert [m.log_time_ns for m in states] == [_ns(offset, t) for t in OBSERVED]
    for t, reading, state in zip(OBSERVED, readings, states, strict=True):
        assert state.log_time_ns == _stamp(reading.message)  # stamped as the reading is
        assert (state.message.name, state.message.message) == ("arm", "")
        values = values_of(state.message)
        assert list(values) == ["gripper", "end_effector_pose"]
        assert float(values["gripper"]) == _gripper(t)
        assert [float(v) for v in values["end_effector_pose"].split(",")] == _pose(t)
    # the requests' gripper and pose stay on theirs: the real zero of the first as "0.0"
    first, second = (values_of(m.message) for m in bag[topics.REQUEST.name])
    assert first["gripper"] == "0.0" and float(second["gripper"]) == _gripper(RELEASE)
    assert [float(v) for v in second["end_effector_pose"].split(",")] == _pose(RELEASE)


def test_a_request_and_a_reading_of_one_observation_write_gripper_and_pose_alike(
    tmp_path: Path,
) -> None:
    recorder = FlightRecorder(RecordConfig(tmp_path, image_hz=0.0), model=MODEL)
    pose = np.array([0.1, 0.2, 1 / 3, 0.0, 0.0, 0.0, 1.0], dtype=np.float32)
    observation = _arm_only(0.1 + 0.2, pose)
    journal: Journal = recorder
    journal.request(1.0, 1, observation)
    journal.observed(1.1, observation)
    assert recorder.close()
    bag = read_bag(recorder.path)
    request = values_of(only(bag[topics.REQUEST.name]))
    state = values_of(only(bag[topics.HUMAN_STATE.name]))
    assert state == {key: request[key] for key in ("gripper", "end_effector_pose")}
    # each float's repr: exact, the float32 pose's values as the floats they are
    assert state["gripper"] == "0.30000000000000004"
    assert state["end_effector_pose"] == ",".join(repr(float(v)) for v in pose)


def test_a_reading_records_only_the_gripper_or_the_pose_it_has_and_nothing_without(
    tmp_path: Path,
) -> None:
    pose = [0.4, 0.5, 0.6, 1.0, 0.0, 0.0, 0.0]
    cases = [(1.0, 0.75, None), (1.1, None, pose), (1.2, None, None), (1.3, 0.0, pose)]
    recorder = FlightRecorder(RecordConfig(tmp_path), model=MODEL)
    journal: Journal = recorder
    for t, gripper, arm_pose in cases:
        journal.observed(t, _arm_only(gripper, arm_pose))
    assert recorder.close()
    bag = read_bag(recorder.path)
    assert len(bag[topics.HUMAN_JOINTS.name]) == 4
    first = bag[topics.HUMAN_JOINTS.name][0].log_time_ns
    states = bag[topics.HUMAN_STATE.name]
    due = [round(t * 1e9) - round(1e9) for t in (1.0, 1.1, 1.3)]
    assert [m.log_time_ns - first for m in states] == due
    text = ",".join(map(repr, pose))
    assert [values_of(m.message) for m in states] == [
        {"gripper": "0.75"},
        {"end_effector_pose": text},
        {"gripper": "0.0", "end_effector_pose": text},  # a real zero is recorded
    ]


def test_without_a_gripper_or_a_pose_the_topic_is_made_before_and_stays_empty(
    tmp_path: Path,
) -> None:
    """The topic is made with the bag, before the episode (never by a first message); a bag
    whose readings had neither reads back as before."""
    recorder = FlightRecorder(RecordConfig(tmp_path, image_hz=0.0), model=MODEL)
    journal: Journal = recorder
    journal.event(1.0, "takeover", {})
    for k in range(5):
        journal.observed(1.0 + k / 10, Observation(Proprioception([k / 10, 0.5])))
    journal.event(1.5, "release", {"takeover_s": 0.5})
    assert recorder.close()
    with Reader(recorder.path) as reader:
        counts = {c.topic: (c.msgtype, c.msgcount) for c in reader.connections}
    assert counts[topics.HUMAN_STATE.name] == (topics.HUMAN_STATE.msgtype, 0)
    assert counts[topics.HUMAN_JOINTS.name] == (topics.HUMAN_JOINTS.msgtype, 5)
    assert topics.HUMAN_STATE.name not in read_bag(recorder.path)
    episode = read_episode(recorder.path)
    assert episode.human_t.size == 5 and len(takeovers(episode)) == 1


def test_the_pose_is_copied_off_the_caller_s_buffer(tmp_path: Path) -> None:
    """A driver that reuses its pose array between observations: the bag holds the pose each
    reading had when it was journaled."""
    recorder = FlightRecorder(RecordConfig(tmp_path), model=MODEL)
    journal: Journal = recorder
    buffer = np.zeros(7)
    for k in range(3):
        buffer[:] = k + 0.5
        journal.observed(1.0 + k / 10, _arm_only(None, buffer))
    buffer[:] = -1.0  # before the writer thread's first poll
    assert recorder.close()
    states = read_bag(recorder.path)[topics.HUMAN_STATE.name]
    assert [values_of(m.message)["end_effector_pose"] for m in states] == [
        ",".join([repr(k + 0.5)] * 7) for k in range(3)
    ]


def test_images_while_taken_over_share_the_requests_per_view_rate(
    recorded: tuple[FlightRecorder, dict[str, list[Message]]],
) -> None:
    """2 images a second a view: the request at 100.0 s, then every 0.5 s of the readings;
    the request after the release (102.1 s) comes before the view's turn (102.5 s)."""
    _, bag = recorded
    offset = _offset(bag)
    due = [100.0, 100.5, 101.0, 101.5, 102.0]
    front, wrist = bag[topics.IMAGE_PREFIX + "front"], bag[topics.IMAGE_PREFIX + "wrist"]
    assert [m.log_time_ns for m in front] == [_ns(offset, t) for t in due]
    assert [m.log_time_ns for m in wrist] == [_ns(offset, t) for t in due]
    for message in front:  # raw pixels, encoded as JPEG by the writer
        assert message.message.format == "jpeg"
        with Image.open(io.BytesIO(bytes(message.message.data))) as image:
            assert (image.format, image.size) == ("JPEG", (64, 48))
    assert {bytes(m.message.data) for m in wrist} == {PNG}
    assert {m.message.format for m in wrist} == {"png"}
    assert [_stamp(m.message) for m in wrist] == [_ns(offset, t) for t in due]


def test_the_operator_s_commands_are_recorded_as_sent_with_their_source(
    recorded: tuple[FlightRecorder, dict[str, list[Message]]],
) -> None:
    _, bag = recorded
    offset = _offset(bag)
    commands = bag[topics.OPERATOR.name]
    assert [m.log_time_ns for m in commands] == [_ns(offset, t) for t in OPERATED]
    for k, message in enumerate(commands):
        assert list(message.message.data) == [k * 0.01, 0.0, -k * 0.01]
        label = SPACEMOUSE if k < 35 else "leader ***"
        assert message.message.layout.dim[0].label == label
        assert message.message.layout.dim[0].size == 3
    # the policy's commands stay on /command, labelled with the action space
    assert len(bag[topics.COMMAND.name]) == 10


def test_the_takeover_its_release_the_hold_and_the_outcome_are_recorded(
    recorded: tuple[FlightRecorder, dict[str, list[Message]]],
) -> None:
    _, bag = recorded
    offset = _offset(bag)
    events = bag[topics.EVENTS_TOPIC.name]
    assert [(m.message.name, m.log_time_ns) for m in events] == [
        ("takeover", _ns(offset, TAKEOVER)),
        ("release", _ns(offset, RELEASE)),
    ]
    assert values_of(events[0].message) == {}
    assert float(values_of(events[1].message)["takeover_s"]) == pytest.approx(2.0)
    hold = bag[topics.HOLD.name]
    assert [(m.message.message, m.log_time_ns) for m in hold] == [("release", _ns(offset, RELEASE))]
    outcome = bag[topics.OUTCOME.name]
    assert [m.log_time_ns for m in outcome] == [_ns(offset, END)]
    values = values_of(only(outcome))
    assert (values["takeovers"], values["label"]) == ("1", "success")
    assert float(values["takeover_s"]) == 2.0 and float(values["max_resume_s"]) == 0.3
    assert float(values["max_resume_jump"]) == 0.4
    assert values["error"] == "RuntimeError: device said ***"


def test_the_project_s_reader_finds_the_takeover_and_the_operator_s_commands(
    recorded: tuple[FlightRecorder, dict[str, list[Message]]],
) -> None:
    recorder, _ = recorded
    episode = read_episode(recorder.path)
    (span,) = takeovers(episode)
    assert span.end_t is not None
    assert span.end_t - span.start_t == pytest.approx(RELEASE - TAKEOVER, abs=1e-6)
    assert episode.human_t.size == len(OBSERVED) and episode.operator_t.size == len(OPERATED)
    assert set(episode.operator_sources) == {SPACEMOUSE, "leader ***"}
    assert episode.hold_reasons == ("release",)
    assert episode.outcome["label"] == "success"


def test_the_key_is_in_no_byte_of_a_bag_with_a_takeover(
    recorded: tuple[FlightRecorder, dict[str, list[Message]]],
) -> None:
    recorder, _ = recorded
    files = list(recorder.path.iterdir())
    assert len(files) == 2
    for path in files:
        assert TEST_KEY.encode() not in path.read_bytes()


def test_a_full_queue_drops_and_counts_readings_and_operator_commands(tmp_path: Path) -> None:
    config = RecordConfig(tmp_path, queue_limit=5, image_hz=0.0)
    recorder = FlightRecorder(config, model=MODEL)
    journal: Journal = recorder
    for i in range(100):  # a burst far faster than the writer's 50 ms poll
        journal.observed(float(i), _observation(float(i)))
        journal.operator(float(i), np.full(3, float(i)), SPACEMOUSE)
    assert recorder.close()
    bag = read_bag(recorder.path)
    written = len(bag.get(topics.HUMAN_JOINTS.name, [])) + len(bag.get(topics.OPERATOR.name, []))
    assert recorder.dropped > 0 and written + recorder.dropped == 200
    assert values_of(only(bag[topics.RECORDING.name]))["dropped"] == str(recorder.dropped)
    assert not any(name.startswith(topics.IMAGE_PREFIX) for name in bag)  # image_hz 0


def test_the_size_cap_stops_operator_commands_and_the_outcome_is_still_written(
    tmp_path: Path,
) -> None:
    now = [0.0]
    recorder = FlightRecorder(
        RecordConfig(tmp_path, max_bytes=3000), model=MODEL, clock=lambda: now[0]
    )
    journal: Journal = recorder
    for i in range(200):
        journal.operator(i * 0.05, np.full(6, float(i)), SPACEMOUSE)
    now[0] = 10.0
    journal.outcome(_outcome())
    assert recorder.close()
    bag = read_bag(recorder.path)
    recorded = len(bag[topics.OPERATOR.name])
    assert 0 < recorded < 200 and recorded + recorder.dropped == 200
    assert "size cap" in recorder.stopped
    assert values_of(only(bag[topics.OUTCOME.name]))["label"] == "success"
    counts = values_of(only(bag[topics.RECORDING.name]))
    assert int(counts["dropped"]) == recorder.dropped and "cap" in counts["stopped"]
    assert math.isfinite(float(values_of(only(bag[topics.OUTCOME.name]))["takeover_s"]))


def test_an_operator_command_with_no_values_is_recorded_empty(tmp_path: Path) -> None:
    """A device message that commands nothing (a trajectory without points) still says when
    and from where."""
    recorder = FlightRecorder(RecordConfig(tmp_path), model=MODEL)
    journal: Journal = recorder
    journal.operator(1.0, np.empty(0), SPACEMOUSE)
    journal.operator(1.1, np.array([[0.5, 0.25]]), SPACEMOUSE)  # flattened, as sent
    assert recorder.close()
    first, second = read_bag(recorder.path)[topics.OPERATOR.name]
    assert list(first.message.data) == [] and first.message.layout.dim[0].label == SPACEMOUSE
    assert list(second.message.data) == [0.5, 0.25]
    assert second.log_time_ns - first.log_time_ns == round(1.1e9) - round(1.0e9)
