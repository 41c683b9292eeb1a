"""Code written for the released ``sequence-ai`` 0.1.0 client, the one this package descends
from, against the simulator and against this client.

0.1.0 is installed from PyPI through the ``test`` extra and is used as a peer nobody here
wrote: it sends omitted proprioception fields as JSON ``null`` and image data as base64 text,
and the gateway of its day answered a cold worker in the older error body shape.
"""

from __future__ import annotations

import base64
import io
import math
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import sequence_ai as sai010
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from support import TEST_KEY

from sequence_ai_core import (
    ImageFrame,
    Observation,
    Proprioception,
    Unavailable,
    connect,
    encode_image,
)
from sequence_ai_core.images import image_bytes
from sequence_ai_sim import GatewaySimulator


def _jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 30, 30)).save(out, format="JPEG")
    return out.getvalue()


JPEG = _jpeg()
JPEG_TEXT = base64.b64encode(JPEG).decode("ascii")
JOINTS = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]


def observation_010() -> Any:
    """What a 0.1.0 user writes: base64 text, optional fields left out (sent as null)."""
    return sai010.Observation(
        images=[sai010.ImageFrame(view="exterior_1", data=JPEG_TEXT)],
        proprioception=sai010.Proprioception(joint_positions=list(JOINTS)),
        instruction="put the cup in the sink",
    )


@pytest.fixture
def legacy_env(monkeypatch: pytest.MonkeyPatch, clean_env: Any) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)


# ------------------------------------------------------------------ the simulator takes null


