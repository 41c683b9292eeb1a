"""Bodies the simulated gateway sends: errors (in the shape asked for), catalogue, action
chunks; and the request checks behind 422. Pure functions, no I/O."""

from __future__ import annotations

import base64
import binascii
import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from sequence_ai_core.action_spaces import kind_of
from sequence_ai_core.types import FloatArray

from .catalogue import CATALOGUE, SimModel, reference_chunk, reference_position
from .faults import Fault

#: Error code the simulator uses for each status (newer body shape).
STATUS_CODES: dict[int, str] = {
    400: "bad_request",
    401: "unauthenticated",
    402: "insufficient_credit",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    411: "length_required",
    413: "payload_too_large",
    422: "invalid_request",
    429: "busy",
    500: "internal",
    502: "bad_gateway",
    503: "unavailable",
    504: "upstream_timeout",
}
RETRYABLE = frozenset({429, 502, 503, 504})
MAX_HORIZON = 1024

_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n")


class RequestRejected(Exception):
    """A request the gateway refuses; carries the status and the newer-shape fields."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code or STATUS_CODES.get(status, "error")
        self.headers = headers or {}
        self.extra = extra


def error_body(
    status: int, detail: str, *, request_id: str, code: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The newer error shape: detail, code, retryable, request_id (+ retry_after_s, hint...)."""
    body: dict[str, Any] = {
        "detail": detail,
        "code": code or STATUS_CODES.get(status, "error"),
        "retryable": status in RETRYABLE,
        "request_id": request_id,
    }
    body.update({key: value for key, value in extra.items() if value is not None})
    return body


#: The error body shapes the simulator can answer in: ``both`` (the default) is the newer
#: shape whose cold-worker ``detail`` is the older object, so the 0.1.0 client, which reads
#: only that object, and this client, which prefers the newer fields, each see warming.
ERROR_SHAPES = ("both", "newer", "older")


