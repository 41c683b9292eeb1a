"""A simulated arm as a ROS node, for running the policy node without a robot.

Publishes ``joint_states`` and one camera topic per model view, and follows commands of the
same type the policy node publishes (``command``, plus ``gripper_command`` when the gripper
is split off): the output type (``outputs/``) names the message class, and the simulator
(``sequence_ai_sim.commands``) reads messages of that class. Built on
``sequence_ai_sim.SimulatedArm``. The ``controller`` parameter puts a ros2_control
controller model in front of the joints (``forward_command`` takes Float64MultiArray, the
``jtc_*`` models JointTrajectory), which accepts and rejects what the real controller does
and logs its messages.

``operator_command`` is a person's teleop device: messages of the same type, applied exactly
as ``command`` is (the device drives the same controller interface as the policy), and
counted apart (``operator_commands``), for trying a takeover without a robot.
"""

from __future__ import annotations

import base64
import io
from typing import Any

import numpy as np
import rclpy
from PIL import Image as PILImage
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from rclpy.utilities import try_shutdown
from sensor_msgs.msg import CompressedImage, Image, JointState

from sequence_ai_core.node_api import FloatArray, kind_of
from sequence_ai_ros import outputs
from sequence_ai_ros.messages import MESSAGE_TYPES
from sequence_ai_sim import SimulatedArm
from sequence_ai_sim.commands import controller_takes, reader_for
from sequence_ai_sim.controllers import CONTROLLER_MODELS


# Where rclpy is not installed (the usual type check) Node is Any; Jazzy's wheels are typed.
class SimArmNode(Node):  # type: ignore[misc, unused-ignore]
    def __init__(self, node_name: str = "sim_arm", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        model = self._param("model", "pi05-droid", "Simulated model whose arm this is.")
        command_type = self._param(
            "command_type", outputs.DEFAULT, f"Command message type: {' | '.join(outputs.names())}."
        )
        msg_type = outputs.get(command_type).message_type(MESSAGE_TYPES)
        self._reader = reader_for(msg_type)
        state_hz = self._param("state_hz", 50.0, "joint_states publish rate.")
        camera_hz = self._param("camera_hz", 10.0, "Camera publish rate; 0 = no cameras.")
        self._compressed = self._param("image_format", "compressed", "compressed | raw") != "raw"
        controller = self._param(
            "controller", "none", f"none | {' | '.join(CONTROLLER_MODELS)} (ros2_control model)"
        )
        if controller != "none" and not controller_takes(controller, msg_type):
            takes = [
                name
                for name, output in outputs.OUTPUT_TYPES.items()
                if controller_takes(controller, output.message_type(MESSAGE_TYPES))
            ]
            raise ValueError(f"controller {controller} takes command_type {' or '.join(takes)}")
        self.arm = SimulatedArm(model, cameras=camera_hz > 0, controller=controller)
        self.rejected = 0
        joints = self.arm.model.joint_count
        self.joint_names = [f"joint_{i + 1}" for i in range(joints)]
        self.gripper_joint = self._param("gripper_joint", "gripper", "Name of the gripper joint.")
        self._velocity = kind_of(self.arm.model.action_space) == "velocity"
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(msg_type, "command", self._on_command, reliable)
        self.create_subscription(msg_type, "operator_command", self._on_operator, reliable)
        self.create_subscription(msg_type, "gripper_command", self._on_gripper, reliable)
        self._joint_pub = self.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        image_type = CompressedImage if self._compressed else Image
        suffix = "image_raw/compressed" if self._compressed else "image_raw"
        self._camera_pubs = {
            view: self.create_publisher(
                image_type, f"camera/{view}/{suffix}", qos_profile_sensor_data
            )
            for view in self.arm.model.camera_views
        }
        self.create_timer(1.0 / state_hz, self.publish_state)
        if camera_hz > 0:
            self.create_timer(1.0 / camera_hz, self.publish_images)
        #: Accepted commands: the policy's (``command``, ``gripper_command``), the operator's.
        self.commands = 0
        self.operator_commands = 0

    def _param(self, name: str, default: Any, description: str) -> Any:
        descriptor = ParameterDescriptor(description=description)
        return self.declare_parameter(name, default, descriptor).value

    def publish_state(self) -> None:
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = [*self.joint_names, self.gripper_joint]
        msg.position = [float(v) for v in self.arm.joint_positions] + [self.arm.gripper]
        self._joint_pub.publish(msg)

    def publish_images(self) -> None:
        observation = self.arm.observe()
        stamp = self.get_clock().now().to_msg()
        for frame in observation.images:
            publisher = self._camera_pubs[frame.view]
            # SimulatedArm encodes bytes; base64 text is the other form an ImageFrame takes.
            data = frame.data if isinstance(frame.data, bytes) else base64.b64decode(frame.data)
            if self._compressed:
                msg: Any = CompressedImage(format="jpeg", data=data)
            else:
                pixels = np.asarray(PILImage.open(io.BytesIO(data)).convert("RGB"))
                height, width = pixels.shape[:2]
                msg = Image(height=height, width=width, encoding="rgb8", step=width * 3)
                msg.data = pixels.tobytes()
            msg.header.stamp = stamp
            msg.header.frame_id = f"camera_{frame.view}"
            publisher.publish(msg)

    def _apply(self, arm: FloatArray, gripper: float) -> bool:
        try:
            self.arm.act(np.append(arm, gripper))
        except ValueError as exc:
            self.get_logger().error(f"command refused: {exc}")
            return False
        return True

    def _on_command(self, msg: Any) -> None:
        if self._follow(msg):
            self.commands += 1

    def _on_operator(self, msg: Any) -> None:
        if self._follow(msg):
            self.operator_commands += 1

    def _follow(self, msg: Any) -> bool:
        """Apply an arm command (the gripper may ride along); True if it was accepted."""
        if self.arm.controlled is not None:
            return self._to_controller(msg)
        values = np.asarray(self._reader.values(msg, velocity=self._velocity), dtype=np.float64)
        joints = self.arm.model.joint_count
        if len(values) == joints + 1:
            return self._apply(values[:joints], float(values[joints]))
        if len(values) == joints:
            return self._apply(values, self.arm.gripper)
        self.get_logger().error(f"command has {len(values)} values, expected {joints}(+1)")
        return False

    def _to_controller(self, msg: Any) -> bool:
        joints = self.arm.model.joint_count
        command = self._reader.controller_command(msg)
        if isinstance(command, list) and len(command) == joints + 1:  # the gripper rides along
            problem = self.arm.send(command[:joints], gripper=command[joints])
        else:
            problem = self.arm.send(command)
        if problem:
            self.rejected += 1
            self.get_logger().error(problem)  # what the real controller logs
        return not problem

    def _on_gripper(self, msg: Any) -> None:
        values = self._reader.values(msg, velocity=False)
        if values and self.arm.controlled is not None:
            self.arm.send_gripper(float(values[0]))
            self.commands += 1
        elif values:
            hold = (
                np.zeros(self.arm.model.joint_count) if self._velocity else self.arm.joint_positions
            )
            if self._apply(hold, float(values[0])):
                self.commands += 1


def main(args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    node = SimArmNode()
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
    main()
