"""sequence_ai_core: a client for cloud robot policies that keeps the arm moving."""

from ._version import __version__
from .catalogue import models
from .errors import (
    AuthError,
    ChunkExhausted,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    PermissionDenied,
    SequencesError,
    Unavailable,
)
from .images import encode_image
from .policy import Policy, connect
from .types import ActionChunk, ImageFrame, Model, Observation, Prediction, Proprioception

__all__ = [
    "ActionChunk",
    "AuthError",
    "ChunkExhausted",
    "ImageFrame",
    "InvalidRequest",
    "InvalidResponse",
    "Model",
    "Observation",
    "OutOfCredit",
    "PermissionDenied",
    "Policy",
    "Prediction",
    "Proprioception",
    "SequencesError",
    "Unavailable",
    "__version__",
    "connect",
    "encode_image",
    "models",
]