def older_error_body(
    status: int, detail: str, *, code: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The older error shape: ``{"detail": text}``, or for a cold worker (503 ``warming``)
    ``{"detail": {"status": "warming_up", "retry_after_s", "warming_job_id", "message"}}``.
    It had no ``code`` and no ``details``: a busy 503 is just its text."""
    if status == 503 and code == "warming" and extra.get("retry_after_s") is not None:
        return {
            "detail": {
                "status": "warming_up",
                "retry_after_s": extra["retry_after_s"],
                "warming_job_id": "job-sim-warming",
                "message": detail,
            }
        }
    return {"detail": detail}


def shaped_error_body(
    shape: str, status: int, detail: str, *, request_id: str, code: str | None = None, **extra: Any
) -> dict[str, Any]:
    """An error body in one of ``ERROR_SHAPES``. In ``both``, only a cold worker's body
    differs from the newer one: any other error's text ``detail`` reads alike to both
    clients."""
    if shape == "older":
        return older_error_body(status, detail, code=code, **extra)
    body = error_body(status, detail, request_id=request_id, code=code, **extra)
    if shape == "both":
        body["detail"] = older_error_body(status, detail, code=code, **extra)["detail"]
    return body


def models_body(models: Mapping[str, SimModel], endpoint: str | None) -> dict[str, Any]:
    entries = [model.catalogue_entry() for model in models.values()]
    if endpoint is not None:
        entries = [entry for entry in entries if entry["endpoint"] == endpoint]
    return {"object": "list", "data": entries}


def html_page(status: int) -> bytes:
    return (
        f"<html><head><title>{status} Error</title></head><body><center><h1>{status} Error"
        "</h1></center><hr><center>nginx</center></body></html>\n"
    ).encode()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_numbers(value: Any, where: str, length: int | None = None) -> None:
    if not isinstance(value, list) or not value:
        raise RequestRejected(422, f"{where} must be a non-empty list of numbers")
    if not all(_is_number(item) for item in value):
        raise RequestRejected(422, f"{where} must contain only finite numbers")
    if length is not None and len(value) != length:
        raise RequestRejected(422, f"{where} must have {length} values, got {len(value)}")


def _present(mapping: Mapping[str, Any], key: str) -> bool:
    """A key with a JSON ``null`` is absent: the 0.1.0 client sends omitted fields as null,
    and the real gateway served it in production."""
    return mapping.get(key) is not None


def _check_proprioception(proprio: Any) -> None:
    if not isinstance(proprio, dict):
        raise RequestRejected(422, "observation.proprioception must be an object")
    if not _present(proprio, "joint_positions"):
        raise RequestRejected(422, "observation.proprioception.joint_positions is required")
    _check_numbers(proprio["joint_positions"], "proprioception.joint_positions")
    if _present(proprio, "joint_velocities"):
        _check_numbers(proprio["joint_velocities"], "proprioception.joint_velocities")
    if _present(proprio, "end_effector_pose"):
        _check_numbers(proprio["end_effector_pose"], "proprioception.end_effector_pose", 7)
    if _present(proprio, "gripper") and not _is_number(proprio["gripper"]):
        raise RequestRejected(422, "proprioception.gripper must be a finite number")


def _check_image(image: Any, index: int) -> int | None:
    """Validate one image; return its timestamp_ms (or None)."""
    where = f"observation.images[{index}]"
    if not isinstance(image, dict):
        raise RequestRejected(422, f"{where} must be an object")
    if not isinstance(image.get("view"), str) or not image["view"]:
        raise RequestRejected(422, f"{where}.view must be a non-empty string")
    data = image.get("data")
    if not isinstance(data, str) or not data:
        raise RequestRejected(422, f"{where}.data must be a base64 string (URLs are not fetched)")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestRejected(422, f"{where}.data is not valid base64") from None
    if not raw.startswith(_IMAGE_MAGIC):
        raise RequestRejected(422, f"{where}.data is not a JPEG or PNG image")
    stamp = image.get("timestamp_ms")
    if stamp is None:
        return None
    if not isinstance(stamp, int) or isinstance(stamp, bool) or stamp < 0:
        raise RequestRejected(422, f"{where}.timestamp_ms must be a non-negative integer")
    return stamp


def check_observation(observation: Any) -> int | None:
    """Raise RequestRejected(422) for a malformed observation; return the newest image
    ``timestamp_ms`` if any image carries one."""
    if not isinstance(observation, dict):
        raise RequestRejected(422, "observation must be an object")
    _check_proprioception(observation.get("proprioception"))
    images = observation.get("images") if _present(observation, "images") else []
    if not isinstance(images, list):
        raise RequestRejected(422, "observation.images must be a list")
    stamps = [_check_image(image, i) for i, image in enumerate(images)]
    instruction = observation.get("instruction") if _present(observation, "instruction") else ""
    if not isinstance(instruction, str):
        raise RequestRejected(422, "observation.instruction must be a string")
    known = [stamp for stamp in stamps if stamp is not None]
    return max(known) if known else None


def check_options(options: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """Validate the options the simulator understands; return (action_horizon, seed).
    Unknown options are ignored; a null option is absent, as it is for the real gateway."""
    horizon = options.get("action_horizon")
    if horizon is not None and (
        not isinstance(horizon, int) or isinstance(horizon, bool) or not 0 < horizon <= MAX_HORIZON
    ):
        raise RequestRejected(422, f"action_horizon must be an integer in 1..{MAX_HORIZON}")
    seed = options.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise RequestRejected(422, "seed must be an integer")
    return horizon, seed


def resolve_model(name: Any, models: Mapping[str, SimModel] = CATALOGUE) -> SimModel:
    if not isinstance(name, str) or not name:
        raise RequestRejected(422, "model must be a non-empty string")
    for model in models.values():
        if model.id == name:
            return model
    hint = None
    if name in models:
        hint = f"use the full id {models[name].id!r}"
    raise RequestRejected(404, f"model {name!r} not found", code="model_not_found", hint=hint)


def observed_state(observation: Any) -> FloatArray | None:
    """Joint positions then gripper of a checked observation; None without a gripper."""
    proprio = observation["proprioception"]
    gripper = proprio.get("gripper")
    if gripper is None:
        return None
    return np.array([*proprio["joint_positions"], gripper], dtype=np.float64)


def chunk_values(
    model: SimModel,
    anchor_wall: float,
    steps: int,
    *,
    noise: float,
    seed: int | None,
    observed: FloatArray | None = None,
    disagreement: FloatArray | None = None,
) -> FloatArray:
    """Reference chunk plus optional seeded noise (same seed and anchor, same chunk).

    ``observed`` (joints then gripper), as a policy that predicts from the arm's state: the
    chunk starts where the arm was observed and moves as the reference does from there,
    step i = observed + ref(anchor + i/hz) - ref(anchor), for the positions in the action
    (every dimension in absolute spaces, the gripper in velocity spaces).
    ``disagreement`` (``disagreement.ChunkDraw.added``) is added on top of that, before the
    noise, so each of the three composes with the others."""
    values = reference_chunk(model, anchor_wall, steps)
    if observed is not None and observed.shape == (model.action_dim,):
        offset = observed - reference_position(model, anchor_wall)
        if kind_of(model.action_space) == "absolute":
            values = values + offset
        else:
            values[:, -1] += offset[-1]
        values[:, -1] = np.clip(values[:, -1], 0.0, 1.0)
    if disagreement is not None:
        values = values + disagreement
    if noise > 0:
        rng = np.random.default_rng(seed)
        values = values + rng.normal(0.0, noise, size=values.shape)
        values[:, -1] = np.clip(values[:, -1], 0.0, 1.0)
    return values


def act_body(
    model: SimModel,
    values: FloatArray,
    *,
    response_id: str,
    inference_ms: float,
    queue_ms: float,
    usage: Mapping[str, Any],
) -> dict[str, Any]:
    """The 200 body of ``POST /v1/act`` (docs/architecture.md §2)."""
    rows: list[list[float]] = values.tolist()
    steps = [{"index": i, "values": row} for i, row in enumerate(rows)]
    return {
        "id": response_id,
        "model": model.id,
        "action_chunk": {
            "steps": steps,
            "robot": model.robot,
            "action_space": model.action_space,
            "action_dim": model.action_dim,
            "control_frequency_hz": model.control_hz,
            "covers_seconds": round(len(steps) / model.control_hz, 3),
        },
        "perf": {
            "inference_ms": round(inference_ms, 2),
            "ttfa_ms": round(inference_ms + queue_ms, 2),
            "queue_ms": round(queue_ms, 2),
        },
        "usage": dict(usage),
        "warnings": [],
    }


def corrupt_body(body: dict[str, Any], fault: Fault) -> dict[str, Any]:
    """Apply a body fault to a successful act body (returns a modified deep copy)."""
    out = copy.deepcopy(body)
    chunk = out["action_chunk"]
    steps: list[dict[str, Any]] = chunk["steps"]
    middle = steps[len(steps) // 2] if steps else None
    if fault.kind == "nan" and middle is not None:
        middle["values"][0] = float("nan")
    elif fault.kind == "ragged" and middle is not None:
        middle["values"] = middle["values"][:-1]
    elif fault.kind == "empty_steps":
        chunk["steps"] = []
        chunk["covers_seconds"] = 0.0
    elif fault.kind == "dim_mismatch":
        for step in steps:
            step["values"] = [*step["values"], 0.0]
    elif fault.kind == "missing_field":
        (out if fault.name in out else chunk).pop(fault.name, None)
    elif fault.kind == "zero_frequency":
        chunk["control_frequency_hz"] = 0.0
    elif fault.kind == "non_numeric" and middle is not None:
        middle["values"][0] = str(middle["values"][0])
    return out
