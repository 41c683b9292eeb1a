"""The node's parameter values validated into a typed config (the table they are declared
from is ``declarations``). ROS-free so that the rules can be tested directly."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sequence_ai_core import RunConfig
from sequence_ai_core.node_api import InvalidSetting, RecordConfig, connections_for

from . import diagnostics, outputs
from .declarations import (
    IMAGE_ENCODINGS,
    PARAMETERS,
    RUN_PARAMETERS,
    ParamSpec,
    secret_parameter_names,
)
from .trajectories import TRAJECTORY_MODES

__all__ = [
    "PARAMETERS",
    "RUN_PARAMETERS",
    "CameraInput",
    "NodeConfig",
    "ParamSpec",
    "ParameterError",
    "check_against_model",
    "connect_arguments",
    "parse",
    "secret_parameter_names",
]


class ParameterError(ValueError):
    """A parameter value the node cannot run with; ``name`` is the offending parameter."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"parameter '{name}': {problem}")
        self.name = name
        self.problem = problem


@dataclass(frozen=True)
class CameraInput:
    view: str
    topic: str
    compressed: bool


@dataclass(frozen=True)
class NodeConfig:
    model: str
    base_url: str | None
    allow_insecure_http: bool
    #: The engine and episode settings (``RUN_PARAMETERS``), as ``run()`` takes them; each
    #: episode adds the catalogue's chunk length and rate (``RunConfig.with_catalogue``).
    run: RunConfig
    joint_names: tuple[str, ...]
    cameras: tuple[CameraInput, ...]
    image_size: tuple[int, int]
    jpeg_quality: int
    instruction: str
    output_type: str
    trajectory_mode: str
    trajectory_velocities: bool
    allow_nonzero_velocity_at_trajectory_end: bool
    max_actions: int
    autostart: bool
    max_observation_age_s: float
    lower_limits: tuple[float, ...]
    upper_limits: tuple[float, ...]
    max_step: tuple[float, ...]
    validator: str
    #: The ValidateChunk service every chunk is offered to, empty when off.
    chunk_validator: str
    hold_service: str
    hardware_id: str
    gripper_dims: int
    gripper_joint: str
    gripper_topic: str
    seam_warn: float
    #: The openpi observation profile (a ws:// base_url), else None.
    profile: str | None = None
    #: How each episode is recorded (``record_*``; a ``FlightRecorder``'s), None: not at all.
    record: RecordConfig | None = None


def _require(ok: bool, name: str, problem: str) -> None:
    if not ok:
        raise ParameterError(name, problem)


def _choice(raw: Mapping[str, Any], name: str, choices: Sequence[str]) -> str:
    value = str(raw[name])
    _require(value in choices, name, f"'{value}' is not one of {', '.join(choices)}")
    return value


def _finite(raw: Mapping[str, Any], name: str, *, minimum: float, strict: bool) -> float:
    value = float(raw[name])
    bad = not math.isfinite(value) or value < minimum or (strict and value == minimum)
    _require(not bad, name, f"must be {'>' if strict else '>='} {minimum:g}, got {value!r}")
    return value


#: A declared parameter's value as its ``RunConfig`` field takes it (ROS may hand an
#: integer to a double parameter; rclpy_guards refuses any other mismatch).
_CAST: dict[str, Callable[[Any], Any]] = {"bool": bool, "integer": int, "double": float}
_KINDS = {spec.name: spec.kind for spec in PARAMETERS}


def _run(raw: Mapping[str, Any]) -> RunConfig:
    """The ``RUN_PARAMETERS`` as one ``RunConfig``, checked by the core's own rules (the same
    as ``run()``'s), whose error names the setting: the parameter of the same name."""
    settings = {name: _CAST.get(_KINDS[name], str)(raw[name]) for name in RUN_PARAMETERS}
    settings["control_hz"] = settings["control_hz"] or None  # 0: the chunk's own rate
    try:
        return RunConfig(**settings)
    except InvalidSetting as exc:
        note = " (or 0: the chunk's own rate)" if exc.setting == "control_hz" else ""
        raise ParameterError(exc.setting, exc.problem + note) from None


def _int(raw: Mapping[str, Any], name: str, *, minimum: int, maximum: int | None = None) -> int:
    value = int(raw[name])
    upper = f"..{maximum}" if maximum is not None else " or more"
    ok = value >= minimum and (maximum is None or value <= maximum)
    _require(ok, name, f"must be {minimum}{upper}, got {value}")
    return value


def _strings(raw: Mapping[str, Any], name: str) -> tuple[str, ...]:
    values = tuple(str(v) for v in (raw.get(name) or ()))
    _require(all(v.strip() for v in values), name, "contains an empty name")
    _require(len(set(values)) == len(values), name, f"contains duplicates: {list(values)}")
    return values


def _floats(raw: Mapping[str, Any], name: str) -> tuple[float, ...]:
    values = tuple(float(v) for v in (raw.get(name) or ()))
    _require(all(math.isfinite(v) for v in values), name, "must be finite numbers")
    return values


