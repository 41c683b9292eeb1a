"""The public value types: what goes into a request and what comes back.

Everything here is plain data. Validation of untrusted gateway output happens in
``sequence_ai_core.gateway.wire``; a value of these types has already passed it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from . import action_spaces as _spaces

FloatArray = npt.NDArray[np.float64]

#: Action spaces the gateway documents, and the spaces of each kind: names derived from the
#: one table (``action_spaces``), which every rule reads, kept here for code that imports
#: them from this module.
ACTION_SPACES = _spaces.ACTION_SPACES
DELTA_SPACES = _spaces.names_where(lambda space: space.kind == "delta")
ABSOLUTE_SPACES = _spaces.names_where(lambda space: space.kind == "absolute")
VELOCITY_SPACES = _spaces.names_where(lambda space: space.kind == "velocity")

MODEL_PREFIX = "accounts/sequences/models/"


def full_model_id(model: str) -> str:
    """Expand a short id (``pi05-droid``) to the gateway's full id; full ids pass through."""
    if not model or not model.strip():
        raise ValueError("model id must be a non-empty string")
    return model if "/" in model else MODEL_PREFIX + model


def short_model_id(model: str) -> str:
    return model[len(MODEL_PREFIX) :] if model.startswith(MODEL_PREFIX) else model


@dataclass(frozen=True)
class ImageFrame:
    """One camera image, already encoded: JPEG or PNG bytes (base64 is applied on the wire),
    or the base64 text of one, as the 0.1.0 client's ``ImageFrame.data`` held it. Either is
    checked before anything is sent (``images.image_bytes``)."""

    view: str
    data: bytes | str
    #: Wall-clock capture time in milliseconds since the epoch (``time.time() * 1000``).
    timestamp_ms: int | None = None

    def __repr__(self) -> str:
        size = (
            f"{len(self.data)} base64 chars"
            if isinstance(self.data, str)
            else (f"{len(self.data)} bytes")
        )
        return f"ImageFrame(view={self.view!r}, {size}, timestamp_ms={self.timestamp_ms})"


@dataclass(frozen=True)
class Proprioception:
    joint_positions: Sequence[float]
    #: Optional: omitted from the request when None, never zero-filled.
    joint_velocities: Sequence[float] | None = None
    end_effector_pose: Sequence[float] | None = None
    gripper: float | None = None


@dataclass(frozen=True)
class Observation:
    proprioception: Proprioception
    images: Sequence[ImageFrame] = ()
    instruction: str = ""


@dataclass(frozen=True)
class ActionChunk:
    """A validated chunk: ``steps`` has shape (N, action_dim), all finite, N >= 1."""

    steps: FloatArray
    robot: str
    action_space: str
    action_dim: int
    control_frequency_hz: float
    covers_seconds: float

    def __len__(self) -> int:
        return int(self.steps.shape[0])

    @property
    def period_s(self) -> float:
        return 1.0 / self.control_frequency_hz

    def __repr__(self) -> str:
        return (
            f"ActionChunk({len(self)} steps x {self.action_dim} dims, {self.action_space}, "
            f"{self.control_frequency_hz:g} Hz, {self.covers_seconds:.2f}s, robot={self.robot!r})"
        )


@dataclass(frozen=True)
class Prediction:
    id: str
    model: str
    action_chunk: ActionChunk
    perf: Mapping[str, Any] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)
    warnings: Sequence[str] = ()
    request_id: str = ""
    #: Client-measured wall time of the HTTP exchange, seconds.
    latency_s: float = 0.0


@dataclass(frozen=True)
class Model:
    id: str
    short_id: str
    endpoint: str
    architecture: str
    robot: str
    action_dim: int
    action_horizon: int
    control_hz: float
    camera_views: tuple[str, ...]
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def covers_seconds(self) -> float:
        return self.action_horizon / self.control_hz if self.control_hz > 0 else 0.0
