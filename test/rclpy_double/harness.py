"""Shared pieces of the node tests: the double installed around the real simulator, node
factories, and a driver node standing in for the operator (e-stop, services, hold service)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conftest import TEST_KEY

from sequence_ai_core.sim import GatewaySimulator

from . import install
from .graph import Graph

JOINTS = [f"joint_{i + 1}" for i in range(7)]
VIEWS = ["exterior_1", "wrist_left"]
HOLD_SERVICE = "/arm/hold"
SPIN_LIMIT_S = 10.0  # hang guard only


@pytest.fixture
def ros(sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Graph]:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    with install() as graph:
        yield graph


def policy_node(sim: GatewaySimulator, **changes: Any) -> Any:
    from rclpy.parameter import Parameter

    from sequence_ai_ros.policy_node import PolicyNode

    compressed = changes.pop("compressed", True)
    values: dict[str, Any] = {
        "base_url": sim.url,
        "joint_names": JOINTS,
        "gripper_joint": "gripper",
        "gripper_dims": 1,
        "gripper_topic": "gripper_command",
        "camera_views": VIEWS,
        "camera_topics": [
            f"camera/{v}/image_raw{'/compressed' if compressed else ''}" for v in VIEWS
        ],
        "camera_encodings": ["compressed" if compressed else "raw"] * 2,
        "image_size": [64, 64],
        "max_actions": 500,
        "hold_service": HOLD_SERVICE,
    }
    values.update(changes)
    overrides = [Parameter(k, value=v) for k, v in values.items() if v is not None]
    return PolicyNode(parameter_overrides=overrides)


def sim_arm(model: str = "pi05-droid", command_type: str = "float64_multi_array", **kw: Any) -> Any:
    from rclpy.parameter import Parameter

    from sequence_ai_ros.sim_arm_node import SimArmNode

    values = {"model": model, "command_type": command_type, "camera_hz": 20.0, **kw}
    return SimArmNode(
        parameter_overrides=[Parameter(k, value=v) for k, v in values.items()],
        cli_args=["--ros-args", "-r", "command:=action"],
    )


class Driver:
    """The test's own node: e-stop, instruction, service calls, and a hold service to count."""

    def __init__(self) -> None:
        from rclpy.node import Node
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger

        self.node = Node("driver")
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.Bool, self.String, self.Trigger = Bool, String, Trigger
        self.estop_pub = self.node.create_publisher(Bool, "estop", latched)
        self.instruction_pub = self.node.create_publisher(String, "instruction", latched)
        self.hold_calls = 0
        self.node.create_service(Trigger, HOLD_SERVICE, self._hold)

    def _hold(self, request: Any, response: Any) -> Any:
        self.hold_calls += 1
        response.success = True
        return response

    def call(self, service: str) -> Any:
        client = self.node.create_client(self.Trigger, service)
        return client.call_async(self.Trigger.Request()).result()

    def estop(self, engaged: bool) -> None:
        self.estop_pub.publish(self.Bool(data=engaged))


def bring_up(node: Any) -> None:
    from rclpy.lifecycle import TransitionCallbackReturn

    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.log_records
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS, node.log_records
    assert node.lifecycle_state == "active"


def spin_until_actions(graph: Graph, count: int, topic: str = "/action") -> None:
    start = len(graph.messages(topic))
    reached = graph.spin_for(
        SPIN_LIMIT_S, until=lambda: len(graph.messages(topic)) >= start + count
    )
    assert reached, f"fewer than {count} messages on {topic}"


def last_status(graph: Graph) -> Any:
    return graph.messages("/diagnostics")[-1].status[-1]


def status_values(status: Any) -> dict[str, str]:
    return {kv.key: kv.value for kv in status.values}