def _cameras(raw: Mapping[str, Any]) -> tuple[CameraInput, ...]:
    views = _strings(raw, "camera_views")
    topics = tuple(str(v) for v in (raw.get("camera_topics") or ()))
    encodings = tuple(str(v) for v in (raw.get("camera_encodings") or ())) or ("raw",) * len(views)
    _require(
        len(topics) == len(views),
        "camera_topics",
        f"needs one topic per camera view ({len(views)}), got {len(topics)}",
    )
    _require(all(t.strip() for t in topics), "camera_topics", "contains an empty topic")
    _require(
        len(encodings) == len(views),
        "camera_encodings",
        f"needs one entry per camera view ({len(views)}), got {len(encodings)}",
    )
    for encoding in encodings:
        _require(
            encoding in IMAGE_ENCODINGS,
            "camera_encodings",
            f"'{encoding}' is not raw or compressed",
        )
    return tuple(
        CameraInput(view, topic, encoding == "compressed")
        for view, topic, encoding in zip(views, topics, encodings, strict=True)
    )


def _limits(
    raw: Mapping[str, Any],
) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    lower, upper = _floats(raw, "lower_limits"), _floats(raw, "upper_limits")
    if lower and upper:
        _require(
            len(lower) == len(upper),
            "upper_limits",
            f"has {len(upper)} values, lower_limits has {len(lower)}",
        )
        bad = [i for i, (lo, hi) in enumerate(zip(lower, upper, strict=True)) if lo >= hi]
        _require(not bad, "upper_limits", f"must exceed lower_limits at index {bad}")
    max_step = _floats(raw, "max_step")
    _require(all(v > 0 for v in max_step), "max_step", "values must be > 0")
    return lower, upper, max_step


def _validator(raw: Mapping[str, Any]) -> str:
    text = str(raw["validator"]).strip()
    if text:
        module, _, function = text.partition(":")
        ok = (
            bool(module)
            and function.isidentifier()
            and all(p.isidentifier() for p in module.split("."))
        )
        _require(ok, "validator", f"must look like 'package.module:function', got {text!r}")
    return text


def _chunk_validator(raw: Mapping[str, Any]) -> str:
    name = str(raw.get("chunk_validator") or "").strip()
    _require(
        not name or re.fullmatch(r"[~/]?[A-Za-z_][\w/]*", name) is not None,
        "chunk_validator",
        f"must be empty or a service name, got {name!r}",
    )
    return name


def _gripper(
    raw: Mapping[str, Any], joint_names: tuple[str, ...], output_type: str
) -> tuple[int, str, str]:
    dims = _int(raw, "gripper_dims", minimum=0)
    joint, topic = str(raw["gripper_joint"]).strip(), str(raw["gripper_topic"]).strip()
    _require(not topic or dims > 0, "gripper_topic", "is set but gripper_dims is 0")
    _require(joint not in joint_names, "gripper_joint", f"'{joint}' is also listed in joint_names")
    needs_split = outputs.get(output_type).names_joints and dims > 0
    _require(
        not needs_split or bool(topic),
        "gripper_topic",
        f"is required with gripper_dims > 0 and output_type={output_type}: "
        "gripper positions cannot share a point with arm joints",
    )
    return dims, joint, topic


def _trajectory(raw: Mapping[str, Any], output_type: str) -> tuple[str, bool, bool]:
    """joint_trajectory output must be accepted by Humble's and Jazzy's default controller,
    or name the controller parameter that makes it acceptable."""
    mode = _choice(raw, "trajectory_mode", TRAJECTORY_MODES)
    velocities = bool(raw["trajectory_velocities"])
    moving_end = bool(raw["allow_nonzero_velocity_at_trajectory_end"])
    if not outputs.get(output_type).streams_trajectories:
        return mode, velocities, moving_end
    _require(
        mode != "point" or not velocities or moving_end,
        "trajectory_velocities",
        "with trajectory_mode=point every message ends with non-zero velocity, which "
        "joint_trajectory_controller on Jazzy rejects by default ('Velocity of last trajectory "
        "point ... is not zero'): set allow_nonzero_velocity_at_trajectory_end: true on the "
        "controller and on this node, or trajectory_velocities: false, or trajectory_mode: chunk",
    )
    return mode, velocities, moving_end


def _record(raw: Mapping[str, Any], joint_names: tuple[str, ...]) -> RecordConfig | None:
    """The ``record_*`` parameters as the core recorder's ``RecordConfig``, checked by its
    own rules (``run(record=)``'s), or None when ``record_dir`` is empty. The image rate is
    checked either way, so a wrong value is refused before recording is turned on. The
    directory is made absolute (``~`` expanded): the bag paths in diagnostics are then the
    ones to open, whatever directory the node was started in."""
    directory = str(raw["record_dir"]).strip()
    path = os.path.abspath(os.path.expanduser(directory)) if directory else "."
    try:
        config = RecordConfig(path, image_hz=float(raw["record_image_hz"]), joint_names=joint_names)
    except ValueError as exc:  # the only rule a parameter here can break: the image rate's
        raise ParameterError("record_image_hz", str(exc).removeprefix("image_hz ")) from None
    return config if directory else None


