"""Heavy work stays off the control thread: camera frames are encoded by the worker that
builds the request, and ``observe`` itself stays on the caller's thread."""

from __future__ import annotations

import base64
import io
import threading

import numpy as np
import pytest
from PIL import Image
from support import TEST_KEY

import sequence_ai_core.frames as frames
from sequence_ai_core.errors import InvalidRequest
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.playback.engine import PlaybackEngine
from sequence_ai_core.policy import connect
from sequence_ai_core.types import Observation, Proprioception
from sequence_ai_sim import GatewaySimulator

HANG_GUARD_S = 10.0


def camera(value: int = 90) -> np.ndarray:
    return np.full((480, 640, 3), value, dtype=np.uint8)


def test_raw_frames_are_encoded_on_the_worker_not_in_observe(
    sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    encoded_on: list[str] = []
    observed_on: list[str] = []
    real = frames.encode_image

    def spying(*args: object, **kwargs: object) -> object:
        encoded_on.append(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(frames, "encode_image", spying)
    made: list[RawFrame] = []

    def observe() -> Observation:
        observed_on.append(threading.current_thread().name)
        frame = RawFrame("exterior_1", camera(), size=(224, 224))
        made.append(frame)
        return Observation(Proprioception([0.0] * 7, gripper=0.5), images=(frame,))

    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy,
        PlaybackEngine(policy) as engine,
    ):
        engine.tick(0.0, observe)
        assert engine.wait_idle(HANG_GUARD_S)
    assert observed_on == [threading.current_thread().name]
    assert encoded_on and all(name.startswith("sequence-ai-refill") for name in encoded_on)
    sent = sim.received[-1]["observation"]["images"][0]
    picture = Image.open(io.BytesIO(base64.b64decode(sent["data"])))
    assert picture.size == (224, 224) and picture.format == "JPEG"
    assert sent["timestamp_ms"] == made[0].timestamp_ms


def test_the_pixels_are_copied_when_the_frame_is_made() -> None:
    pixels = camera(10)
    frame = RawFrame("wrist_left", pixels, size=None)
    pixels[:] = 250  # the camera driver reuses its buffer
    decoded = np.asarray(Image.open(io.BytesIO(frame.data)))
    assert abs(int(decoded.mean()) - 10) <= 2
    assert frame.encoded and "480x640x3 pixels" in repr(frame)


def test_a_bad_frame_ends_the_run_as_an_invalid_request_and_sends_nothing(
    sim: GatewaySimulator,
) -> None:
    def observe() -> Observation:
        bad = RawFrame("exterior_1", np.zeros((4, 4, 3), dtype=np.float32))
        return Observation(Proprioception([0.0] * 7), images=(bad,))

    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy,
        PlaybackEngine(policy) as engine,
    ):
        engine.tick(0.0, observe)
        assert engine.wait_idle(HANG_GUARD_S)
        with pytest.raises(InvalidRequest, match="uint8"):
            engine.tick(0.1, observe)
    assert sim.received == ()