def test_simulator_takes_null_as_absent(sim: GatewaySimulator) -> None:
    body = {
        "model": "accounts/sequences/models/pi05-droid",
        "observation": {
            "images": [{"view": "exterior_1", "data": JPEG_TEXT, "timestamp_ms": None}],
            "proprioception": {
                "joint_positions": JOINTS,
                "joint_velocities": None,
                "end_effector_pose": None,
                "gripper": None,
            },
            "instruction": None,
        },
        "seed": None,
    }
    headers = {"Authorization": f"Bearer {TEST_KEY}"}
    response = httpx.post(f"{sim.url}/v1/act", json=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert len(response.json()["action_chunk"]["steps"]) == 15
    # null is absent, not a licence for anything: a wrong type is still refused
    body["observation"]["proprioception"]["gripper"] = "open"  # type: ignore[index]
    refused = httpx.post(f"{sim.url}/v1/act", json=body, headers=headers, timeout=10)
    assert refused.status_code == 422
    # and the one required field cannot be null
    body["observation"]["proprioception"] = {"joint_positions": None}  # type: ignore[index]
    missing = httpx.post(f"{sim.url}/v1/act", json=body, headers=headers, timeout=10)
    assert missing.status_code == 422
    assert "joint_positions" in missing.json()["detail"]


def test_older_error_shape_for_a_cold_worker() -> None:
    with GatewaySimulator(api_key=None, cold_start_s=30.0, error_shape="older") as server:
        body = {
            "model": "accounts/sequences/models/pi05-droid",
            "observation": {"proprioception": {"joint_positions": JOINTS}},
        }
        response = httpx.post(f"{server.url}/v1/act", json=body, timeout=10)
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert detail["status"] == "warming_up"
    assert 0 < detail["retry_after_s"] <= 30.0
    assert int(response.headers["Retry-After"]) >= 1
    with pytest.raises(ValueError, match="error_shape"):
        GatewaySimulator(error_shape="newest")


# ------------------------------------------------------------------ the 0.1.0 client as a peer


def test_010_predict_against_the_simulator(sim: GatewaySimulator, legacy_env: None) -> None:
    with sai010.connect("pi05-droid", base_url=sim.url) as policy:
        prediction = policy.predict(observation_010(), seed=3)
    chunk = prediction.action_chunk
    assert len(chunk) == 15 and chunk.action_dim == 8
    assert all(len(step) == 8 and all(math.isfinite(v) for v in step) for step in chunk.steps)
    sent = sim.received[-1]
    assert sent["status"] == 200
    assert sent["observation"]["proprioception"]["gripper"] is None  # it really sent null
    assert base64.b64decode(sent["observation"]["images"][0]["data"]) == JPEG


def test_010_next_action_refills_from_the_simulator(
    sim: GatewaySimulator, legacy_env: None
) -> None:
    with sai010.connect("pi05-droid", base_url=sim.url) as policy:
        actions = [policy.next_action(observation_010()) for _ in range(16)]
    assert all(len(action) == 8 for action in actions)
    assert sim.stats()["act_requests"] == 2  # 15 from the first chunk, one more refill


def test_010_run_against_the_simulator(sim: GatewaySimulator, legacy_env: None) -> None:
    acted: list[list[float]] = []
    holds: list[int] = []
    with sai010.connect("pi05-droid", base_url=sim.url) as policy:
        outcome = policy.run(
            observation_010,
            acted.append,
            max_actions=20,
            validate=lambda action: all(math.isfinite(v) for v in action),
            hold=lambda: holds.append(1),
        )
    assert outcome.reason == "completed", outcome
    assert outcome.actions == 20 == len(acted)
    assert holds == []
    assert {record["status"] for record in sim.received} == {200}


@pytest.mark.parametrize("shape", ["both", "older"])
def test_010_run_waits_out_a_cold_start(legacy_env: None, shape: str) -> None:
    """0.1.0 waits only on the older ``warming_up`` object: the simulator's default body
    carries it, as the older body of its day did."""
    with GatewaySimulator(
        api_key=TEST_KEY, cold_start_s=1.2, latency_s=0.02, error_shape=shape
    ) as server:
        acted: list[list[float]] = []
        with (
            pytest.warns(UserWarning, match="warming"),
            sai010.connect("pi05-droid", base_url=server.url) as policy,
        ):
            outcome = policy.run(
                observation_010,
                acted.append,
                max_actions=5,
                validate=lambda action: True,
                startup_timeout_s=10.0,
            )
        statuses = [record["status"] for record in server.received]
    assert outcome.reason == "completed", outcome
    assert len(acted) == 5
    assert statuses[0] == 503 and statuses[-1] == 200


COLD_START_S = 3.0


@pytest.fixture
def sim_command(legacy_env: None) -> Iterator[str]:
    """``sequence-ai sim`` at its defaults but for a cold start and no model latency; its URL."""
    command = [sys.executable, "-m", "sequence_ai_core.tools.cli", "sim", "--port", "0"]
    command += ["--api-key", TEST_KEY, "--cold-start", f"{COLD_START_S:g}", "--latency", "0"]
    process = subprocess.Popen(
        command,
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("gateway simulator on http://127.0.0.1:"), banner
        yield banner.split()[3]
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=20.0)
        assert process.returncode == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_010_sees_the_default_sim_command_warming(sim_command: str) -> None:
    """Code written for 0.1.0, pointed at ``sequence-ai sim`` with its default error shape,
    sees a cold worker as 0.1.0 sees one (``warming``, the wait, the job id) and waits it
    out; this client reads the same answer by its newer fields."""
    with (
        sai010.connect("pi05-droid", base_url=sim_command) as policy,
        pytest.raises(sai010.Unavailable) as older,
    ):
        policy.predict(observation_010())
    assert older.value.status == 503 and older.value.warming is True
    assert older.value.retry_after_s is not None and 0 < older.value.retry_after_s <= COLD_START_S
    assert older.value.job_id and "warming up" in str(older.value)

    frame = ImageFrame("exterior_1", JPEG)
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim_command) as handle,
        pytest.raises(Unavailable) as newer,
    ):
        handle.predict(Observation(Proprioception(JOINTS), images=[frame]))
    assert newer.value.warming is True and newer.value.code == "warming"
    assert newer.value.retry_after_s is not None and 0 < newer.value.retry_after_s <= COLD_START_S

    acted: list[list[float]] = []
    with (
        pytest.warns(UserWarning, match="warming"),
        sai010.connect("pi05-droid", base_url=sim_command) as policy,
    ):
        outcome = policy.run(
            observation_010,
            acted.append,
            max_actions=5,
            validate=lambda action: True,
            startup_timeout_s=COLD_START_S + 10.0,
        )
    assert outcome.reason == "completed", outcome
    assert len(acted) == 5


