"""Request encoding and response validation (pure functions, no network)."""

from __future__ import annotations

import base64
import contextlib
import copy
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sequence_ai_core.errors import InvalidResponse
from sequence_ai_core.gateway.wire import (
    encode_act_request,
    encode_observation,
    parse_models,
    parse_prediction,
)
from sequence_ai_core.limits import (
    MAX_CHUNK_VALUES,
    MAX_CONTROL_HZ,
    MAX_STEPS,
    MIN_CONTROL_HZ,
)
from sequence_ai_core.types import ImageFrame, Observation, Proprioception

JPEG = b"\xff\xd8\xff\xe0fake"


def observation(**proprio: Any) -> Observation:
    fields: dict[str, Any] = {"joint_positions": [0.1, 0.2, 0.3]}
    fields.update(proprio)
    return Observation(Proprioception(**fields), instruction="pick")


def good_body(steps: Any = None, **chunk: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "act-1",
        "model": "accounts/sequences/models/pi05-droid",
        "action_chunk": {
            "steps": steps
            if steps is not None
            else [{"index": i, "values": [i, i + 0.5]} for i in range(3)],
            "robot": "droid_franka",
            "action_space": "joint_velocity",
            "action_dim": 2,
            "control_frequency_hz": 15.0,
            "covers_seconds": 0.2,
        },
        "perf": {"inference_ms": 12.0},
        "warnings": ["w"],
    }
    body["action_chunk"].update(chunk)
    return body


def parse(body: Any) -> Any:
    return parse_prediction(body, request_id="r-00000001", latency_s=0.5)


# ------------------------------------------------------------------ encoding


def test_optional_proprioception_is_omitted_not_zero_filled() -> None:
    encoded = encode_observation(observation())
    assert encoded["proprioception"] == {"joint_positions": [0.1, 0.2, 0.3]}
    assert encoded["instruction"] == "pick"
    assert encoded["images"] == []


def test_all_proprioception_fields_and_numpy_values_encode_as_floats() -> None:
    encoded = encode_observation(
        observation(
            joint_positions=np.array([1, 2], dtype=np.float32),
            joint_velocities=[0, 0.5],
            end_effector_pose=[0, 0, 0, 0, 0, 0, 1],
            gripper=np.float64(0.3),
        )
    )["proprioception"]
    assert encoded == {
        "joint_positions": [1.0, 2.0],
        "joint_velocities": [0.0, 0.5],
        "end_effector_pose": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        "gripper": 0.3,
    }
    assert all(type(v) is float for v in encoded["joint_positions"])


def test_images_are_base64_with_view_and_timestamp() -> None:
    obs = Observation(
        Proprioception([0.0]),
        images=[ImageFrame("exterior_1", JPEG, 1700000000123), ImageFrame("wrist", JPEG)],
    )
    images = encode_observation(obs)["images"]
    assert images[0] == {
        "view": "exterior_1",
        "data": base64.b64encode(JPEG).decode(),
        "timestamp_ms": 1700000000123,
    }
    assert "timestamp_ms" not in images[1]


