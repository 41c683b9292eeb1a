"""The node's parameters, each declared once (``Parameter``): docs/node.md's table, the ROS
descriptors and the parser are read from here. A parameter that is a ``RunConfig`` field
takes the core's default; its rule restates the core's check, which words the error (as for
``run()``), and test/ros/test_ros_parameters.py holds the two to the same values."""

from __future__ import annotations

from dataclasses import fields

from sequence_ai_core import RunConfig
from sequence_ai_core.node_api import (
    DEFAULT_IMAGE_HZ,
    DEFAULT_QUALITY,
    DEFAULT_SIZE,
    FRESHNESS,
    HANDOVERS,
    MAX_CONTROL_HZ,
    MIN_CONTROL_HZ,
)

from .. import diagnostics, outputs
from ..trajectories import TRAJECTORY_MODES
from .array_relations import Exceeds, OnePer
from .array_rules import Each, Names, Sized
from .declaration import Parameter
from .model_relations import ActionDims, ArmDims, LeavesArm, ModelViews
from .relations import ExactlyWith, NotIn, OnlyWith, RequiredWith, When
from .rules import Choice, Either, Exactly, Finite, NonEmpty, Number, Shape
from .trajectory_relation import EndsAtRest

#: The engine and episode settings, whose defaults are the core's (one source for both drivers).
_RUN = RunConfig()
IMAGE_ENCODINGS = ("raw", "compressed")
_POSITIVE = Number(0, above=True)
_COUNT = Number(1)
#: The output types whose messages name joints, so that they need joint_names.
_NAMING_JOINTS = When(
    "output_type", Choice(tuple(n for n in outputs.names() if outputs.get(n).names_joints))
)
_IDENTIFIER = r"(?!\d)\w+"

