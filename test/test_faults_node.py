"""The ROS node's episode under gateway faults (through the rclpy test double, real simulator).

Each case starts an episode on lingbot-vla-v2-6b (30 Hz, 6 joints + gripper), lets a few
actions out, injects a fault, and checks: the episode's end reason, one hold (zero velocities
on ``action`` and one call of the driver's hold service), only finite right-sized commands
ever published, diagnostics naming the error, and the key in no log, message, parameter or
diagnostics value.
"""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest
from conftest import TEST_KEY
from faultkit import PERSISTENT, wait_until
from rclpy_double import real_rclpy_available
from rclpy_double.graph import Graph
from rclpy_double.harness import (
    SPIN_LIMIT_S,
    Driver,
    bring_up,
    last_status,
    policy_node,
    ros,
    sim_arm,
    spin_until_actions,
    status_values,
)

from sequence_ai_core.sim import Fault, GatewaySimulator

pytestmark = pytest.mark.skipif(
    real_rclpy_available(),
    reason="real rclpy present: test_ros_rclpy_smoke.py and test_ros_launch.py cover the node",
)
__all__ = ["ros"]  # the fixture, imported for pytest to find

MODEL = "lingbot-vla-v2-6b"
JOINTS = [f"joint_{i + 1}" for i in range(6)]
WARN, ERROR = b"\x01", b"\x02"


def node_for(sim: GatewaySimulator, **changes: Any) -> Any:
    values: dict[str, Any] = {
        "model": MODEL,
        "joint_names": JOINTS,
        "camera_views": ["front", "wrist"],
        "camera_topics": [f"camera/{v}/image_raw/compressed" for v in ("front", "wrist")],
    }
    values.update(changes)
    return policy_node(sim, **values)


def assert_commands_safe(graph: Graph) -> None:
    for msg in graph.messages("/action"):
        assert len(msg.data) == len(JOINTS) and all(math.isfinite(v) for v in msg.data)
    for msg in graph.messages("/gripper_command"):
        assert len(msg.data) == 1 and 0.0 <= msg.data[0] <= 1.0


def assert_key_nowhere(graph: Graph, node: Any) -> None:
    texts = [text for _, text in node.log_records]
    texts += [repr(msg) for _, msg in graph.published]  # includes every diagnostics value
    texts += [repr(p.value) for p in node._parameters.values()]
    assert not [t for t in texts if TEST_KEY in t]


NODE_CASES = [
    pytest.param(Fault.status(401), 1, "raised:AuthError", ERROR, id="401"),
    pytest.param(Fault.status(402), 1, "raised:OutOfCredit", ERROR, id="402"),
    pytest.param(Fault.status(500), 1, "raised:SequencesError", ERROR, id="500"),
    pytest.param(Fault.status(429), PERSISTENT, "raised:Unavailable", ERROR, id="429-persistent"),
    pytest.param(Fault.reset(), PERSISTENT, "raised:Unavailable", ERROR, id="reset-persistent"),
    # A cold worker is "wait", not "page someone": diagnostics warn (DESIGN section 6).
    pytest.param(Fault.warming(0.05), 1, "raised:Unavailable", WARN, id="503-warming"),
    pytest.param(Fault.nan(), 1, "raised:InvalidResponse", ERROR, id="nan"),
]


@pytest.mark.parametrize(("fault", "times", "reason", "level"), NODE_CASES)
def test_node_episode_stops_once_on_fault(
    ros: Graph, sim: GatewaySimulator, fault: Fault, times: int, reason: str, level: bytes
) -> None:
    sim_arm(MODEL)
    driver = Driver()
    node = node_for(sim)
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 3)
    sim.inject(fault, times=times)
    assert ros.spin_for(SPIN_LIMIT_S, until=lambda: not node.episodes.running)
    end = node.episodes.last_end
    assert end.reason == reason and end.early
    assert driver.hold_calls == 1
    assert list(ros.messages("/action")[-1].data) == [0.0] * len(JOINTS)
    assert_commands_safe(ros)
    published = len(ros.messages("/action"))
    ros.spin_for(0.2)
    assert len(ros.messages("/action")) == published  # nothing moves after the stop
    node.health.publish_now()
    status = last_status(ros)
    error_class = reason.split(":")[1]
    assert status.level == level and error_class in status.message
    assert status_values(status)["last.reason"] == reason
    assert_key_nowhere(ros, node)


