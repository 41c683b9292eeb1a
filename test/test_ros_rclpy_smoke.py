"""The node on real rclpy (ROS 2 Humble): skipped where rclpy cannot be imported.

Same loop as test_ros_node.py, but with real executors, DDS and message types.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest
from conftest import TEST_KEY

from sequence_ai_core.sim import GatewaySimulator

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("diagnostic_updater")

pytestmark = pytest.mark.ros
JOINTS = [f"joint_{i + 1}" for i in range(7)]


def _spin(executor: Any, until: Any, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not until() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    return bool(until())


def test_policy_node_on_real_rclpy(sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch) -> None:
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter
    from std_msgs.msg import Float64MultiArray

    from sequence_ai_ros.policy_node import PolicyNode
    from sequence_ai_ros.sim_arm_node import SimArmNode

    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(random.randint(100, 200)))  # keep off other tests
    context = rclpy.Context()
    rclpy.init(context=context)
    values = {
        "base_url": sim.url,
        "joint_names": JOINTS,
        "gripper_joint": "gripper",
        "gripper_dims": 1,
        "max_actions": 20,
    }
    nodes = []
    executor = SingleThreadedExecutor(context=context)
    try:
        node = PolicyNode(
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in values.items()],
        )
        arm = SimArmNode(
            context=context,
            parameter_overrides=[Parameter("camera_hz", value=0.0)],
            cli_args=["--ros-args", "-r", "command:=action"],
        )
        listener = rclpy.create_node("action_listener", context=context)
        received: list[Any] = []
        listener.create_subscription(Float64MultiArray, "action", received.append, 10)
        nodes = [node, arm, listener]
        for each in nodes:
            executor.add_node(each)
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
        assert node.start_episode() is None
        assert _spin(executor, lambda: not node.episodes.running)
        assert node.episodes.last_end.reason == "completed"
        assert _spin(executor, lambda: len(received) >= 21)  # 20 actions + the final hold
        assert all(len(m.data) == 8 for m in received)
        assert list(received[-1].data)[:7] == [0.0] * 7
        assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
        assert os.environ["SEQUENCES_API_KEY"] not in repr(node.get_parameters(["model"]))
    finally:
        executor.shutdown()
        for each in nodes:
            each.destroy_node()
        rclpy.try_shutdown(context=context)
