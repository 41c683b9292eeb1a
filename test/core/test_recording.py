"""The flight recorder with run(): what act() received, each chunk, each observation, every
hold and the outcome, in a rosbag2 bag that two independent readers open (the ``mcap``
library's decoder here; rosbags, which wrote it, in test_recording_bag.py)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
from support import TEST_KEY
from support.recorded import only, read_bag, record_episode, values_of

from sequence_ai_core.action_spaces import ACTION_SPACES, kind_of
from sequence_ai_core.recording import topics
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_sim import Fault, GatewaySimulator
from sequence_ai_sim.catalogue import CATALOGUE, SimModel

MODEL = "pi05-droid"


def test_every_command_act_received_is_in_the_bag_in_order_and_exactly(
    sim: GatewaySimulator, tmp_path: Path
) -> None:
    started_ns = time.time_ns()
    episode = record_episode(sim.url, MODEL, RecordConfig(tmp_path), max_actions=40)
    ended_ns = time.time_ns()
    bag = read_bag(episode.bag)
    commands = bag[topics.COMMAND.name]
    assert episode.outcome.actions == len(episode.sent) == len(commands) == 40
    for sent, recorded in zip(episode.sent, commands, strict=True):
        assert np.array_equal(np.asarray(recorded.message.data), sent)
        assert recorded.message.layout.dim[0].label == "joint_velocity"
    times = [m.log_time_ns for m in commands]
    assert times == sorted(times) and started_ns <= times[0] and times[-1] <= ended_ns
    assert episode.outcome.recording_dropped == 0
    assert episode.bag.parent == tmp_path and episode.bag.name.endswith("_pi05-droid")


def test_each_chunk_is_recorded_as_sent_with_its_request_and_anchor(
    sim: GatewaySimulator, tmp_path: Path
) -> None:
    episode = record_episode(sim.url, MODEL, RecordConfig(tmp_path), max_actions=40)
    bag = read_bag(episode.bag)
    trajectories, infos = bag[topics.CHUNK.name], bag[topics.CHUNK_INFO.name]
    assert len(trajectories) == len(infos) == len(episode.chunks) >= 2
    period = 1 / CATALOGUE[MODEL].control_hz
    for prediction, trajectory, info in zip(episode.chunks, trajectories, infos, strict=True):
        steps = prediction.action_chunk.steps
        points = trajectory.message.points
        assert len(points) == len(steps)
        for i, (point, row) in enumerate(zip(points, steps, strict=True)):
            assert np.array_equal(np.asarray(point.velocities), row)  # a velocity space
            assert len(point.positions) == 0
            offset = point.time_from_start.sec + point.time_from_start.nanosec / 1e9
            assert offset == pytest.approx(i * period, abs=1e-9)
        values = values_of(info.message)
        assert info.log_time_ns == trajectory.log_time_ns
        assert values["request_id"] == prediction.request_id and values["steps"] == str(len(steps))
        assert float(values["latency_s"]) > 0
        stamp = trajectory.message.header.stamp
        assert float(values["anchor_s"]) == pytest.approx(stamp.sec + stamp.nanosec / 1e9)
        assert 1 <= int(values["request"]) <= episode.outcome.requests


def test_each_request_records_the_joint_reading_and_rate_limited_images(
    sim: GatewaySimulator, tmp_path: Path
) -> None:
    config = RecordConfig(tmp_path, image_hz=1.0)
    episode = record_episode(sim.url, MODEL, config, max_actions=45, instruction="pick")
    bag = read_bag(episode.bag)
    joints, requests = bag[topics.OBSERVATION.name], bag[topics.REQUEST.name]
    assert len(joints) == len(requests) == episode.outcome.requests
    assert [int(values_of(r.message)["request"]) for r in requests] == list(
        range(1, episode.outcome.requests + 1)
    )
    assert values_of(requests[0].message)["instruction"] == "pick"
    assert len(joints[0].message.position) == CATALOGUE[MODEL].action_dim - 1
    sent = {frame.data for frame in episode.frames}
    elapsed = episode.outcome.elapsed_s
    for view in CATALOGUE[MODEL].camera_views:
        images = bag[topics.IMAGE_PREFIX + view]
        assert 1 <= len(images) <= math.floor(elapsed * config.image_hz) + 2
        assert all(bytes(m.message.data) in sent for m in images)
        assert {m.message.format for m in images} == {"jpeg"}
        assert {m.message.header.frame_id for m in images} == {view}


def test_the_outcome_and_the_recorders_counts_end_the_bag(
    sim: GatewaySimulator, tmp_path: Path
) -> None:
    episode = record_episode(sim.url, MODEL, RecordConfig(tmp_path), max_actions=30)
    bag = read_bag(episode.bag)
    outcome = values_of(only(bag[topics.OUTCOME.name]))
    returned = episode.outcome
    assert outcome["reason"] == "completed" and outcome["actions"] == "30"
    assert int(outcome["chunks"]) == returned.chunks
    assert int(outcome["requests"]) == returned.requests
    assert float(outcome["max_seam_jump"]) == returned.max_seam_jump
    assert float(outcome["elapsed_s"]) == returned.elapsed_s
    recording = only(bag[topics.RECORDING.name])
    counts = values_of(recording)
    total = sum(len(messages) for messages in bag.values())
    assert counts == {"written": str(total), "dropped": "0", "stopped": ""}
    last = max(m.log_time_ns for messages in bag.values() for m in messages)
    assert bag[topics.RECORDING.name][0].log_time_ns == last
    assert not bag.get(topics.HOLD.name)  # completed: no hold
    assert episode.holds == 0


def test_an_episode_an_error_ends_records_its_one_hold_and_the_reason(
    clean_env: Path, tmp_path: Path
) -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.02) as server:
        acted: list[np.ndarray] = []

        def act(action: np.ndarray) -> None:
            acted.append(action)
            if len(acted) == 10:
                server.inject(Fault.status(401), times=100)

        episode = record_episode(
            server.url, MODEL, RecordConfig(tmp_path), max_actions=500, act=act
        )
    assert episode.outcome.reason.startswith("raised:") and episode.holds == 1
    bag = read_bag(episode.bag)
    hold = only(bag[topics.HOLD.name])
    assert hold.message == episode.outcome.reason and hold.level == 1
    assert only(bag[topics.OUTCOME.name]).message == episode.outcome.reason
    assert len(bag[topics.COMMAND.name]) == episode.outcome.actions > 0


@pytest.mark.parametrize("space", ACTION_SPACES)
def test_every_action_space_records_its_commands_and_chunks(
    clean_env: Path, tmp_path: Path, space: str
) -> None:
    model = SimModel(f"rec-{space}", "sim", "droid", space, 7, 30.0, 10, ("front",))
    recorded: list[np.ndarray] = []
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.02, models=[model]) as server:
        episode = record_episode(
            server.url, model, RecordConfig(tmp_path), max_actions=25, act=recorded.append
        )
    bag = read_bag(episode.bag)
    assert [np.asarray(m.message.data).tolist() for m in bag[topics.COMMAND.name]] == [
        a.tolist() for a in episode.sent
    ]
    point = bag[topics.CHUNK.name][0].message.points[0]
    velocity = kind_of(space) == "velocity"
    assert (len(point.velocities), len(point.positions)) == ((7, 0) if velocity else (0, 7))
    assert {m.message.layout.dim[0].label for m in bag[topics.COMMAND.name]} == {space}
