"""Real rclpy: the node with ``record_dir`` records each episode into a bag that holds what it
published.

The node runs in its own process on the simulator and the simulated arm; the test's probe
captures what it publishes. The bag is read back as raw CDR (rosbags' reader) and every
message in it is deserialized by real rclpy (``rclpy.serialization.deserialize_message``)
into the message classes of the distro: the commands must be the published ones, value for
value, in order; the outcome the episode end the node reported on /diagnostics; and the key
must be in no byte of the bag. Without rosbags, configure fails with the install hint.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticStatus
from rclpy.serialization import deserialize_message
from rosbags.rosbag2 import Reader
from sensor_msgs.msg import CompressedImage, JointState
from std_msgs.msg import Float64MultiArray
from support import TEST_KEY
from support.realros import Recording, Tier, tier, wait_for
from support.realros.nodes import PolicyNode, sim_arm
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_core.recording import topics
from sequence_ai_core.recording.extras import needs
from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]

#: The types a bag of the recorder holds, as the distro's rclpy knows them.
CLASSES = {
    "sensor_msgs/msg/JointState": JointState,
    "sensor_msgs/msg/CompressedImage": CompressedImage,
    "trajectory_msgs/msg/JointTrajectory": JointTrajectory,
    "std_msgs/msg/Float64MultiArray": Float64MultiArray,
    "diagnostic_msgs/msg/DiagnosticStatus": DiagnosticStatus,
}
#: In every request's instruction, so there is a key for the recorder to keep out.
INSTRUCTION = f"stack the cups (token {TEST_KEY})"
ARM = 7  # pi05-droid: 7 joint velocities, then the gripper (on gripper_command)


def listen(tier: Tier, topic: str) -> tuple[Recording, Any]:
    recording = Recording(topic)
    return recording, tier.probe.node.create_subscription(Float64MultiArray, topic, recording, 100)


def recorded_node(
    tier: Tier, sim: GatewaySimulator, bags: Path, max_actions: int
) -> tuple[PolicyNode, Recording, Recording]:
    """The node up and recording, every one of its action and gripper messages captured."""
    sim_arm(tier)
    node = PolicyNode(
        tier, sim, max_actions=max_actions, record_dir=str(bags), instruction=INSTRUCTION
    )
    actions, arm_sub = listen(tier, "action")
    grippers, gripper_sub = listen(tier, "gripper_command")
    node.bring_up()
    for subscription in (arm_sub, gripper_sub):  # matched before anything is published
        wait_for(lambda s=subscription: s.get_publisher_count() >= 1, what="the node's publisher")
    return node, actions, grippers


def finished_bag(node: PolicyNode, end: dict[str, str]) -> Path:
    """The episode's bag, complete: cleanup waits for the recorders still finishing."""
    assert node.transition("deactivate") and node.transition("cleanup"), node.output()
    bag = Path(end["recording"])
    assert (bag / "metadata.yaml").is_file(), list(bag.parent.glob("*/*"))
    return bag


def read_with_rclpy(bag: Path) -> list[tuple[str, Any]]:
    """(topic, message) for every message of the bag, in order: raw CDR from the bag,
    deserialized by rclpy into the distro's message classes."""
    read = []
    with Reader(bag) as reader:
        for connection in reader.connections:
            assert connection.msgtype in CLASSES, connection.msgtype
        for connection, _, raw in reader.messages():
            read.append((connection.topic, deserialize_message(raw, CLASSES[connection.msgtype])))
    return read


def on(read: list[tuple[str, Any]], topic: str) -> list[Any]:
    return [message for name, message in read if name == topic]


def values(status: Any) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}


def assert_commands_are_the_published(
    commands: list[Any], actions: list[Any], grippers: list[Any]
) -> None:
    """Each command recorded is what went out at its tick, arm and gripper together."""
    assert len(commands) >= 1
    for command, arm, gripper in zip(commands, actions, grippers, strict=False):
        (dim,) = command.layout.dim
        assert (dim.label, dim.size, dim.stride) == ("joint_velocity", ARM + 1, ARM + 1)
        assert np.array_equal(np.asarray(command.data[:ARM]), np.asarray(arm.data))
        assert np.array_equal(np.asarray(command.data[ARM:]), np.asarray(gripper.data))


def assert_key_absent(bag: Path) -> None:
    files = [path for path in bag.rglob("*") if path.is_file()]
    assert any(path.suffix == ".mcap" for path in files), files
    for path in files:
        assert TEST_KEY.encode() not in path.read_bytes(), path


