"""launch_testing of launch/sim.launch.py on a real ROS 2 Humble installation.

Skipped here (no rclpy, no launch_testing). Under `colcon test` the launch_testing pytest
plugin runs generate_test_description: simulator + simulated arm + policy node come up, the
node is configured and activated by the launch file, and actions and diagnostics flow.
"""

from __future__ import annotations

import os
import time
import unittest
from typing import Any

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("launch_testing")

import launch_testing.actions
import launch_testing.asserts

PORT = "8799"


@pytest.mark.launch_test
def generate_test_description() -> Any:
    from ament_index_python.packages import get_package_share_directory
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import PythonLaunchDescriptionSource

    import launch

    share = get_package_share_directory("sequence_ai_ros")
    sim_launch = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(os.path.join(share, "launch", "sim.launch.py")),
        launch_arguments={"port": PORT}.items(),
    )
    return launch.LaunchDescription([sim_launch, launch_testing.actions.ReadyToTest()])


class TestSimLaunch(unittest.TestCase):
    def test_actions_and_diagnostics_flow(self, proc_output: Any) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from std_msgs.msg import Float64MultiArray

        rclpy.init()
        node = rclpy.create_node("sim_launch_probe")
        actions: list[Any] = []
        statuses: list[Any] = []
        try:
            node.create_subscription(Float64MultiArray, "/action", actions.append, 10)
            node.create_subscription(DiagnosticArray, "/diagnostics", statuses.append, 10)
            deadline = time.monotonic() + 40.0
            while time.monotonic() < deadline and (len(actions) < 30 or not statuses):
                rclpy.spin_once(node, timeout_sec=0.1)
        finally:
            node.destroy_node()
            rclpy.shutdown()
        self.assertGreaterEqual(len(actions), 30)
        self.assertTrue(all(len(m.data) == 7 for m in actions))  # gripper split off
        ids = {s.hardware_id for array in statuses for s in array.status}
        self.assertIn("sim_arm", ids)
        proc_output.assertWaitFor("episode 1 started", timeout=10)


@launch_testing.post_shutdown_test()
class TestSimLaunchShutdown(unittest.TestCase):
    def test_processes_exit_cleanly(self, proc_info: Any) -> None:
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
