"""The simulated model catalogue and the reference trajectory every simulated model follows.

The trajectory is a deterministic function of wall time (``time.time()``), shared by the
simulator and any client on the same machine. A chunk anchored at the observation's capture
time therefore lines up with what the arm "should" be doing, so staleness and seams between
chunks are measurable rather than hidden in noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sequence_ai_core.action_spaces import kind_of
from sequence_ai_core.types import MODEL_PREFIX, FloatArray, short_model_id

#: Wall-clock origin of the trajectory. Subtracting it keeps the sine arguments small, so
#: float64 keeps micro-radian precision for current epoch times.
_EPOCH_S = 1_700_000_000.0


@dataclass(frozen=True)
class SimModel:
    """One catalogue entry. The last action dimension is always the gripper position (0..1)."""

    short_id: str
    architecture: str
    robot: str
    action_space: str
    action_dim: int
    control_hz: float
    action_horizon: int
    camera_views: tuple[str, ...]

    @property
    def id(self) -> str:
        return MODEL_PREFIX + self.short_id

    @property
    def covers_seconds(self) -> float:
        return self.action_horizon / self.control_hz

    @property
    def joint_count(self) -> int:
        """Arm joints, i.e. every dimension but the trailing gripper."""
        return self.action_dim - 1

    def catalogue_entry(self) -> dict[str, Any]:
        """The ``GET /v1/models`` entry for this model."""
        return {
            "id": self.id,
            "endpoint": "act",
            "architecture": self.architecture,
            "robot": self.robot,
            "action_space": self.action_space,
            "action_dim": self.action_dim,
            "action_horizon": self.action_horizon,
            "control_hz": self.control_hz,
            "camera_views": list(self.camera_views),
            "covers_seconds": round(self.covers_seconds, 2),
        }


_MODELS = (
    SimModel(
        "pi05-droid",
        "pi0.5",
        "droid_franka",
        "joint_velocity",
        8,
        15.0,
        15,
        ("exterior_1", "wrist_left"),
    ),
    SimModel(
        "cosmos3-edge-policy-droid",
        "cosmos3-edge",
        "droid_franka",
        "joint_velocity",
        8,
        15.0,
        32,
        ("exterior_1", "wrist_left"),
    ),
    SimModel(
        "lingbot-va-5b", "lingbot-va", "piper", "joint_absolute", 7, 25.0, 16, ("front", "wrist")
    ),
    SimModel(
        "lingbot-vla-v2-6b",
        "lingbot-vla",
        "ur5e",
        "joint_velocity",
        7,
        30.0,
        15,
        ("front", "wrist"),
    ),
)

#: short id -> model.
CATALOGUE: dict[str, SimModel] = {model.short_id: model for model in _MODELS}


def find_model(model: str) -> SimModel | None:
    """Catalogue entry for a short or full id, or None."""
    return CATALOGUE.get(short_model_id(model))


def _joint_waves(joints: int) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(offset, amplitude, frequency Hz, phase) per joint: distinct, slow, within +-1 rad."""
    index = np.arange(joints, dtype=np.float64)
    offset = 0.3 * np.sin(1.3 * index + 0.4)
    amplitude = 0.25 + 0.05 * (index % 4)  # 0.25..0.40 rad
    frequency = 0.07 + 0.023 * index  # 0.07..0.21 Hz: peak speed <= ~0.45 rad/s
    phase = 0.9 * index
    return offset, amplitude, frequency, phase


_GRIPPER_HZ = 0.05


def reference_position(model: SimModel, t_wall: float) -> FloatArray:
    """Where the reference arm is at wall time ``t_wall``: joint positions (rad), then gripper
    position in 0..1. Smooth, deterministic, different per joint."""
    offset, amplitude, frequency, phase = _joint_waves(model.joint_count)
    t = t_wall - _EPOCH_S
    joints = offset + amplitude * np.sin(2.0 * math.pi * frequency * t + phase)
    gripper = 0.5 + 0.45 * math.sin(2.0 * math.pi * _GRIPPER_HZ * t)
    # Typed here: numpy 1.21's stubs leave np.append unannotated (Any).
    position: FloatArray = np.append(joints, gripper).astype(np.float64)
    return position


def reference_velocity(model: SimModel, t_wall: float) -> FloatArray:
    """Time derivative of the joint positions (rad/s); the gripper stays a position."""
    _, amplitude, frequency, phase = _joint_waves(model.joint_count)
    t = t_wall - _EPOCH_S
    omega = 2.0 * math.pi * frequency
    joints = amplitude * omega * np.cos(omega * t + phase)
    gripper = 0.5 + 0.45 * math.sin(2.0 * math.pi * _GRIPPER_HZ * t)
    velocity: FloatArray = np.append(joints, gripper).astype(np.float64)  # typed, as above
    return velocity


def reference_action(model: SimModel, t_wall: float) -> FloatArray:
    """The action the simulated model outputs for wall time ``t_wall`` in its action space."""
    if kind_of(model.action_space) == "velocity":
        return reference_velocity(model, t_wall)
    return reference_position(model, t_wall)


def reference_chunk(model: SimModel, anchor_wall: float, steps: int) -> FloatArray:
    """``steps`` actions, step i at ``anchor_wall + i / control_hz``; shape (steps, dim)."""
    rows = [reference_action(model, anchor_wall + i / model.control_hz) for i in range(steps)]
    if not rows:
        return np.zeros((0, model.action_dim), dtype=np.float64)
    return np.stack(rows)
