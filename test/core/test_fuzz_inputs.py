"""Bad input from the caller: a clear error naming what is wrong, raised before anything is
sent (the simulator's act request count does not move).

Covers observations and images (hypothesis, deterministic), ``connect()`` and ``run()``
arguments (tables), and an observation that turns bad in the middle of an episode.
"""

from __future__ import annotations

import io
import math
import ssl
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image
from support import TEST_KEY
from support.faultkit import camera_frames
from support.fuzzing import DIM, MODEL, gateway, policy
from support.fuzzing import examples as fuzz

from sequence_ai_core.errors import SequencesError
from sequence_ai_core.gateway.wire import encode_observation
from sequence_ai_core.images import encode_image
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import FloatArray, ImageFrame, Observation, Proprioception
from sequence_ai_sim import GatewaySimulator

__all__ = ["gateway", "policy"]  # the fixtures, imported for pytest to find
INPUT_EXAMPLES = {"observations": 100, "observation_images": 80, "images": 80}
GOOD = Observation(Proprioception(joint_positions=[0.0] * DIM), images=camera_frames(MODEL))


# ------------------------------------------------------------------ observations


def jpeg(width: int = 8, height: int = 6) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(out, format="JPEG")
    return out.getvalue()


JPEG = jpeg()
floats_any = st.floats(allow_nan=True, allow_infinity=True)
joint_lists = st.one_of(
    st.lists(st.floats(-10, 10), min_size=1, max_size=8),
    st.lists(floats_any | st.none() | st.booleans() | st.text(max_size=2), max_size=8),
    st.lists(st.floats(-10, 10, width=32), min_size=1, max_size=8).map(
        lambda xs: np.array(xs, dtype=np.float32)
    ),
    st.lists(st.integers(-5, 5), min_size=1, max_size=8).map(tuple),
    st.just("0.1, 0.2"),
)
frames = st.builds(
    ImageFrame,
    view=st.sampled_from(["front", "wrist", "", "  "]) | st.text(max_size=6),
    data=st.sampled_from([JPEG, b"", b"raw-pixels", b"\x89PNG\r\n\x1a\nxx"])
    | st.binary(max_size=16),
    timestamp_ms=st.none()
    | st.integers(-(10**3), 2 * 10**12)
    | st.floats(0, 10**12)
    | st.booleans(),
)
proprioceptions = st.builds(
    Proprioception,
    joint_positions=joint_lists,
    joint_velocities=st.none() | joint_lists,
    end_effector_pose=st.none() | st.lists(st.floats(-1, 1), min_size=6, max_size=8),
    gripper=st.none() | floats_any | st.booleans(),
)
instructions = st.text(max_size=20) | st.none() | st.integers()
#: Two families, so that a bad image is not hidden behind a bad joint list and vice versa.
observations = st.builds(Observation, proprioception=proprioceptions, instruction=instructions)
observations_with_images = st.builds(
    Observation,
    proprioception=st.just(GOOD.proprioception),
    images=st.lists(frames, min_size=1, max_size=3),
)


def assert_refused_locally_or_accepted(
    observation: Observation, gateway: GatewaySimulator, policy: Policy
) -> None:
    """Client-valid implies gateway-valid: a bad observation costs no round trip."""
    before = gateway.stats()["act_requests"]
    try:
        encode_observation(observation)
    except ValueError as error:
        assert str(error).startswith("observation"), str(error)
        with pytest.raises(ValueError):
            policy.predict(observation)
        assert gateway.stats()["act_requests"] == before, "a refused observation was sent"
        return
    prediction = policy.predict(observation)  # raises InvalidRequest (422) if the check missed
    assert prediction.action_chunk.action_dim == DIM


@fuzz("observations", INPUT_EXAMPLES)
@given(observation=observations)
def test_observation_is_refused_locally_or_accepted_by_the_gateway(
    observation: Observation, gateway: GatewaySimulator, policy: Policy
) -> None:
    assert_refused_locally_or_accepted(observation, gateway, policy)


@fuzz("observation_images", INPUT_EXAMPLES)
@given(observation=observations_with_images)
def test_observation_images_are_refused_locally_or_accepted_by_the_gateway(
    observation: Observation, gateway: GatewaySimulator, policy: Policy
) -> None:
    assert_refused_locally_or_accepted(observation, gateway, policy)


# ------------------------------------------------------------------ images