PARAMETERS: tuple[Parameter, ...] = (
    Parameter("model", "string", "pi05-droid", "Model id, short or full.", NonEmpty()),
    Parameter(
        "base_url",
        "string",
        "",
        "Gateway URL, or an openpi server's (ws:// or wss://); empty = $SEQUENCES_BASE_URL, "
        "else the public gateway.",
        Shape(r"(https?|wss?)://.*", "an http(s):// or ws(s):// URL"),
    ),
    Parameter(
        "profile",
        "string",
        "",
        "openpi observation profile for a ws:// base_url: droid | aloha | libero (+rtc) | a file.",
        relations=(ExactlyWith(When("base_url", Shape(r"wss?://.*", "ws(s)://...", False))),),
    ),
    Parameter("allow_insecure_http", "bool", False, "Allow plain http to a non-loopback host."),
    Parameter(
        "control_hz",
        "double",
        0.0,
        "Playback rate in Hz (the rule of connect(control_hz=)); 0 = the chunk's own rate.",
        Either(Exactly(0), Number(MIN_CONTROL_HZ, MAX_CONTROL_HZ)),
    ),
    Parameter(
        "joint_names",
        "string_array",
        None,
        "Arm joints read from joint_states, in order.",
        Names(),
        relations=(RequiredWith((_NAMING_JOINTS,)),),
        model_relations=(ArmDims(),),
    ),
    Parameter(
        "camera_views",
        "string_array",
        None,
        "Model camera views, e.g. [exterior_1]; a view of the model without a topic is left "
        "out of requests (with a warning).",
        Names(),
        model_relations=(ModelViews(),),
    ),
    Parameter(
        "camera_topics",
        "string_array",
        None,
        "Image topic per view.",
        Names(distinct=False),
        relations=(OnePer("camera_views"),),
    ),
    Parameter(
        "camera_encodings",
        "string_array",
        None,
        "Image message per view: raw (sensor_msgs/Image) or compressed (CompressedImage); "
        "unset = all raw.",
        Each(Choice(IMAGE_ENCODINGS)),
        relations=(OnePer("camera_views", unset_ok=True),),
    ),
    Parameter(
        "image_size",
        "integer_array",
        list(DEFAULT_SIZE),
        "Model input size [width, height].",
        Sized(2, _POSITIVE),
    ),
    Parameter(
        "jpeg_quality",
        "integer",
        DEFAULT_QUALITY,
        "JPEG quality of uploaded images.",
        Number(1, 100),
    ),
    Parameter(
        "instruction",
        "string",
        "",
        "Initial instruction; the instruction topic wins.",
        strip=False,
    ),
    Parameter(
        "output_type",
        "string",
        outputs.DEFAULT,
        "Action message type (one module each in sequence_ai_ros/outputs/).",
        Choice(outputs.names()),
    ),
    Parameter(
        "trajectory_mode",
        "string",
        "chunk",
        "joint_trajectory output: chunk = the rest of each chunk as one trajectory; point = "
        "one point per tick.",
        Choice(TRAJECTORY_MODES),
    ),
    Parameter(
        "trajectory_velocities",
        "bool",
        False,
        "joint_trajectory output: send velocities too (cubic instead of linear interpolation); "
        "chunk trajectories still end at rest.",
        relations=(EndsAtRest(),),
    ),
    Parameter(
        "allow_nonzero_velocity_at_trajectory_end",
        "bool",
        False,
        "Set true only if the joint_trajectory_controller has it set (Jazzy's default is false; "
        "Humble has no such check): needed for point trajectories with velocities on Jazzy.",
    ),
    Parameter("max_actions", "integer", 1500, "Actions per episode before it completes.", _COUNT),
    Parameter("autostart", "bool", False, "Start an episode on activate."),
    Parameter(
        "prefetch", "bool", _RUN.prefetch, "Request the next chunk before the plan runs out."
    ),
    Parameter(
        "max_in_flight", "integer", _RUN.max_in_flight, "Requests outstanding at once.", _COUNT
    ),
    Parameter(
        "freshness",
        "string",
        _RUN.freshness,
        "Plan lag: round_trip = about one request per chunk (the request floor); fresh = the "
        "smallest sustainable lag, for 1.7-2.7x the requests.",
        Choice(FRESHNESS),
    ),
    Parameter(
        "handover",
        "string",
        _RUN.handover,
        "How a chunk takes over from the one before, in every action space (gripper dims "
        "excluded): smooth (rate-bound), slew, fade, extrapolate, or none. Chunk trajectories "
        "carry the blended targets.",
        Choice(HANDOVERS),
    ),
    Parameter(
        "handover_rate",
        "double",
        _RUN.handover_rate,
        "Largest correction a hand-over adds to a step, in the chunk's largest in-chunk steps.",
        _POSITIVE,
    ),
    Parameter(
        "smooth_seam",
        "integer",
        _RUN.smooth_seam,
        "Steps a fade or extrapolate hand-over lasts (0: a third of a chunk).",
        Number(0),
    ),
    Parameter(
        "startup_timeout_s",
        "double",
        _RUN.startup_timeout_s,
        "Seconds to wait for a warming model before the first action; 0 = do not wait.",
        Number(0),
    ),
    Parameter(
        "stall_timeout_s",
        "double",
        _RUN.stall_timeout_s,
        "An episode whose plan stays empty this long (the arm held since it ran out) ends: "
        "raised:Stalled, one hold, as in run().",
        _POSITIVE,
    ),
    Parameter(
        "max_observation_age_s",
        "double",
        0.5,
        "Inputs older than this are stale: no request is sent from them, and stale "
        "joint_states end the episode (stale_input).",
        _POSITIVE,
    ),
    Parameter(
        "lower_limits",
        "double_array",
        None,
        "Per-dimension lower bound of every action.",
        Each(Finite()),
        model_relations=(ActionDims(),),
    ),
    Parameter(
        "upper_limits",
        "double_array",
        None,
        "Per-dimension upper bound of every action.",
        Each(Finite()),
        relations=(Exceeds("lower_limits"),),
        model_relations=(ActionDims(),),
    ),
    Parameter(
        "max_step",
        "double_array",
        None,
        "Largest change between consecutive actions, per dimension or one for all.",
        Each(_POSITIVE),
        model_relations=(ActionDims(or_one=True),),
    ),
    Parameter(
        "validator",
        "string",
        "",
        "Extra check 'package.module:function'(action) -> bool.",
        Shape(rf"{_IDENTIFIER}(\.{_IDENTIFIER})*:{_IDENTIFIER}", "package.module:function"),
    ),
    Parameter(
        "chunk_validator",
        "string",
        "",
        "sequence_ai_ros/srv/ValidateChunk service that vets each chunk before any step of it "
        "is sent; empty = off.",
        Shape(r"[~/]?[A-Za-z_][\w/]*", "a service name"),
    ),
    Parameter(
        "chunk_validator_timeout_s",
        "double",
        _RUN.chunk_validator_timeout_s,
        "How long the chunk validator may take to answer; no answer in time is a refusal.",
        _POSITIVE,
    ),
    Parameter("hold_service", "string", "", "std_srvs/Trigger service called on every early stop."),
    Parameter(
        "teleop_topic",
        "string",
        "",
        "The operator's device's commands (the output type's message), recorded while a "
        "person has the arm; empty = not recorded.",
    ),
    Parameter(
        "hardware_id",
        "string",
        "",
        f"Diagnostics hardware id; empty = {diagnostics.hardware_id('', '<model>')}.",
    ),
    Parameter(
        "gripper_dims",
        "integer",
        0,
        "Trailing action dims that are gripper positions (never zeroed by a hold).",
        Number(0),
        model_relations=(LeavesArm(),),
    ),
    Parameter(
        "gripper_joint",
        "string",
        "",
        "Joint in joint_states giving the gripper state.",
        relations=(NotIn("joint_names"),),
    ),
    Parameter(
        "gripper_topic",
        "string",
        "",
        "Publish gripper dims here instead of on action.",
        relations=(
            OnlyWith(When("gripper_dims", _POSITIVE)),
            RequiredWith(
                (When("gripper_dims", _POSITIVE), _NAMING_JOINTS),
                "gripper positions cannot share a point with arm joints",
            ),
        ),
    ),
    Parameter(
        "seam_warn",
        "double",
        diagnostics.SEAM_WARN,
        "Seam jump (action units) above which diagnostics warn.",
        _POSITIVE,
    ),
    Parameter(
        "record_dir",
        "string",
        "",
        "Record each episode as a rosbag2 (MCAP) bag in this directory; empty = off. "
        "Needs the record extra (rosbags).",
    ),
    Parameter(
        "record_image_hz",
        "double",
        DEFAULT_IMAGE_HZ,  # the core recorder's (run(record=)), as its rules are
        "Camera images recorded per second and view (0: none); with record_dir.",
        Number(0),
    ),
)

#: The parameters that are ``RunConfig`` fields of the same name, parsed into one
#: (``NodeConfig.run``); control_hz too, where the parameter's 0 means None.
RUN_PARAMETERS = tuple(p.name for p in PARAMETERS if p.name in {f.name for f in fields(RunConfig)})
