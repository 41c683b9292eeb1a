"""The gateway's JSON (docs/architecture.md §2): encoding requests, and validating every answer.

Nothing the gateway returns is trusted: ``parse_prediction`` turns a 200 body into an
``ActionChunk`` only if every step is present, in order, finite and of the declared size;
anything else is an ``InvalidResponse`` and never reaches the robot. A body is read as the
gateway sent it; only the error for a bad one is redacted of the key (its message before
any value is cut, and the body it keeps), since that is what leaves the process.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..action_spaces import find_space
from ..errors import InvalidResponse
from ..images import image_bytes
from ..limits import MAX_ACTION_DIM, MAX_CHUNK_VALUES, MAX_CONTROL_HZ, MAX_STEPS, MIN_CONTROL_HZ
from ..redaction import redact, redact_parsed
from ..types import (
    ActionChunk,
    FloatArray,
    Model,
    Observation,
    Prediction,
    short_model_id,
)

POSE_SIZE = 7  # x, y, z, qx, qy, qz, qw
#: Characters of an offending value quoted in an InvalidResponse, after redaction.
QUOTE_CHARS = 40
_NUMBER_TYPES = frozenset({int, float})


# --------------------------------------------------------------------------- requests


def _is_real(value: Any) -> bool:
    # bool is an int subclass (and np.bool_ is not Real); neither is a joint value.
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_integer(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _finite_list(values: Any, field: str, *, size: int | None = None) -> list[float]:
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ValueError(f"observation.{field} must be a sequence of numbers")
    out: list[float] = []
    for i, value in enumerate(values):
        if not _is_real(value) or not math.isfinite(float(value)):
            raise ValueError(f"observation.{field}[{i}] must be a finite number, got {value!r}")
        out.append(float(value))
    if not out:
        raise ValueError(f"observation.{field} must not be empty")
    if size is not None and len(out) != size:
        raise ValueError(f"observation.{field} must have {size} values, got {len(out)}")
    return out


def _encode_images(observation: Observation) -> list[dict[str, Any]]:
    images: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, frame in enumerate(observation.images):
        view = getattr(frame, "view", None)
        data = getattr(frame, "data", None)
        if not isinstance(view, str) or not view.strip():
            raise ValueError(f"observation.images[{i}].view must be a non-empty string")
        encoded = image_bytes(data, f"observation.images[{i}].data")
        if view in seen:
            raise ValueError(f"observation.images[{i}].view {view!r} appears twice")
        seen.add(view)
        item: dict[str, Any] = {"view": view, "data": base64.b64encode(encoded).decode("ascii")}
        timestamp = frame.timestamp_ms
        if timestamp is not None:
            if not _is_integer(timestamp) or timestamp < 0:
                raise ValueError(
                    f"observation.images[{i}].timestamp_ms must be a non-negative int, "
                    f"got {timestamp!r}"
                )
            item["timestamp_ms"] = int(timestamp)
        images.append(item)
    return images


def encode_observation(observation: Observation) -> dict[str, Any]:
    """Validate and encode an observation; ValueError names the offending field."""
    proprio = observation.proprioception
    encoded: dict[str, Any] = {
        "joint_positions": _finite_list(proprio.joint_positions, "joint_positions")
    }
    if proprio.joint_velocities is not None:
        encoded["joint_velocities"] = _finite_list(proprio.joint_velocities, "joint_velocities")
    if proprio.end_effector_pose is not None:
        encoded["end_effector_pose"] = _finite_list(
            proprio.end_effector_pose, "end_effector_pose", size=POSE_SIZE
        )
    if proprio.gripper is not None:
        if not _is_real(proprio.gripper) or not math.isfinite(float(proprio.gripper)):
            raise ValueError(
                f"observation.gripper must be a finite number, got {proprio.gripper!r}"
            )
        encoded["gripper"] = float(proprio.gripper)
    if not isinstance(observation.instruction, str):
        raise ValueError("observation.instruction must be a string")
    return {
        "images": _encode_images(observation),
        "proprioception": encoded,
        "instruction": observation.instruction,
    }


def _plain_option(key: str, value: Any) -> Any:
    """numpy scalars and arrays (a common ``seed``) become JSON values; the rest must already
    be JSON without NaN/Infinity, or the option is refused by name before anything is sent."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"option {key!r} is not a finite JSON value: {exc}") from None
    return value