def assert_outcome_is_the_reported_end(outcome: Any, end: dict[str, str]) -> None:
    """The bag's outcome (every value, exact) against /diagnostics' ``last.*`` (rounded to
    four digits there)."""
    recorded = values(outcome)
    reported = {k.removeprefix("last."): v for k, v in end.items() if k.startswith("last.")}
    assert outcome.message == end["last.reason"] and len(reported) >= 15, reported
    for name, shown in reported.items():
        value = recorded[name]
        if name in ("reason", "label") or value.lstrip("-").isdigit():  # texts, counts
            assert value == shown, name
        else:
            number = float(value)
            assert math.isnan(number) or f"{number:.4g}" == shown, (name, value, shown)


def test_the_bag_holds_the_commands_the_node_published_and_its_outcome(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node, actions, grippers = recorded_node(tier, sim, tier.logs / "bags", max_actions=45)
    node.start_episode()
    end = node.episode_end(1)
    assert end["last.reason"] == "completed" and end["last.actions"] == "45", end
    assert end["recording"].startswith(str(tier.logs / "bags")), end
    # 45 commands, then the zeros that end a completed velocity episode
    published = actions.wait_count(46)
    gripped = grippers.wait_count(46)
    bag = finished_bag(node, end)
    read = read_with_rclpy(bag)
    assert {type(message) for _, message in read} == set(CLASSES.values())  # images too
    commands = on(read, topics.COMMAND.name)
    assert len(commands) == 45 and len(published) == len(gripped) == 46
    assert_commands_are_the_published(commands, published, gripped)
    assert not np.asarray(published[45].data).any()  # the hold is not a command ...
    (hold,) = on(read, topics.HOLD.name)  # ... it is the one hold, with the episode's end
    assert hold.message == "completed"
    (outcome,) = on(read, topics.OUTCOME.name)
    assert_outcome_is_the_reported_end(outcome, end)
    (account,) = on(read, topics.RECORDING.name)
    assert values(account)["dropped"] == "0" and end["recording_dropped"] == "0"
    joints = on(read, topics.OBSERVATION.name)
    requests = on(read, topics.REQUEST.name)
    assert len(joints) == len(requests) >= 2
    assert all(list(j.name) == [f"joint_{i + 1}" for i in range(ARM)] for j in joints)
    assert all(values(r)["instruction"] == INSTRUCTION.replace(TEST_KEY, "***") for r in requests)
    images = [m for name, m in read if name.startswith(topics.IMAGE_PREFIX)]
    assert images and all(bytes(image.data[:2]) == b"\xff\xd8" for image in images)  # JPEG
    assert len(on(read, topics.CHUNK.name)) == len(on(read, topics.CHUNK_INFO.name)) >= 2
    assert_key_absent(bag)


def test_an_estop_is_recorded_as_the_hold_that_ended_the_episode(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node, actions, grippers = recorded_node(tier, sim, tier.logs / "bags", max_actions=1500)
    node.start_episode()
    actions.wait_count(10)
    node.estop(True)
    end = node.episode_end(1)
    assert end["last.reason"] == "estop", end
    count = int(end["last.actions"])
    published = actions.wait_count(count + 1)  # the commands, then the hold's zeros
    gripped = grippers.wait_count(count + 1)
    bag = finished_bag(node, end)
    read = read_with_rclpy(bag)
    commands = on(read, topics.COMMAND.name)
    assert len(commands) == count >= 10
    assert_commands_are_the_published(commands, published[:count], gripped[:count])
    assert not np.asarray(published[count].data).any()
    assert [hold.message for hold in on(read, topics.HOLD.name)] == ["estop"]
    (outcome,) = on(read, topics.OUTCOME.name)
    assert_outcome_is_the_reported_end(outcome, end)
    assert_key_absent(bag)


def test_recording_without_rosbags_fails_configure_with_the_install_hint(
    tier: Tier, sim: GatewaySimulator
) -> None:
    shadow = tier.logs / "no_rosbags" / "rosbags"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'rosbags'\", name='rosbags')\n"
    )
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH")) if p)
    node = PolicyNode(tier, sim, record_dir=str(tier.logs / "bags"), env={"PYTHONPATH": path})
    node.wait_up()
    assert not node.transition("configure")
    assert node.state() == "unconfigured"
    status = node.status_where(
        lambda s: "configure_problem" in node.values(s), "the configure problem"
    )
    expected = "configure failed: ConfigurationError: " + needs("recording", "rosbags", "record")
    assert status.message == expected and node.values(status)["configure_problem"] == expected
    assert not (tier.logs / "bags").exists()  # refused before anything was made
    assert node.transition("configure") is False  # unconfigured, so it can be tried again
