"""sequence_ai_core: a client for cloud robot policies that keeps the arm moving."""

import logging

# First: it refuses an httpx too old to run on with one line, before anything imports httpx.
from . import dependencies  # noqa: F401
from ._version import __version__
from .errors import (
    AuthError,
    ChunkExhausted,
    ChunkRefused,
    ConfigurationError,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    PermissionDenied,
    SequencesError,
    Stalled,
    TLSError,
    Unavailable,
)
from .frames import RawFrame
from .gateway.catalogue import models
from .images import encode_image
from .playback.engine import EngineConfig, PlaybackEngine, Tick
from .playback.engine_config import RunConfig
from .playback.episode import Episode
from .playback.outcome import RunOutcome
from .playback.source import ChunkSource, DriverGuard
from .policy import Policy, connect
from .types import ActionChunk, ImageFrame, Model, Observation, Prediction, Proprioception

# A library does not print: without this, Python's last-resort handler writes every warning
# to stderr, and a failed run showed each connection error twice (log line and outcome).
# Configure logging (e.g. logging.basicConfig(level=logging.INFO)) to see them.
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ActionChunk",
    "AuthError",
    "ChunkExhausted",
    "ChunkRefused",
    "ChunkSource",
    "ConfigurationError",
    "DriverGuard",
    "EngineConfig",
    "Episode",
    "ImageFrame",
    "InvalidRequest",
    "InvalidResponse",
    "Model",
    "Observation",
    "OutOfCredit",
    "PermissionDenied",
    "PlaybackEngine",
    "Policy",
    "Prediction",
    "Proprioception",
    "RawFrame",
    "RunConfig",
    "RunOutcome",
    "SequencesError",
    "Stalled",
    "TLSError",
    "Tick",
    "Unavailable",
    "__version__",
    "connect",
    "encode_image",
    "models",
]
