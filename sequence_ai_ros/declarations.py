"""The node's parameters as declared: one table of names, types, defaults, constraints and
meanings, from which docs/node.md's parameter table is generated.

The validation into a typed config is ``params``. Array parameters without a sensible
default are declared statically typed and unset rather than with ``[]``: rclpy infers
BYTE_ARRAY from an empty list, after which a string array from a YAML file is rejected as a
type mismatch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal

from sequence_ai_core import RunConfig
from sequence_ai_core.node_api import (
    DEFAULT_IMAGE_HZ,
    DEFAULT_QUALITY,
    DEFAULT_SIZE,
    FRESHNESS,
    HANDOVERS,
)

from . import diagnostics, outputs
from .trajectories import TRAJECTORY_MODES

#: The engine and episode settings, whose defaults are the core's (one source for both drivers).
_RUN = RunConfig()
_RUN_FIELDS = {field.name for field in fields(RunConfig)}
IMAGE_ENCODINGS = ("raw", "compressed")
# A parameter with one of these names would put a secret into the parameter server, where
# `ros2 param dump` and rosbag record it. The key comes from the environment or a 0600 file.
SECRET_NAME = re.compile(r"(api[_\-.]?key|secret|token|password|bearer|credential)", re.I)


ParamKind = Literal[
    "bool", "integer", "double", "string", "integer_array", "double_array", "string_array"
]


@dataclass(frozen=True)
class ParamSpec:
    """One parameter as declared, and as docs/node.md's table shows it: ``description`` and
    ``constraints`` are also its ROS descriptor (``ros2 param describe``); ``constraints``
    says what configure accepts (``params``), choices separated by ``|``."""

    name: str
    kind: ParamKind
    default: Any  # None: statically typed and unset
    description: str
    constraints: str = ""


#: The output types whose messages name joints, so that they need joint_names.
_NAMING_JOINTS = "|".join(name for name in outputs.names() if outputs.get(name).names_joints)

PARAMETERS: tuple[ParamSpec, ...] = (
    ParamSpec("model", "string", "pi05-droid", "Model id, short or full.", "non-empty"),
    ParamSpec(
        "base_url",
        "string",
        "",
        "Gateway URL, or an openpi server's (ws:// or wss://); empty = $SEQUENCES_BASE_URL, "
        "else the public gateway.",
        "empty, http(s)://... or ws(s)://...",
    ),
    ParamSpec(
        "profile",
        "string",
        "",
        "openpi observation profile for a ws:// base_url: droid | aloha | libero (+rtc) | a file.",
        "required with a ws(s):// base_url, and only then",
    ),
    ParamSpec("allow_insecure_http", "bool", False, "Allow plain http to a non-loopback host."),
    ParamSpec(
        "control_hz",
        "double",
        0.0,
        "Playback rate in Hz (the rule of connect(control_hz=)); 0 = the chunk's own rate.",
        "0 or 1..1000",
    ),
    ParamSpec(
        "joint_names",
        "string_array",
        None,
        "Arm joints read from joint_states, in order.",
        "distinct; one per arm dim (action_dim - gripper_dims); required with output_type "
        + _NAMING_JOINTS,
    ),
    ParamSpec(
        "camera_views",
        "string_array",
        None,
        "Model camera views, e.g. [exterior_1]; a view of the model without a topic is left "
        "out of requests (with a warning).",
        "distinct; each a view of the model",
    ),
    ParamSpec(
        "camera_topics", "string_array", None, "Image topic per view.", "one per camera view"
    ),
    ParamSpec(
        "camera_encodings",
        "string_array",
        None,
        "Image message per view: raw (sensor_msgs/Image) or compressed (CompressedImage); "
        "unset = all raw.",
        "|".join(IMAGE_ENCODINGS) + ", one per camera view",
    ),
    ParamSpec(
        "image_size",
        "integer_array",
        list(DEFAULT_SIZE),
        "Model input size [width, height].",
        "2 values > 0",
    ),
    ParamSpec(
        "jpeg_quality", "integer", DEFAULT_QUALITY, "JPEG quality of uploaded images.", "1..100"
    ),
    ParamSpec("instruction", "string", "", "Initial instruction; the instruction topic wins."),
    ParamSpec(
        "output_type",
        "string",
        outputs.DEFAULT,
        "Action message type (one module each in sequence_ai_ros/outputs/).",
        "|".join(outputs.names()),
    ),
    ParamSpec(
        "trajectory_mode",
        "string",
        "chunk",
        "joint_trajectory output: chunk = the rest of each chunk as one trajectory; point = "
        "one point per tick.",
        "|".join(TRAJECTORY_MODES),
    ),
    ParamSpec(
        "trajectory_velocities",
        "bool",
        False,
        "joint_trajectory output: send velocities too (cubic instead of linear interpolation); "
        "chunk trajectories still end at rest.",
        "not with trajectory_mode point unless allow_nonzero_velocity_at_trajectory_end",
    ),
    ParamSpec(
        "allow_nonzero_velocity_at_trajectory_end",
        "bool",
        False,
        "Set true only if the joint_trajectory_controller has it set (Jazzy's default is false; "
        "Humble has no such check): needed for point trajectories with velocities on Jazzy.",
    ),
    ParamSpec("max_actions", "integer", 1500, "Actions per episode before it completes.", ">= 1"),
    ParamSpec("autostart", "bool", False, "Start an episode on activate."),
    ParamSpec(
        "prefetch", "bool", _RUN.prefetch, "Request the next chunk before the plan runs out."
    ),
    ParamSpec(
        "max_in_flight", "integer", _RUN.max_in_flight, "Requests outstanding at once.", ">= 1"
    ),
    ParamSpec(
        "freshness",
        "string",
        _RUN.freshness,
        "Plan lag: round_trip = about one request per chunk (the request floor); fresh = the "
        "smallest sustainable lag, for 1.7-2.7x the requests.",
        "|".join(FRESHNESS),
    ),
    ParamSpec(
        "handover",
        "string",
        _RUN.handover,
        "How a chunk takes over from the one before, in every action space (gripper dims "
        "excluded): smooth (rate-bound), slew, fade, extrapolate, or none. Chunk trajectories "
        "carry the blended targets.",
        "|".join(HANDOVERS),
    ),
    ParamSpec(
        "handover_rate",
        "double",
        _RUN.handover_rate,
        "Largest correction a hand-over adds to a step, in the chunk's largest in-chunk steps.",
        "> 0",
    ),
    ParamSpec(
        "smooth_seam",
        "integer",
        _RUN.smooth_seam,
        "Steps a fade or extrapolate hand-over lasts (0: a third of a chunk).",
        ">= 0",
    ),
    ParamSpec(
        "startup_timeout_s",
        "double",
        _RUN.startup_timeout_s,
        "Seconds to wait for a warming model before the first action; 0 = do not wait.",
        ">= 0",
    ),
    ParamSpec(
        "stall_timeout_s",
        "double",
        _RUN.stall_timeout_s,
        "An episode whose plan stays empty this long (the arm held since it ran out) ends: "
        "raised:Stalled, one hold, as in run().",
        "> 0",
    ),
    ParamSpec(
        "max_observation_age_s",
        "double",
        0.5,
        "Inputs older than this are stale: no request is sent from them, and stale "
        "joint_states end the episode (stale_input).",
        "> 0",
    ),
    ParamSpec(
        "lower_limits",
        "double_array",
        None,
        "Per-dimension lower bound of every action.",
        "finite; action_dim values",
    ),
    ParamSpec(
        "upper_limits",
        "double_array",
        None,
        "Per-dimension upper bound of every action.",
        "finite; action_dim values, each above lower_limits",
    ),
    ParamSpec(
        "max_step",
        "double_array",
        None,
        "Largest change between consecutive actions, per dimension or one for all.",
        "1 or action_dim values, each > 0",
    ),
    ParamSpec(
        "validator",
        "string",
        "",
        "Extra check 'package.module:function'(action) -> bool.",
        "empty or package.module:function",
    ),
    ParamSpec(
        "chunk_validator",
        "string",
        "",
        "sequence_ai_ros/srv/ValidateChunk service that vets each chunk before any step of it "
        "is sent; empty = off.",
        "empty or a service name",
    ),
    ParamSpec(
        "chunk_validator_timeout_s",
        "double",
        _RUN.chunk_validator_timeout_s,
        "How long the chunk validator may take to answer; no answer in time is a refusal.",
        "> 0",
    ),
    ParamSpec("hold_service", "string", "", "std_srvs/Trigger service called on every early stop."),
    ParamSpec(
        "hardware_id",
        "string",
        "",
        f"Diagnostics hardware id; empty = {diagnostics.hardware_id('', '<model>')}.",
    ),
    ParamSpec(
        "gripper_dims",
        "integer",
        0,
        "Trailing action dims that are gripper positions (never zeroed by a hold).",
        ">= 0, leaving at least one arm dim",
    ),
    ParamSpec(
        "gripper_joint",
        "string",
        "",
        "Joint in joint_states giving the gripper state.",
        "not one of joint_names",
    ),
    ParamSpec(
        "gripper_topic",
        "string",
        "",
        "Publish gripper dims here instead of on action.",
        f"only with gripper_dims > 0; then required with output_type {_NAMING_JOINTS}",
    ),
    ParamSpec(
        "seam_warn",
        "double",
        diagnostics.SEAM_WARN,
        "Seam jump (action units) above which diagnostics warn.",
        "> 0",
    ),
    ParamSpec(
        "record_dir",
        "string",
        "",
        "Record each episode as a rosbag2 (MCAP) bag in this directory; empty = off. "
        "Needs the record extra (rosbags).",
    ),
    ParamSpec(
        "record_image_hz",
        "double",
        DEFAULT_IMAGE_HZ,  # the core recorder's (run(record=)), as its rules are
        "Camera images recorded per second and view (0: none); with record_dir.",
        ">= 0",
    ),
)


#: The parameters that are ``RunConfig`` fields of the same name, parsed into one
#: (``params.NodeConfig.run``); control_hz too, where the parameter's 0 means None.
RUN_PARAMETERS = tuple(spec.name for spec in PARAMETERS if spec.name in _RUN_FIELDS)


def secret_parameter_names(names: Sequence[str]) -> list[str]:
    """Names that look like they carry a credential; the value is never looked at."""
    return [name for name in names if SECRET_NAME.search(name)]