def encode_act_request(
    model: str, observation: Observation, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The POST /v1/act body. Options pass through; None values are omitted, never null."""
    body: dict[str, Any] = {}
    for key, value in options.items():
        if key in ("model", "observation"):
            raise ValueError(f"option {key!r} is reserved")
        if value is not None:
            body[key] = _plain_option(key, value)
    body["model"] = model
    body["observation"] = encode_observation(observation)
    return body


# --------------------------------------------------------------------------- responses


class _Reader:
    """Raises InvalidResponse carrying the request id, and a message and the offending body
    redacted of ``secret``; the body it reads is left as sent."""

    def __init__(self, body: Any, request_id: str, secret: str | None = None) -> None:
        self.body = body
        self.request_id = request_id
        self.secret = secret

    def fail(self, what: str) -> InvalidResponse:
        return InvalidResponse(
            redact(f"invalid response from gateway: {what}", self.secret),
            status=200,
            body=redact_parsed(self.body, self.secret),
            request_id=self.request_id,
        )

    def quote(self, value: Any) -> str:
        """``repr(value)`` for a message: redacted, then cut."""
        return redact(repr(value), self.secret)[:QUOTE_CHARS]

    def mapping(self, container: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
        value = container.get(key)
        if not isinstance(value, Mapping):
            raise self.fail(f"{where}{key} missing or not an object")
        return value

    def string(self, container: Mapping[str, Any], key: str, where: str) -> str:
        value = container.get(key)
        if not isinstance(value, str) or not value:
            raise self.fail(f"{where}{key} missing or not a string")
        return value

    def number(self, value: Any, where: str) -> float:
        if type(value) is float and math.isfinite(value):
            return value
        if not _is_real(value):
            raise self.fail(f"{where} is not a number: {self.quote(value)}")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise self.fail(f"{where} is not finite: {self.quote(value)}")
        return number

    def integer(self, value: Any, where: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"{where} is not an integer: {self.quote(value)}")
        return value


def _step_values(reader: _Reader, step: Any, position: int) -> list[float]:
    where = f"action_chunk.steps[{position}]"
    values = step.get("values") if isinstance(step, Mapping) else step
    if not isinstance(values, list):
        raise reader.fail(f"{where} values missing or not a list")
    return [reader.number(v, f"{where}[{j}]") for j, v in enumerate(values)]


def _rows(reader: _Reader, steps: list[Any]) -> list[Any]:
    """Each step's values, after checking the indexes of ``{"index", "values"}`` steps."""
    kinds = set(map(type, steps))
    if kinds == {list}:
        return steps
    if kinds == {dict}:  # what json.loads makes: the fast path, at C speed
        indexes = list(map(dict.get, steps, itertools.repeat("index")))
        in_order = set(map(type, indexes)) == {int} and indexes == list(range(len(steps)))
        if in_order or indexes.count(None) == len(indexes):
            return list(map(dict.get, steps, itertools.repeat("values")))
    rows = []
    for position, step in enumerate(steps):
        if isinstance(step, Mapping):
            if "index" in step:
                where = f"action_chunk.steps[{position}].index"
                if reader.integer(step["index"], where) != position:
                    raise reader.fail(
                        f"{where} is {step['index']}, expected {position} (out of order)"
                    )
            rows.append(step.get("values"))
        else:
            rows.append(step)
    return rows


def _fast_array(rows: list[Any]) -> FloatArray | None:
    """The common case at C speed: lists of JSON numbers (ints or floats, never bools, which
    numpy would silently take as 0/1) of equal length. None sends anything else to the
    per-value path, which names the offending value."""
    if set(map(type, rows)) != {list}:
        return None
    if not set(map(type, itertools.chain.from_iterable(rows))) <= _NUMBER_TYPES:
        return None
    try:
        array = np.array(rows, dtype=np.float64)
    except (ValueError, OverflowError):  # ragged, or an integer past float range
        return None
    return array if array.ndim == 2 else None


def _parse_steps(reader: _Reader, chunk: Mapping[str, Any], action_dim: int) -> FloatArray:
    steps = chunk.get("steps")
    if not isinstance(steps, list):
        raise reader.fail("action_chunk.steps missing or not a list")
    if not steps:
        raise reader.fail("action_chunk.steps is empty")
    if len(steps) > MAX_STEPS:
        raise reader.fail(f"{len(steps)} steps in one chunk (at most {MAX_STEPS})")
    if len(steps) * action_dim > MAX_CHUNK_VALUES:
        raise reader.fail(
            f"{len(steps)} x {action_dim} values in one chunk (at most {MAX_CHUNK_VALUES})"
        )
    rows = _rows(reader, steps)
    array = _fast_array(rows)
    if array is None:
        values = [_step_values(reader, row, i) for i, row in enumerate(rows)]
        for i, row in enumerate(values):
            if len(row) != len(values[0]):
                raise reader.fail(
                    f"ragged steps: step 0 has {len(values[0])} values, step {i} {len(row)}"
                )
        array = np.array(values, dtype=np.float64).reshape(len(values), -1)
    if array.shape[1] != action_dim:
        raise reader.fail(f"action_dim is {action_dim} but steps have {array.shape[1]} values")
    if not np.isfinite(array).all():
        bad_step, bad_value = (int(i) for i in np.argwhere(~np.isfinite(array))[0])
        raise reader.fail(
            f"action_chunk.steps[{bad_step}][{bad_value}] is not finite: "
            f"{array[bad_step, bad_value]}"
        )
    array.flags.writeable = False
    return array


def _parse_chunk(reader: _Reader, chunk: Mapping[str, Any]) -> ActionChunk:
    where = "action_chunk."
    action_space = reader.string(chunk, "action_space", where)
    if find_space(action_space) is None:
        # Unknown semantics (is it a delta?) cannot be played safely.
        raise reader.fail(f"unknown action_space {action_space!r}")
    action_dim = reader.integer(chunk.get("action_dim"), "action_chunk.action_dim")
    if not 1 <= action_dim <= MAX_ACTION_DIM:
        raise reader.fail(f"action_dim must be in [1, {MAX_ACTION_DIM}], got {action_dim}")
    hz = reader.number(chunk.get("control_frequency_hz"), "action_chunk.control_frequency_hz")
    if not MIN_CONTROL_HZ <= hz <= MAX_CONTROL_HZ:
        raise reader.fail(
            f"control_frequency_hz must be in [{MIN_CONTROL_HZ:g}, {MAX_CONTROL_HZ:g}] Hz, "
            f"got {hz:g}"
        )
    steps = _parse_steps(reader, chunk, action_dim)
    covers = len(steps) / hz
    if chunk.get("covers_seconds") is not None:
        covers = reader.number(chunk["covers_seconds"], "action_chunk.covers_seconds")
    return ActionChunk(
        steps=steps,
        robot=reader.string(chunk, "robot", where),
        action_space=action_space,
        action_dim=action_dim,
        control_frequency_hz=hz,
        covers_seconds=covers,
    )


def parse_prediction(
    body: Any, *, request_id: str, latency_s: float, secret: str | None = None
) -> Prediction:
    """Validate a POST /v1/act 200 body; InvalidResponse on every malformed case. The
    prediction carries the body's values as sent; ``secret`` is redacted from the error."""
    reader = _Reader(body, request_id, secret)
    if not isinstance(body, Mapping):
        raise reader.fail("body is not a JSON object")
    chunk = _parse_chunk(reader, reader.mapping(body, "action_chunk", ""))
    perf, usage, warnings = body.get("perf"), body.get("usage"), body.get("warnings")
    return Prediction(
        id=str(body.get("id") or ""),
        model=str(body.get("model") or ""),
        action_chunk=chunk,
        perf=dict(perf) if isinstance(perf, Mapping) else {},
        usage=dict(usage) if isinstance(usage, Mapping) else {},
        warnings=tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
        request_id=request_id,
        latency_s=latency_s,
    )


def _parse_model(reader: _Reader, entry: Any, i: int) -> Model:
    where = f"data[{i}]."
    if not isinstance(entry, Mapping):
        raise reader.fail(f"data[{i}] is not an object")
    model_id = reader.string(entry, "id", where)
    views = entry.get("camera_views") or []
    if not isinstance(views, list) or not all(isinstance(v, str) for v in views):
        raise reader.fail(f"{where}camera_views is not a list of strings")
    return Model(
        id=model_id,
        short_id=short_model_id(model_id),
        endpoint=str(entry.get("endpoint") or ""),
        architecture=str(entry.get("architecture") or ""),
        robot=str(entry.get("robot") or ""),
        action_dim=reader.integer(entry.get("action_dim", 0), f"{where}action_dim"),
        action_horizon=reader.integer(entry.get("action_horizon", 0), f"{where}action_horizon"),
        control_hz=reader.number(entry.get("control_hz", 0.0), f"{where}control_hz"),
        camera_views=tuple(views),
        raw=dict(entry),
    )


def parse_models(body: Any, *, request_id: str = "", secret: str | None = None) -> list[Model]:
    """Validate a GET /v1/models body into catalogue entries (``secret`` as for
    ``parse_prediction``)."""
    reader = _Reader(body, request_id, secret)
    if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
        raise reader.fail('catalogue is not an object with a "data" list')
    return [_parse_model(reader, entry, i) for i, entry in enumerate(body["data"])]
