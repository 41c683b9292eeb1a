"""The openpi backend against openpi's real ``WebsocketPolicyServer`` (PyPI openpi-server 0.1.0)
serving a trajectory policy of ours (``sequence_ai_sim/openpi_peer.py``), and openpi-client's own
``msgpack_numpy`` and ``image_tools`` as the reference for the wire format and the images."""

from __future__ import annotations

import dataclasses
import itertools
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from openpi_client import image_tools, msgpack_numpy
from support.openpi_droid import DROID, STAMP, droid_observation

import sequence_ai_core as sai
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.openpi import BUILTIN, Profile
from sequence_ai_core.openpi.codec import packb, unpackb
from sequence_ai_core.openpi.errors import ServerRaised
from sequence_ai_core.openpi.profiles import resize_with_pad
from sequence_ai_sim.openpi_peer import PeerServer, TrajectoryPolicy, reference

KEY = "sk-openpi-0123456789abcdef"

pytestmark = pytest.mark.timeout(120)


def observation_for(profile: Profile) -> sai.Observation:
    joints = next(s.size for s in profile.state if "joint_positions" in s.sources)
    frames = [
        RawFrame(spec.view, np.full((480, 640, 3), 7 * i, dtype=np.uint8))
        for i, spec in enumerate(profile.images)
    ]
    return sai.Observation(
        proprioception=sai.Proprioception(joint_positions=[0.2] * joints, gripper=0.5),
        images=frames,
        instruction="fold the towel",
    )


@pytest.fixture
def droid_policy() -> TrajectoryPolicy:
    return TrajectoryPolicy(action_dim=8, control_hz=15.0, horizon=10, timestamp_key=STAMP)


@pytest.fixture
def server(droid_policy: TrajectoryPolicy) -> Iterator[PeerServer]:
    with PeerServer(droid_policy, metadata={"reset_pose": [0.0] * 7, "name": "peer"}) as peer:
        yield peer


def test_connect_by_url_reads_the_servers_metadata(server: PeerServer) -> None:
    with sai.connect(server.url, profile="droid") as policy:
        entry = policy.describe()
        assert policy.model == "openpi/droid"
        assert entry.raw["server_metadata"] == {"reset_pose": [0.0] * 7, "name": "peer"}
        assert (entry.action_dim, entry.control_hz, entry.robot) == (8, 15.0, "droid_franka")
        assert entry.raw["action_space"] == "joint_velocity"
        assert entry.raw["gripper_dims"] == [7]
        assert policy.base_url == server.url
        first = policy.next_action(droid_observation())  # the simple loop works the same
        assert first.shape == (8,) and policy.buffered == 9 and policy.requests_sent == 1