@fuzz("images", INPUT_EXAMPLES)
@given(
    shape=st.tuples(st.integers(0, 40), st.integers(0, 40))
    | st.tuples(st.integers(0, 20), st.integers(0, 20), st.integers(1, 5)),
    dtype=st.sampled_from([np.uint8, np.uint8, np.float32, np.int16]),
    size=st.none() | st.tuples(st.integers(-2, 64), st.integers(-2, 64)),
    quality=st.integers(-5, 105),
)
def test_image_encodes_to_a_jpeg_of_the_asked_size_or_value_error(
    shape: tuple[int, ...], dtype: Any, size: tuple[int, int] | None, quality: int
) -> None:
    array = np.full(shape, 7, dtype=dtype)
    try:
        frame = encode_image(array, view="front", size=size, quality=quality)
    except ValueError as error:
        assert str(error)
        return
    assert frame.data.startswith(b"\xff\xd8\xff")
    with Image.open(io.BytesIO(frame.data)) as decoded:
        expected = size if size is not None else (shape[1], shape[0])
        assert decoded.size == expected
    assert frame.timestamp_ms is not None and frame.timestamp_ms > 0


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xd8\xff", b"\xff\xd8\xff\xe0truncated", b"GIF89a....", b"\x89PNG\r\n\x1a\n"],
)
def test_broken_encoded_bytes_are_value_errors(data: bytes) -> None:
    with pytest.raises(ValueError):
        encode_image(data, view="front")


# ------------------------------------------------------------------ single known cases


def test_raw_pixels_in_an_image_frame_are_refused_before_sending(
    gateway: GatewaySimulator, policy: Policy
) -> None:
    """A common mistake: ``ImageFrame(data=array.tobytes())``. The gateway answers 422; the
    client can tell from the first bytes that this is no JPEG or PNG."""
    frame = ImageFrame(view="front", data=np.zeros((4, 4, 3), np.uint8).tobytes())
    before = gateway.stats()["act_requests"]
    with pytest.raises(ValueError, match=r"observation\.images\[0\]\.data"):
        policy.predict(Observation(GOOD.proprioception, images=(frame,)))
    assert gateway.stats()["act_requests"] == before


def test_negative_image_timestamp_is_refused_before_sending(
    gateway: GatewaySimulator, policy: Policy
) -> None:
    frame = ImageFrame(view="front", data=JPEG, timestamp_ms=-5)
    before = gateway.stats()["act_requests"]
    with pytest.raises(ValueError, match="timestamp_ms"):
        policy.predict(Observation(GOOD.proprioception, images=(frame,)))
    assert gateway.stats()["act_requests"] == before


@pytest.mark.parametrize("shape", [(0, 5, 3), (5, 0, 3), (0, 0)])
def test_empty_image_array_is_a_value_error(shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="image"):
        encode_image(np.zeros(shape, np.uint8), view="front")


@pytest.mark.parametrize("stamp", [-1, math.nan])
def test_bad_encode_image_timestamp_is_a_value_error(stamp: float) -> None:
    with pytest.raises(ValueError, match="timestamp"):
        encode_image(np.zeros((4, 4, 3), np.uint8), view="front", timestamp_ms=stamp)  # type: ignore[arg-type]


# ------------------------------------------------------------------ connect() arguments


def _no_verify_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


CONNECT_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("empty-model", {"model": ""}, "model"),
    ("blank-model", {"model": "   "}, "model"),
    ("ftp-url", {"base_url": "ftp://127.0.0.1/"}, "base URL"),
    ("no-host", {"base_url": "http://"}, "base URL"),
    ("credentials-in-url", {"base_url": "https://user:pw@example.com"}, "credentials"),
    ("plain-http-remote", {"base_url": "http://example.com"}, "http://"),
    ("zero-timeout", {"timeout_s": 0}, "timeout_s"),
    ("negative-timeout", {"timeout_s": -1.0}, "timeout_s"),
    ("nan-timeout", {"timeout_s": math.nan}, "timeout_s"),
    ("negative-connect-timeout", {"connect_timeout_s": -1.0}, "connect_timeout_s"),
    ("zero-connections", {"max_connections": 0}, "max_connections"),
    ("zero-control-hz", {"control_hz": 0.0}, "control_hz"),
    ("negative-control-hz", {"control_hz": -30.0}, "control_hz"),
    ("nan-control-hz", {"control_hz": math.nan}, "control_hz"),
    ("inf-control-hz", {"control_hz": math.inf}, "control_hz"),
    ("verify-false", {"verify": False}, "verification"),
    ("verify-missing-bundle", {"verify": "/nonexistent/ca.pem"}, "verify"),
    ("verify-cert-none-context", {"verify": _no_verify_context()}, "verification"),
    ("key-with-newline", {"api_key": "sk-abc\nX-Evil: 1"}, "API key"),
]