def test_node_retries_a_transient_fault_and_completes(ros: Graph, clean_env: Any) -> None:
    """A refill is started about 1.5 round trips before the plan ends, so with a 100 ms
    model latency an instant 503 leaves ~150 ms of plan for the retry (the retry is only
    allowed while the plan lasts; with a tight margin the episode stops instead)."""
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.1) as slow:
        episode_with_one_transient_fault(ros, slow)


def episode_with_one_transient_fault(ros: Graph, sim: GatewaySimulator) -> None:
    sim_arm(MODEL)
    driver = Driver()
    node = node_for(sim, max_actions=40)
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 3)
    sim.inject(Fault.status(503), times=1)
    assert ros.spin_for(SPIN_LIMIT_S, until=lambda: not node.episodes.running)
    assert node.episodes.last_end.reason == "completed"
    assert driver.hold_calls == 0
    assert node._last_outcome.retries >= 1
    assert_commands_safe(ros)
    assert_key_nowhere(ros, node)


def test_gateway_gone_mid_episode_then_shutdown_leaves_nothing(ros: Graph, clean_env: Any) -> None:
    threads = set(threading.enumerate())
    sim = GatewaySimulator(api_key=TEST_KEY, latency_s=0.02).start()
    try:
        sim_arm(MODEL)
        driver = Driver()
        node = node_for(sim)
        bring_up(node)
        assert node.start_episode() is None
        spin_until_actions(ros, 3)
        sim.stop()
        assert ros.spin_for(SPIN_LIMIT_S, until=lambda: not node.episodes.running)
        assert node.episodes.last_end.reason == "raised:Unavailable"
        assert driver.hold_calls == 1
        assert_commands_safe(ros)
        node.trigger_shutdown()
    finally:
        sim.stop()
    assert wait_until(lambda: set(threading.enumerate()) <= threads), threading.enumerate()


@pytest.mark.parametrize("field", ["position", "velocity"])
def test_non_finite_joint_state_mid_episode_is_an_input_problem(
    ros: Graph, sim: GatewaySimulator, field: str
) -> None:
    """A driver publishing NaN (a joint without a velocity sensor, a glitch) must not crash
    the executor: the NaN is never sent or published, and the episode either carries on
    (the reading refused as an input problem) or stops with exactly one hold."""
    from rclpy.node import Node
    from sensor_msgs.msg import JointState

    driver = Driver()
    states = Node("glitchy_driver").create_publisher(JointState, "joint_states", 10)
    node = node_for(
        sim,
        max_observation_age_s=5.0,
        camera_views=None,
        camera_topics=None,
        camera_encodings=None,
    )
    bring_up(node)

    def publish(value: float) -> None:
        msg = JointState(name=[*JOINTS, "gripper"], position=[0.0] * 6 + [0.5])
        msg.velocity = [0.0] * 7
        getattr(msg, field)[2] = value
        states.publish(msg)

    publish(0.0)
    assert node.start_episode() is None
    try:
        spin_until_actions(ros, 3)
        publish(math.nan)
        ros.spin_for(1.0, until=lambda: not node.episodes.running)  # raises if a callback did
        for record in sim.received:
            proprio = record["observation"]["proprioception"]
            values = proprio["joint_positions"] + proprio.get("joint_velocities", [])
            assert all(math.isfinite(v) for v in values)
        assert_commands_safe(ros)
        publish(0.0)
        if node.episodes.running:
            assert driver.call("/sequence_ai/stop").success
        assert driver.hold_calls == 1
    finally:
        node.trigger_shutdown()  # closes the engine's refill threads even after a crash