def test_predict_sends_droid_as_openpis_example_does(
    server: PeerServer, droid_policy: TrajectoryPolicy
) -> None:
    observation = droid_observation()
    with sai.connect(server.url, profile=DROID) as policy:
        started = time.time()
        prediction = policy.predict(observation)
    sent = droid_policy.received[0]
    assert sorted(sent) == sorted(
        [
            "observation/exterior_image_1_left",
            "observation/wrist_image_left",
            "observation/joint_position",
            "observation/gripper_position",
            "observation/timestamp",
            "prompt",
        ]
    )
    exterior = sent["observation/exterior_image_1_left"]
    assert exterior.dtype == np.uint8 and exterior.shape == (224, 224, 3)
    raw = observation.images[0].pixels  # type: ignore[attr-defined]
    np.testing.assert_array_equal(exterior, image_tools.resize_with_pad(raw, 224, 224))
    np.testing.assert_array_equal(sent["observation/joint_position"], [0.1] * 7)
    np.testing.assert_array_equal(sent["observation/gripper_position"], [0.25])
    assert sent["prompt"] == "put the cup in the sink"
    assert abs(float(sent["observation/timestamp"]) - started) < 5.0
    chunk = prediction.action_chunk
    assert chunk.steps.shape == (10, 8) and chunk.action_space == "joint_velocity"
    assert chunk.control_frequency_hz == 15.0 and chunk.steps.dtype == np.float64
    stamp = float(sent["observation/timestamp"])
    expected = reference(stamp + np.arange(10) / 15.0, 8).astype(np.float32)
    np.testing.assert_allclose(chunk.steps, expected, rtol=0, atol=1e-7)
    assert prediction.perf["inference_ms"] >= 0


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_builtin_profile_keys_and_shapes(name: str) -> None:
    profile = BUILTIN[name]
    peer = TrajectoryPolicy(
        action_dim=profile.action_dim, control_hz=profile.control_hz, timestamp_key=None
    )
    with PeerServer(peer) as server, sai.connect(server.url, profile=name) as policy:
        prediction = policy.predict(observation_for(profile))
    sent = peer.received[0]
    for spec in profile.images:
        node: Any = sent
        for part in spec.key:
            node = node[part]
        want = (
            (3, spec.height, spec.width) if spec.layout == "chw" else (spec.height, spec.width, 3)
        )
        assert node.shape == want and node.dtype == np.uint8
    for state in profile.state:
        assert sent[state.key[0]].shape == (state.size,)
    assert prediction.action_chunk.action_dim == profile.action_dim
    assert prediction.action_chunk.control_frequency_hz == profile.control_hz
    assert prediction.action_chunk.action_space == profile.action_space
    if name == "aloha":  # nested, channels first, as openpi's aloha_real example sends it
        assert sorted(sent["images"]) == sorted(s.view for s in profile.images)


def test_aloha_optional_cameras_may_be_left_out() -> None:
    profile = BUILTIN["aloha"]
    peer = TrajectoryPolicy(action_dim=14, control_hz=50.0, timestamp_key=None)
    full = observation_for(profile)
    only_high = dataclasses.replace(full, images=[full.images[0]])
    with PeerServer(peer) as server, sai.connect(server.url, profile="aloha") as policy:
        policy.predict(only_high)
        with pytest.raises(sai.InvalidRequest, match="cam_high"):
            policy.predict(dataclasses.replace(full, images=list(full.images[1:])))
    assert list(peer.received[0]["images"]) == ["cam_high"]
    assert peer.calls == 1  # the refused observation was never sent


def test_codec_matches_openpi_msgpack_numpy_both_ways() -> None:
    value = {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4),
        "u8": np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
        "i64": np.array([-1, 2**40], dtype=np.int64),
        "b": np.array([True, False]),
        "scalar": np.float64(2.5),
        "nested": {"list": [1, 2.0, "x"], "text": "prompt"},
    }
    theirs = msgpack_numpy.unpackb(packb(value))
    ours = unpackb(msgpack_numpy.packb(value))
    for decoded in (theirs, ours):
        for key in ("f32", "u8", "i64", "b"):
            np.testing.assert_array_equal(decoded[key], value[key])
            assert decoded[key].dtype == value[key].dtype
        assert decoded["scalar"] == 2.5 and decoded["nested"]["text"] == "prompt"
    assert ours["nested"]["list"] == [1, 2.0, "x"]


def test_resize_with_pad_matches_openpis_image_tools() -> None:
    rng = np.random.default_rng(1)
    for height, width in ((480, 640), (720, 1280), (300, 200), (224, 224), (100, 333)):
        image = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
        np.testing.assert_array_equal(
            resize_with_pad(image, 224, 224), image_tools.resize_with_pad(image, 224, 224)
        )