def parse(raw: Mapping[str, Any]) -> NodeConfig:
    """Validate raw parameter values (unset arrays as None); raises ParameterError."""
    model = str(raw["model"]).strip()
    _require(bool(model), "model", "must not be empty")
    base_url = str(raw["base_url"]).strip()
    _require(
        not base_url or base_url.startswith(("http://", "https://", "ws://", "wss://")),
        "base_url",
        f"must start with http(s):// (gateway) or ws(s):// (openpi server), got {base_url!r}",
    )
    profile = str(raw.get("profile") or "").strip()
    openpi = base_url.startswith(("ws://", "wss://"))
    _require(
        bool(profile) == openpi, "profile", "is required with a ws(s):// base_url, and only then"
    )
    output_type = _choice(raw, "output_type", outputs.names())
    joint_names = _strings(raw, "joint_names")
    _require(
        bool(joint_names) or not outputs.get(output_type).names_joints,
        "joint_names",
        f"is required with output_type={output_type}",
    )
    size = tuple(int(v) for v in (raw.get("image_size") or ()))
    _require(
        len(size) == 2 and min(size) > 0,
        "image_size",
        f"must be [width, height] > 0, got {list(size)}",
    )
    run = _run(raw)
    lower, upper, max_step = _limits(raw)
    trajectory_mode, trajectory_velocities, moving_end = _trajectory(raw, output_type)
    gripper_dims, gripper_joint, gripper_topic = _gripper(raw, joint_names, output_type)
    return NodeConfig(
        model=model,
        base_url=base_url or None,
        profile=profile or None,
        allow_insecure_http=bool(raw["allow_insecure_http"]),
        run=run,
        joint_names=joint_names,
        cameras=_cameras(raw),
        image_size=(size[0], size[1]),
        jpeg_quality=_int(raw, "jpeg_quality", minimum=1, maximum=100),
        instruction=str(raw["instruction"]),
        output_type=output_type,
        trajectory_mode=trajectory_mode,
        trajectory_velocities=trajectory_velocities,
        allow_nonzero_velocity_at_trajectory_end=moving_end,
        max_actions=_int(raw, "max_actions", minimum=1),
        autostart=bool(raw["autostart"]),
        max_observation_age_s=_finite(raw, "max_observation_age_s", minimum=0.0, strict=True),
        lower_limits=lower,
        upper_limits=upper,
        max_step=max_step,
        validator=_validator(raw),
        chunk_validator=_chunk_validator(raw),
        hold_service=str(raw["hold_service"]).strip(),
        hardware_id=diagnostics.hardware_id(str(raw["hardware_id"]), model),
        gripper_dims=gripper_dims,
        gripper_joint=gripper_joint,
        gripper_topic=gripper_topic,
        seam_warn=_finite(raw, "seam_warn", minimum=0.0, strict=True),
        record=_record(raw, joint_names),
    )


def check_against_model(
    config: NodeConfig, action_dim: int, camera_views: Sequence[str], warn: Callable[[str], None]
) -> None:
    """Cross-check parameters with the model's catalogue entry; raises ParameterError."""
    arm_dims = action_dim - config.gripper_dims
    _require(
        arm_dims >= 1, "gripper_dims", f"{config.gripper_dims} leaves no arm dims of {action_dim}"
    )
    if config.joint_names:
        _require(
            len(config.joint_names) == arm_dims,
            "joint_names",
            f"has {len(config.joint_names)} joints; the model's {action_dim} action dims "
            f"minus gripper_dims={config.gripper_dims} leave {arm_dims}",
        )
    for name, values in (
        ("lower_limits", config.lower_limits),
        ("upper_limits", config.upper_limits),
    ):
        _require(
            not values or len(values) == action_dim,
            name,
            f"has {len(values)} values, the model has {action_dim} action dims",
        )
    _require(
        len(config.max_step) in (0, 1, action_dim),
        "max_step",
        f"needs 1 or {action_dim} values, got {len(config.max_step)}",
    )
    unknown = [c.view for c in config.cameras if c.view not in camera_views]
    _require(
        not unknown, "camera_views", f"{unknown} not among the model's views {list(camera_views)}"
    )
    missing = [v for v in camera_views if v not in {c.view for c in config.cameras}]
    if missing:
        warn(f"camera views {missing} of the model have no topic; requests go without them")


def connect_arguments(config: NodeConfig) -> dict[str, Any]:
    """``connect()``'s arguments but the key: the gateway's model, or an openpi server by
    its URL; the pool sized by the core's rule for ``max_in_flight`` refills."""
    openpi = config.profile is not None
    return {
        "model": str(config.base_url) if openpi else config.model,
        "base_url": None if openpi else config.base_url,
        "profile": config.profile,
        "allow_insecure_http": config.allow_insecure_http,
        "max_connections": connections_for(config.run.max_in_flight),
    }