@pytest.mark.parametrize(
    ("changes", "names"), [pytest.param(c, n, id=i) for i, c, n in CONNECT_CASES]
)
def test_bad_connect_argument_is_named(
    changes: dict[str, Any], names: str, gateway: GatewaySimulator
) -> None:
    arguments: dict[str, Any] = {"model": MODEL, "api_key": TEST_KEY, "base_url": gateway.url}
    arguments.update(changes)
    before = gateway.stats()["requests"]
    with pytest.raises((ValueError, TypeError)) as raised:
        connect(arguments.pop("model"), **arguments)
    assert names.lower() in str(raised.value).lower(), str(raised.value)
    assert TEST_KEY not in str(raised.value)
    assert gateway.stats()["requests"] == before


# ------------------------------------------------------------------ run() arguments

RUN_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("zero-actions", {"max_actions": 0}, "max_actions"),
    ("negative-actions", {"max_actions": -5}, "max_actions"),
    ("float-actions", {"max_actions": 2.5}, "max_actions"),
    ("bool-actions", {"max_actions": True}, "max_actions"),
    ("str-actions", {"max_actions": "10"}, "max_actions"),
    ("zero-in-flight", {"max_in_flight": 0}, "max_in_flight"),
    ("negative-smooth-seam", {"smooth_seam": -1}, "smooth_seam"),
    ("negative-startup", {"startup_timeout_s": -1.0}, "startup_timeout_s"),
    ("nan-startup", {"startup_timeout_s": math.nan}, "startup_timeout_s"),
    ("reserved-option-model", {"model": "other"}, "model"),
    ("reserved-option-observation", {"observation": {}}, "observation"),
    ("nan-option", {"seed": math.nan}, "seed"),
    ("unserialisable-option", {"seed": object()}, "seed"),
]


@pytest.mark.parametrize(("changes", "names"), [pytest.param(c, n, id=i) for i, c, n in RUN_CASES])
def test_bad_run_argument_is_named_and_nothing_moves(
    changes: dict[str, Any], names: str, gateway: GatewaySimulator, policy: Policy
) -> None:
    acted: list[FloatArray] = []
    holds: list[int] = []
    arguments: dict[str, Any] = {"max_actions": 5, "validate": lambda action: True}
    arguments.update(changes)
    before = gateway.stats()["act_requests"]
    text = error_text(
        lambda: policy.run(lambda: GOOD, acted.append, hold=lambda: holds.append(1), **arguments)
    )
    assert names in text, text
    assert gateway.stats()["act_requests"] == before
    assert acted == [] and len(holds) <= 1


def error_text(start_run: Callable[[], RunOutcome]) -> str:
    """Bad input ends a run one of two ways: a ValueError/TypeError before it starts, or (once
    the episode began, e.g. an option only the request encoder reads) an outcome whose
    typed error names the problem. Either way: the text that names it."""
    try:
        outcome = start_run()
    except (ValueError, TypeError) as error:
        return str(error)
    assert outcome.stopped_early and isinstance(outcome.error, SequencesError), outcome
    return str(outcome.error)


@pytest.mark.parametrize(
    "changes", [{"max_in_flight": 0}, {"smooth_seam": -1}, {"startup_timeout_s": math.nan}]
)
def test_bad_engine_argument_sends_no_request_at_all(
    changes: dict[str, Any], gateway: GatewaySimulator, policy: Policy
) -> None:
    """Not even the (free) catalogue lookup: arguments are checked before any I/O."""
    before = gateway.stats()["requests"]
    with pytest.raises(ValueError):
        policy.run(lambda: GOOD, lambda a: None, max_actions=5, validate=lambda a: True, **changes)
    assert gateway.stats()["requests"] == before


def test_observation_turning_bad_mid_run_stops_with_hold(
    gateway: GatewaySimulator, policy: Policy
) -> None:
    """A sensor glitch (NaN joint) mid-episode: the run stops, hold fires once, the bad
    observation is never sent, and every action played before it was finite."""
    bad = Observation(
        Proprioception(joint_positions=[0.0] * (DIM - 1) + [math.nan]), images=GOOD.images
    )
    calls = {"observe": 0}
    acted: list[FloatArray] = []
    holds: list[int] = []

    def observe() -> Observation:
        calls["observe"] += 1
        return GOOD if calls["observe"] == 1 else bad

    before = gateway.stats()["act_requests"]
    text = error_text(
        lambda: policy.run(
            observe,
            acted.append,
            max_actions=200,
            validate=lambda a: True,
            hold=lambda: holds.append(1),
            options={"action_horizon": 5},
        )
    )
    assert "joint_positions[6]" in text, text
    assert gateway.stats()["act_requests"] == before + 1  # only the good observation
    assert holds == [1]
    assert acted and all(a.shape == (DIM,) and np.all(np.isfinite(a)) for a in acted)


def test_input_example_total() -> None:
    assert sum(INPUT_EXAMPLES.values()) == 260
