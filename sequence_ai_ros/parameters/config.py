"""What the node runs with: its parameters validated into one typed value (``parsing``
builds it), the error that names a parameter it cannot run with, and the ``connect()``
arguments it gives."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sequence_ai_core import RunConfig
from sequence_ai_core.node_api import RecordConfig, connections_for


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
    #: Where the operator's device commands the arm (recorded while taken over), or empty.
    teleop_topic: str
    hardware_id: str
    gripper_dims: int
    gripper_joint: str
    gripper_topic: str
    seam_warn: float
    #: The openpi observation profile (a ws:// base_url), else None.
    profile: str | None = None
    #: How each episode is recorded (``record_*``; a ``FlightRecorder``'s), None: not at all.
    record: RecordConfig | None = None


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
