"""The recorder's bag as ``ros2 bag`` and rosbags read it: the directory's metadata, the
standard message types, every topic on one clock; and the command fast path byte-equal to
rosbags' own serializer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore
from support.recorded import record_episode

from sequence_ai_core.action_spaces import ACTION_SPACES
from sequence_ai_core.recording import topics
from sequence_ai_core.recording.bag import BAG_VERSION
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_core.recording.messages import Messages
from sequence_ai_sim import GatewaySimulator

HUMBLE = get_typestore(Stores.ROS2_HUMBLE)
JAZZY = get_typestore(Stores.ROS2_JAZZY)


def test_the_bag_is_a_rosbag2_mcap_directory_with_standard_types(
    sim: GatewaySimulator, tmp_path: Path
) -> None:
    episode = record_episode(sim.url, "lingbot-va-5b", RecordConfig(tmp_path), max_actions=40)
    metadata = yaml.safe_load((episode.bag / "metadata.yaml").read_text())
    info = metadata["rosbag2_bagfile_information"]
    assert info["version"] == BAG_VERSION == 8 and info["storage_identifier"] == "mcap"
    assert info["relative_file_paths"] == [f"{episode.bag.name}.mcap"]
    declared = {t.name: t.msgtype for t in topics.TOPICS}
    with Reader(episode.bag) as reader:
        types = {c.topic: c.msgtype for c in reader.connections}
        for topic, msgtype in types.items():
            expected = topics.IMAGE_TYPE if topic.startswith(topics.IMAGE_PREFIX) else None
            assert msgtype == (expected or declared[topic])
            assert msgtype in HUMBLE.types and msgtype in JAZZY.types
        counts = {c.topic: c.msgcount for c in reader.connections}
        assert counts[topics.COMMAND.name] == episode.outcome.actions == 40
        assert reader.message_count == info["message_count"]
        sent = iter(episode.sent)
        stamps = []
        for connection, stamp, raw in reader.messages():
            stamps.append(stamp)
            if connection.topic == topics.COMMAND.name:
                message = HUMBLE.deserialize_cdr(raw, connection.msgtype)
                assert np.array_equal(message.data, next(sent))
        assert stamps == sorted(stamps)
        assert reader.start_time <= stamps[0] and stamps[-1] < reader.end_time


@pytest.mark.parametrize("space", ACTION_SPACES)
@pytest.mark.parametrize("dim", [1, 7, 8, 32])
def test_a_commands_bytes_are_what_rosbags_serializes(space: str, dim: int) -> None:
    messages = Messages(HUMBLE)
    rng = np.random.default_rng(dim)
    for _ in range(3):  # the cached layout is reused
        action = rng.normal(size=dim)
        fast = messages.command(action, space)
        dimension = HUMBLE.types["std_msgs/msg/MultiArrayDimension"](
            label=space, size=dim, stride=dim
        )
        layout = HUMBLE.types["std_msgs/msg/MultiArrayLayout"](dim=[dimension], data_offset=0)
        reference = HUMBLE.types["std_msgs/msg/Float64MultiArray"](layout=layout, data=action)
        assert fast == bytes(HUMBLE.serialize_cdr(reference, topics.COMMAND.msgtype))
