"""The processes ``bench/ros_node.py`` runs beside the policy node, each its own process:

- ``feed``: the inputs, ``joint_states`` at 100 Hz (six joints and the gripper) and, with
  ``--cameras``, two 640x480 rgb8 ``Image`` topics at 30 Hz, built once and restamped;
- ``bare``: the bare rclpy node the policy node is measured against: it subscribes to the same
  topics with the same QoS, keeps the latest message of each, and publishes a 7-value
  ``Float64MultiArray`` on ``bare_action`` from a timer at ``--hz``.

``python -m bench._ros_peers feed|bare [--cameras] [--hz HZ] --ros-args -r __ns:=/ns``
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

JOINTS = [f"joint_{i + 1}" for i in range(6)]
GRIPPER = "gripper"
VIEWS = ("front", "wrist")
WIDTH, HEIGHT = 640, 480
STATE_HZ, CAMERA_HZ = 100.0, 30.0


def camera_topic(view: str) -> str:
    return f"camera/{view}/image_raw"


def _feed(node: Any, cameras: bool) -> None:
    import numpy as np
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState

    state = JointState(name=[*JOINTS, GRIPPER], position=[0.0] * (len(JOINTS) + 1))
    joints = node.create_publisher(JointState, "joint_states", qos_profile_sensor_data)

    def publish_state() -> None:
        state.header.stamp = node.get_clock().now().to_msg()
        joints.publish(state)

    node.create_timer(1.0 / STATE_HZ, publish_state)
    if not cameras:
        return
    rng = np.random.default_rng(0)
    images = []
    for view in VIEWS:
        msg = Image(height=HEIGHT, width=WIDTH, encoding="rgb8", step=WIDTH * 3)
        msg.data = rng.integers(0, 256, HEIGHT * WIDTH * 3, dtype=np.uint8).tobytes()
        msg.header.frame_id = f"camera_{view}"
        pub = node.create_publisher(Image, camera_topic(view), qos_profile_sensor_data)
        images.append((pub, msg))

    def publish_images() -> None:
        stamp = node.get_clock().now().to_msg()
        for pub, msg in images:
            msg.header.stamp = stamp
            pub.publish(msg)

    node.create_timer(1.0 / CAMERA_HZ, publish_images)


def _bare(node: Any, cameras: bool, hz: float) -> None:
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Float64MultiArray

    latest: dict[str, Any] = {}

    def keep(topic: str) -> Any:
        return lambda msg: latest.__setitem__(topic, msg)

    node.create_subscription(JointState, "joint_states", keep("joints"), qos_profile_sensor_data)
    for view in VIEWS if cameras else ():
        topic = camera_topic(view)
        node.create_subscription(Image, topic, keep(topic), qos_profile_sensor_data)
    action = node.create_publisher(Float64MultiArray, "bare_action", 10)

    def tick() -> None:
        action.publish(Float64MultiArray(data=[0.0] * (len(JOINTS) + 1)))

    node.create_timer(1.0 / hz, tick)


def main(argv: list[str]) -> None:
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.utilities import remove_ros_args, try_shutdown

    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("feed", "bare"))
    parser.add_argument("--cameras", action="store_true")
    parser.add_argument("--hz", type=float, default=30.0)
    args = parser.parse_args(remove_ros_args(argv)[1:])
    rclpy.init(args=argv)
    node = rclpy.create_node(f"bench_{args.role}")
    if args.role == "feed":
        _feed(node, args.cameras)
    else:
        _bare(node, args.cameras, args.hz)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        try_shutdown()


if __name__ == "__main__":
    main(sys.argv)
