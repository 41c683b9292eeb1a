"""One rosbag2 bag on disk, as ``ros2 bag record -s mcap`` writes one: a directory with
``metadata.yaml`` and one ``.mcap`` file, CDR messages, written with ``rosbags``.

Why rosbags (and not ``mcap`` with ``mcap-ros2-support``): it writes the bag directory with
its metadata, which ``ros2 bag info`` and ``ros2 bag play`` read, needs no ROS, and is the
faster of the two (docs/recording.md, "Cost and size").
Format version 8, the newest whose QoS profiles Humble's rosbag2 parses (9 writes them in a
form Humble does not read).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import ConfigurationError
from ..types import short_model_id
from . import topics
from .extras import needs
from .messages import Messages

BAG_VERSION = 8


class Rosbags(NamedTuple):
    """What the writer takes from rosbags."""

    writer_class: Any
    storage: Any
    typestore: Any
    #: Every topic's offered QoS, as ``ros2 bag record`` stores a publisher's: reliable,
    #: volatile, keep-last 10, no deadline or lifespan (Humble's "infinite" durations).
    qos: Any


def load_rosbags() -> Rosbags:
    """rosbags' writer and ROS 2 Humble's typestore; ``ConfigurationError`` without it."""
    try:
        from rosbags.interfaces import (
            Qos,
            QosDurability,
            QosHistory,
            QosLiveliness,
            QosReliability,
            QosTime,
        )  # fmt: skip
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore
    except ImportError as exc:
        raise ConfigurationError(needs("recording", exc.name or "rosbags", "record")) from None
    infinite = QosTime(sec=2147483647, nsec=4294967295)
    qos = Qos(
        QosHistory.KEEP_LAST, 10, QosReliability.RELIABLE, QosDurability.VOLATILE, infinite,
        infinite, QosLiveliness.AUTOMATIC, infinite, False,
    )  # fmt: skip
    return Rosbags(Writer, StoragePlugin.MCAP, get_typestore(Stores.ROS2_HUMBLE), qos)


def bag_name(model: str, wall_time_s: float) -> str:
    """``20261202-013000.123_pi05-droid``: when the episode started (UTC), then the model."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(wall_time_s))
    millis = int(wall_time_s * 1000) % 1000
    model_part = re.sub(r"[^A-Za-z0-9._-]+", "-", short_model_id(model)).strip("-") or "model"
    return f"{stamp}.{millis:03d}_{model_part}"


class BagFile:
    """An open bag: ``write`` a record's bytes on a topic, ``close`` writes the metadata.
    Every method may raise ``OSError`` (an unwritable path, a full disk)."""

    def __init__(self, path: Path, rosbags: Rosbags) -> None:
        self.path = path
        self.messages = Messages(rosbags.typestore)
        self._rosbags = rosbags
        self._writer = rosbags.writer_class(
            path, version=BAG_VERSION, storage_plugin=rosbags.storage
        )
        self._connections: dict[str, Any] = {}
        self.bytes_written = 0
        self._writer.open()
        for topic in topics.TOPICS:
            self.add_topic(topic.name, topic.msgtype)
        self.messages.warm()

    def write(self, topic: str, msgtype: str, stamp_ns: int, data: bytes) -> None:
        connection = self._connections.get(topic) or self.add_topic(topic, msgtype)
        self._writer.write(connection, stamp_ns, data)
        self.bytes_written += len(data)

    def add_topic(self, topic: str, msgtype: str) -> Any:
        """Make a topic's connection. Slow (rosbags writes its QoS as YAML), so topics are
        made before the episode wherever the recorder knows them."""
        connection = self._writer.add_connection(
            topic, msgtype, typestore=self._rosbags.typestore,
            offered_qos_profiles=[self._rosbags.qos],
        )  # fmt: skip
        self._connections[topic] = connection
        return connection

    def flush(self) -> None:
        """Put what was written so far on disk as a complete MCAP chunk: rosbags keeps up
        to 1 MiB in memory otherwise, which a crash would lose (and a full disk would fail
        only at the end)."""
        storage = getattr(self._writer, "storage", None)
        close_chunk = getattr(storage, "close_chunk", None)
        if close_chunk is None:
            return
        close_chunk()
        storage.bio.flush()  # type: ignore[union-attr]

    def close(self) -> None:
        self._writer.close()
