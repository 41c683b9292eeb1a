"""What the ROS node (``sequence_ai_ros``) uses of the client beyond its public top level,
and nothing else: the node imports from here and from ``sequence_ai_core`` only, so what it
depends on is one list (``test/ros/test_node_api.py`` pins it) and the modules behind these names
may move without touching the node.
"""

from __future__ import annotations

from .action_spaces import find_space, kind_of, space_named
from .credentials import resolve_api_key
from .images import DEFAULT_QUALITY, DEFAULT_SIZE
from .limits import MAX_CONTROL_HZ, MIN_CONTROL_HZ
from .playback.engine_config import FRESHNESS, InvalidSetting, connections_for
from .playback.episode import Label, StopReason
from .playback.handover import HANDOVERS
from .playback.journal import UNRECORDED, Journal
from .playback.pacing import Pacer
from .recording.bag import load_rosbags
from .recording.config import DEFAULT_IMAGE_HZ, RecordConfig
from .recording.recorder import FlightRecorder
from .redaction import redact
from .types import FloatArray

__all__ = [
    "DEFAULT_IMAGE_HZ",
    "DEFAULT_QUALITY",
    "DEFAULT_SIZE",
    "FRESHNESS",
    "HANDOVERS",
    "MAX_CONTROL_HZ",
    "MIN_CONTROL_HZ",
    "UNRECORDED",
    "FlightRecorder",
    "FloatArray",
    "InvalidSetting",
    "Journal",
    "Label",
    "Pacer",
    "RecordConfig",
    "StopReason",
    "connections_for",
    "find_space",
    "kind_of",
    "load_rosbags",
    "redact",
    "resolve_api_key",
    "space_named",
]