# ------------------------------------------------------------------ 0.1.0 habits in this client


@pytest.mark.parametrize(
    "data",
    [
        JPEG,
        JPEG_TEXT,
        JPEG_TEXT.encode("ascii"),
        base64.encodebytes(JPEG).decode("ascii"),  # wrapped at 76 columns
    ],
    ids=["bytes", "base64-text", "base64-bytes", "base64-wrapped"],
)
def test_image_frame_takes_bytes_or_base64_text(sim: GatewaySimulator, data: Any) -> None:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy:
        frame = ImageFrame(view="exterior_1", data=data)
        policy.predict(Observation(Proprioception(JOINTS), images=[frame]))
    assert base64.b64decode(sim.received[-1]["observation"]["images"][0]["data"]) == JPEG


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (base64.b64encode(b"raw pixels, not an image").decode(), "not a JPEG or PNG"),
        ("not base64 at all!", "not base64"),
        ("/9j/4AAQ" + "é", "non-ASCII"),
        ("https://example.com/cam.jpg", "URL"),
        ("", "non-empty"),
        (np.zeros((4, 4, 3), np.uint8).tobytes(), "not a JPEG or PNG"),
        (JPEG_TEXT[:-3], "valid base64"),
    ],
    ids=["base64-of-text", "not-base64", "non-ascii", "url", "empty", "raw-pixels", "truncated"],
)
def test_what_is_not_an_encoded_image_is_still_refused_before_sending(
    sim: GatewaySimulator, data: Any, message: str
) -> None:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy:
        frame = ImageFrame(view="exterior_1", data=data)
        with pytest.raises(ValueError, match=message) as info:
            policy.predict(Observation(Proprioception(JOINTS), images=[frame]))
    assert r"observation.images[0].data" in str(info.value)
    assert sim.stats()["act_requests"] == 0


def test_encode_image_takes_base64_text_too() -> None:
    frame = encode_image(JPEG_TEXT, view="exterior_1", size=None)
    assert frame.data == JPEG
    assert "base64 chars" in repr(ImageFrame(view="v", data=JPEG_TEXT))


def test_010_style_code_runs_here_with_a_new_import(
    sim: GatewaySimulator, legacy_env: None
) -> None:
    """0.1.0's README loop, keywords and base64 text included, with only the import changed."""
    import sequence_ai_core as sequence_ai

    def read_observation() -> Any:
        return sequence_ai.Observation(
            images=[sequence_ai.ImageFrame(view="exterior_1", data=JPEG_TEXT)],
            proprioception=sequence_ai.Proprioception(joint_positions=list(JOINTS)),
            instruction="put the cup in the sink",
        )

    applied: list[list[float]] = []
    with sequence_ai.connect(model="pi05-droid", base_url=sim.url) as policy:
        out = policy.run(
            observe=read_observation,
            act=lambda action: applied.append([float(v) for v in action]),
            validate=lambda action: all(abs(v) < 3.0 for v in action),
            hold=lambda: None,
            max_actions=10,
        )
    assert out.reason == "completed", out
    assert len(applied) == 10 and all(len(a) == 8 for a in applied)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(payload=st.binary(max_size=64), png=st.booleans())
def test_encoded_images_and_their_base64_are_told_apart(payload: bytes, png: bool) -> None:
    """Any JPEG/PNG-signed bytes pass unchanged; their base64 (text or bytes) decodes to them."""
    image = (b"\x89PNG\r\n\x1a\n" if png else b"\xff\xd8\xff") + payload
    assert image_bytes(image) == image
    text = base64.b64encode(image).decode("ascii")
    assert image_bytes(text) == image
    assert image_bytes(text.encode("ascii")) == image


@settings(max_examples=200, deadline=None, derandomize=True)
@given(data=st.one_of(st.binary(max_size=64), st.text(max_size=64)))
def test_anything_else_is_refused_or_is_an_image(data: bytes | str) -> None:
    try:
        raw = image_bytes(data, "frame")
    except ValueError as error:
        assert str(error).startswith("frame ")
    else:
        assert raw.startswith((b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n"))