@pytest.mark.parametrize(
    ("obs", "field"),
    [
        (observation(joint_positions=[]), "joint_positions"),
        (observation(joint_positions=[0.0, math.nan]), "joint_positions[1]"),
        (observation(joint_positions=[True]), "joint_positions[0]"),
        (observation(joint_positions="123"), "joint_positions"),
        (observation(joint_velocities=[math.inf]), "joint_velocities[0]"),
        (observation(end_effector_pose=[0.0] * 6), "end_effector_pose"),
        (observation(end_effector_pose=[0.0] * 6 + [math.nan]), "end_effector_pose[6]"),
        (observation(gripper=math.nan), "gripper"),
        (observation(gripper="open"), "gripper"),
    ],
)
def test_bad_proprioception_is_refused_naming_the_field(obs: Observation, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        encode_observation(obs)


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ([ImageFrame("", JPEG)], r"images\[0\].view"),
        ([ImageFrame("a", b"")], r"images\[0\].data"),
        ([ImageFrame("a", JPEG), ImageFrame("a", JPEG)], r"images\[1\].view 'a' appears twice"),
    ],
)
def test_bad_images_are_refused(images: list[ImageFrame], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_observation(Observation(Proprioception([0.0]), images=images))


def test_act_request_omits_none_options_and_keeps_others() -> None:
    body = encode_act_request(
        "accounts/sequences/models/m", observation(), {"seed": 3, "temperature": None}
    )
    assert body["model"] == "accounts/sequences/models/m"
    assert body["seed"] == 3
    assert "temperature" not in body
    with pytest.raises(ValueError, match="reserved"):
        encode_act_request("m", observation(), {"model": "other"})


def test_numpy_options_become_json_and_bad_options_are_named() -> None:
    body = encode_act_request(
        "m", observation(), {"seed": np.int64(4), "bias": np.array([0.5, 1.0])}
    )
    assert type(body["seed"]) is int and body["seed"] == 4
    assert body["bias"] == [0.5, 1.0]
    with pytest.raises(ValueError, match="'temperature'"):
        encode_act_request("m", observation(), {"temperature": math.nan})
    with pytest.raises(ValueError, match="'callback'"):
        encode_act_request("m", observation(), {"callback": print})


# ------------------------------------------------------------------ parsing


def test_good_body_parses_to_read_only_float_array() -> None:
    prediction = parse(good_body())
    steps = prediction.action_chunk.steps
    assert steps.dtype == np.float64
    assert steps.shape == (3, 2)
    assert steps[2].tolist() == [2.0, 2.5]
    assert not steps.flags.writeable
    with pytest.raises(ValueError):
        steps[0, 0] = 9.0
    assert prediction.request_id == "r-00000001"
    assert prediction.latency_s == 0.5
    assert prediction.warnings == ("w",)
    assert prediction.action_chunk.covers_seconds == 0.2


def test_flat_list_steps_are_accepted() -> None:
    chunk = parse(good_body(steps=[[1, 2], [3, 4]])).action_chunk
    assert chunk.steps.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_covers_seconds_defaults_to_steps_over_rate() -> None:
    body = good_body()
    del body["action_chunk"]["covers_seconds"]
    assert parse(body).action_chunk.covers_seconds == pytest.approx(3 / 15)


def _mutated(path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(good_body())
    target: Any = body
    *parents, last = path.split(".")
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    key: Any = int(last) if last.isdigit() else last
    if value is _DELETE:
        del target[key]
    else:
        target[key] = value
    return body


_DELETE = object()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, 2], "not a JSON object"),
        ("text", "not a JSON object"),
        (_mutated("action_chunk", _DELETE), "action_chunk missing"),
        (_mutated("action_chunk.steps", _DELETE), "steps missing"),
        (_mutated("action_chunk.steps", []), "steps is empty"),
        (_mutated("action_chunk.robot", _DELETE), "robot missing"),
        (_mutated("action_chunk.action_space", _DELETE), "action_space missing"),
        (_mutated("action_chunk.action_space", "teleport"), "unknown action_space"),
        (_mutated("action_chunk.action_dim", _DELETE), "action_dim is not an integer"),
        (_mutated("action_chunk.action_dim", True), "action_dim is not an integer"),
        (_mutated("action_chunk.action_dim", 3), "action_dim is 3 but steps have 2"),
        (_mutated("action_chunk.control_frequency_hz", 0), "control_frequency_hz must be in"),
        (_mutated("action_chunk.control_frequency_hz", -15), "control_frequency_hz must be in"),
        (_mutated("action_chunk.control_frequency_hz", math.inf), "not finite"),
        (_mutated("action_chunk.control_frequency_hz", "15"), "not a number"),
        (_mutated("action_chunk.steps.1.values", [1.0]), "ragged"),
        (_mutated("action_chunk.steps.1.values", [1.0, math.nan]), "not finite"),
        (_mutated("action_chunk.steps.1.values", [1.0, -math.inf]), "not finite"),
        (_mutated("action_chunk.steps.1.values", [1.0, "2"]), "not a number"),
        (_mutated("action_chunk.steps.1.values", [1.0, True]), "not a number"),
        (_mutated("action_chunk.steps.1.values", [1.0, None]), "not a number"),
        (_mutated("action_chunk.steps.1.values", [1.0, 10**400]), "not finite"),
        (_mutated("action_chunk.steps.1.values", _DELETE), "values missing"),
        (_mutated("action_chunk.steps.1.index", 2), "out of order"),
        (_mutated("action_chunk.steps.1", "step"), "values missing"),
        (_mutated("action_chunk.covers_seconds", math.nan), "not finite"),
    ],
)
def test_malformed_bodies_raise_invalid_response(body: Any, message: str) -> None:
    with pytest.raises(InvalidResponse, match=message) as info:
        parse(body)
    assert info.value.request_id == "r-00000001"
    assert info.value.status == 200


def test_parse_models_reads_catalogue_entries() -> None:
    entries = parse_models(
        {
            "data": [
                {
                    "id": "accounts/sequences/models/pi05-droid",
                    "endpoint": "act",
                    "robot": "droid_franka",
                    "action_dim": 8,
                    "action_horizon": 15,
                    "control_hz": 15,
                    "camera_views": ["exterior_1", "wrist_left"],
                }
            ]
        }
    )
    assert entries[0].short_id == "pi05-droid"
    assert entries[0].camera_views == ("exterior_1", "wrist_left")
    assert entries[0].covers_seconds == pytest.approx(1.0)


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"data": "x"},
        {"data": [1]},
        {"data": [{"endpoint": "act"}]},
        {"data": [{"id": "m", "camera_views": "front"}]},
    ],
)
def test_parse_models_rejects_malformed_catalogues(body: Any) -> None:
    with pytest.raises(InvalidResponse):
        parse_models(body)


_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**400), 10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
)
_json = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)
_values = st.lists(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), _json_leaf), max_size=4
)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.one_of(
        _json,
        st.lists(_values, max_size=4),
        st.lists(
            st.fixed_dictionaries({"index": st.integers(0, 3), "values": _values}), max_size=4
        ),
    ),
    dim=st.one_of(st.integers(-1, 5), _json_leaf),
    hz=st.one_of(st.floats(allow_nan=True, allow_infinity=True), _json_leaf),
    space=st.sampled_from(["joint_velocity", "joint_delta", "nope", 3]),
)
def test_any_body_is_either_a_valid_chunk_or_invalid_response(
    steps: Any, dim: Any, hz: Any, space: Any
) -> None:
    body = good_body(steps=steps, action_dim=dim, control_frequency_hz=hz, action_space=space)
    try:
        chunk = parse(body).action_chunk
    except InvalidResponse:
        return
    assert chunk.steps.ndim == 2 and chunk.steps.shape[0] >= 1
    assert chunk.steps.shape[1] == chunk.action_dim >= 1
    assert np.isfinite(chunk.steps).all()
    assert MIN_CONTROL_HZ <= chunk.control_frequency_hz <= MAX_CONTROL_HZ
    assert len(chunk) <= MAX_STEPS and chunk.steps.size <= MAX_CHUNK_VALUES


@settings(max_examples=200, deadline=None)
@given(body=_json)
def test_arbitrary_json_never_escapes_as_another_exception(body: Any) -> None:
    with contextlib.suppress(InvalidResponse):
        parse(body)
    with contextlib.suppress(InvalidResponse):
        parse_models(body)