def test_run_pipelines_over_several_connections_and_learns_the_queue() -> None:
    """0.8 s inference, 10-step chunks at 15 Hz (0.67 s): one request in flight cannot keep
    up, so the engine opens a second connection; the server runs infer in its event loop,
    so the overlapping request waits, and the load monitor sees that queueing."""
    peer = TrajectoryPolicy(action_dim=8, control_hz=15.0, latency_s=0.8, timestamp_key=STAMP)
    acted: list[np.ndarray[Any, Any]] = []
    with PeerServer(peer) as server, sai.connect(server.url, profile=DROID) as policy:
        outcome = policy.run(
            droid_observation,
            acted.append,
            max_actions=75,
            validate=lambda a: bool(np.all(np.isfinite(a)) and a.shape == (8,)),
        )
        opened = policy._backend.client.connections_opened  # type: ignore[attr-defined]
    assert outcome.reason == "completed", outcome
    assert len(acted) == 75 and all(a.shape == (8,) and np.all(np.isfinite(a)) for a in acted)
    assert opened >= 2
    spans = sorted(peer.spans)
    assert all(b[0] >= a[1] - 1e-3 for a, b in itertools.pairwise(spans))  # infer is serial
    assert outcome.queued_refills >= 1 or outcome.backoffs >= 1, outcome.summary()


def test_the_one_driver_guard_holds_for_openpi(server: PeerServer) -> None:
    with sai.connect(server.url, profile=DROID) as policy:
        engine = sai.PlaybackEngine(policy, sai.EngineConfig())
        try:
            failures: list[BaseException] = []

            def other() -> None:
                try:
                    policy.predict(droid_observation())
                except sai.SequencesError as exc:
                    failures.append(exc)

            thread = threading.Thread(target=other)
            thread.start()
            thread.join(10)
            assert failures and "already driven" in str(failures[0])
        finally:
            engine.close()


def test_a_server_exception_is_typed_and_redacted(droid_policy: TrajectoryPolicy) -> None:
    """Text frame (the traceback) then close 1011: a ServerRaised with the key redacted."""

    def leak() -> dict[str, Any]:
        raise ValueError(f"cannot load checkpoint for key {KEY}")

    droid_policy.answers[3] = leak
    holds: list[float] = []
    with (
        PeerServer(droid_policy) as server,
        sai.connect(server.url, profile=DROID, api_key=KEY) as policy,
    ):
        outcome = policy.run(
            droid_observation,
            lambda a: None,
            max_actions=100,
            validate=lambda a: True,
            hold=lambda: holds.append(time.monotonic()),
        )
    assert outcome.reason == "raised:ServerRaised", outcome
    error = outcome.error
    assert isinstance(error, ServerRaised) and isinstance(error, sai.SequencesError)
    assert "ValueError: cannot load checkpoint" in str(error) and "1011" in str(error)
    texts = [str(error), repr(error), str(error.body), outcome.summary()]
    assert all(KEY not in text for text in texts)
    assert "***" in str(error.body)
    assert len(holds) == 1


@pytest.mark.timing
def test_a_server_going_away_mid_episode_holds_once(droid_policy: TrajectoryPolicy) -> None:
    server = PeerServer(droid_policy).start()
    stopper = threading.Timer(1.5, server.stop)
    holds: list[float] = []
    acted: list[float] = []
    try:
        with sai.connect(server.url, profile=DROID, timeout_s=2.0) as policy:
            stopper.start()
            outcome = policy.run(
                droid_observation,
                lambda a: acted.append(time.monotonic()),
                max_actions=300,
                validate=lambda a: True,
                hold=lambda: holds.append(time.monotonic()),
                stall_timeout_s=1.0,
            )
    finally:
        stopper.cancel()
        server.stop()
    assert outcome.stopped_early and outcome.reason.startswith("raised:"), outcome
    assert isinstance(outcome.error, sai.Unavailable), repr(outcome.error)
    assert len(holds) == 1 and holds[0] >= acted[-1]
    assert 0 < len(acted) < 300


def test_an_answer_that_does_not_match_the_profile_is_invalid(
    server: PeerServer, droid_policy: TrajectoryPolicy
) -> None:
    droid_policy.answers[1] = lambda: {"actions": np.zeros((10, 7), np.float32)}
    droid_policy.answers[2] = lambda: {"actions": np.full((10, 8), np.nan, np.float32)}
    droid_policy.answers[3] = lambda: {"actions": np.zeros(8, np.float32)}
    droid_policy.answers[4] = lambda: {"actions": "not an array"}
    droid_policy.answers[5] = lambda: {"action": np.zeros((10, 8))}
    expected = ["7 dimensions", "non-finite", "shape (8,)", "not a numeric", "'actions'"]
    with sai.connect(server.url, profile=DROID) as policy:
        for what in expected:
            with pytest.raises(sai.InvalidResponse, match=re.escape(what)):
                policy.predict(droid_observation())
        assert policy.predict(droid_observation()).action_chunk.steps.shape == (10, 8)


def test_an_oversized_answer_is_refused_and_the_next_one_plays(
    server: PeerServer, droid_policy: TrajectoryPolicy
) -> None:
    blob = np.zeros(2 * 1024 * 1024, np.uint8)
    droid_policy.answers[1] = lambda: {"actions": np.zeros((10, 8), np.float32), "blob": blob}
    with sai.connect(server.url, profile=DROID) as policy:
        with pytest.raises(sai.InvalidResponse, match="invalid frame"):
            policy.predict(droid_observation())
        assert policy.predict(droid_observation()).action_chunk.steps.shape == (10, 8)


def test_an_unreachable_server_is_unavailable() -> None:
    from sequence_ai_sim.openpi_peer import free_port

    url = f"ws://127.0.0.1:{free_port()}"
    with sai.connect(url, profile="droid") as policy, pytest.raises(sai.Unavailable):
        policy.describe()


def test_healthz(server: PeerServer) -> None:
    with sai.connect(server.url, profile="droid") as policy:
        status, seconds = policy._backend.health()  # type: ignore[attr-defined]
    assert status == 200 and seconds >= 0


def test_doctor_checks_healthz_metadata_and_one_inference(server: PeerServer) -> None:
    from sequence_ai_core.openpi.doctor import OpenpiDoctorSettings, run_openpi_doctor

    lines: list[str] = []
    assert run_openpi_doctor(OpenpiDoctorSettings(server.url, "droid", samples=2), lines.append)
    assert any("healthz: HTTP 200" in line for line in lines)
    assert any("keys ['name', 'reset_pose']" in line for line in lines)
    assert any("10 x 8 actions" in line for line in lines), lines
    assert lines[-1] == "verdict: ready"


def test_doctor_command_fails_on_an_answer_the_profile_does_not_match(
    server: PeerServer, droid_policy: TrajectoryPolicy
) -> None:
    import subprocess
    import sys

    droid_policy.answers[1] = lambda: {"actions": np.zeros((10, 14), np.float32)}
    command = [
        sys.executable,
        "-m",
        "sequence_ai_core.tools.cli",
        "doctor",
        "--base-url",
        server.url,
    ]
    result = subprocess.run(
        [*command, "--profile", "droid"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[FAIL] inference" in result.stdout and "14 dimensions" in result.stdout
    usage = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert usage.returncode == 2 and "--profile" in usage.stderr


def test_no_thread_or_socket_outlives_close(server: PeerServer) -> None:
    import os

    before = {t.ident for t in threading.enumerate()}
    descriptors = len(os.listdir("/proc/self/fd"))
    with sai.connect(server.url, profile=DROID) as policy:
        outcome = policy.run(
            droid_observation, lambda a: None, max_actions=20, validate=lambda a: True
        )
    assert outcome.reason == "completed"
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
        if not left and len(os.listdir("/proc/self/fd")) <= descriptors:
            break
        time.sleep(0.05)
    assert not left, [t.name for t in left]
    assert len(os.listdir("/proc/self/fd")) <= descriptors
