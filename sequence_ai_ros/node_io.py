"""Every ROS interface the node creates on configure, and every message it sends.

QoS (DESIGN §6): sensors best effort (sensor-data profile, which also matches reliable
publishers); instruction and estop reliable + transient local, so a late-joining node still
sees a latched e-stop, plus volatile twins of each (reliable, and best effort), because DDS
matches no volatile or best-effort publisher (``create_publisher(Bool, "estop", 10)``) with
the latched one; commands reliable.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
from builtin_interfaces.msg import Duration, Time
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

try:  # Jazzy (rclpy 7.1); importing rclpy.qos_event there warns that it is deprecated
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble (rclpy 3.3)
    from rclpy.qos_event import SubscriptionEventCallbacks
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Bool, Float64MultiArray, MultiArrayDimension, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from sequence_ai_core.types import ABSOLUTE_SPACES, VELOCITY_SPACES, FloatArray, Model

from . import conversions as conv
from . import trajectories as traj
from .hold import hold_command
from .inputs import InputStore, RawImage
from .params import NodeConfig
from .safety import SafetyChecks

_OUTPUT_MESSAGES = {
    "float64_multi_array": Float64MultiArray,
    "joint_trajectory": JointTrajectory,
    "joint_state": JointState,
}
_TYPES = conv.MessageTypes(
    Float64MultiArray,
    MultiArrayDimension,
    JointTrajectory,
    JointTrajectoryPoint,
    JointState,
    Duration,
)


# Timer period until the first chunk says its rate, when neither the control_hz parameter
# nor the catalogue entry gives one.
FALLBACK_PERIOD_S = 0.1


def default_period(config: NodeConfig, model: Model) -> float:
    """The control period before a chunk arrives: parameter, else catalogue, else fallback."""
    hz = config.control_hz or model.control_hz
    return 1.0 / hz if hz and math.isfinite(hz) and hz > 0 else FALLBACK_PERIOD_S


def _seconds(stamp: Any) -> float:
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


class NodeIO:
    def __init__(self, node: Any, config: NodeConfig, model: Model) -> None:
        self.node = node
        self.config = config
        self.model = model
        self.inputs = InputStore(config)
        #: What the arm was last commanded, in action-space units (a hold included).
        self.last_action: FloatArray | None = None
        self._last_positions: FloatArray | None = None  # last joint targets sent
        self.action_space = ""
        self.period_s = default_period(config, model)  # the rate play() last used
        self.holds = 0  # holds for early stops (each also calls the hold service)
        self._underrun_held = False
        #: The chunk whose remaining steps went out as one trajectory (trajectory_mode=chunk).
        self._trajectory_seq: int | None = None
        self._streamer: traj.ChunkStreamer | None = None
        self._entities: list[tuple[Callable[[Any], Any], Any]] = []
        dims = config.gripper_dims
        single = dims == 1 and config.gripper_joint
        self.gripper_names = (
            [config.gripper_joint] if single else [f"gripper_{i}" for i in range(dims)]
        )
        self.hold_client: Any = None

    # ------------------------------------------------------------------ creation

    def create(self) -> None:
        node, config = self.node, self.config
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        msg_type = _OUTPUT_MESSAGES[config.output_type]
        self.action_pub = self._pub(msg_type, "action", reliable)
        self.gripper_pub = (
            self._pub(msg_type, config.gripper_topic, reliable) if config.gripper_topic else None
        )
        self.chunk_pub = self._pub(JointTrajectory, "~/chunk", reliable)
        sensor = qos_profile_sensor_data
        self._sub(JointState, "joint_states", self._on_joint_state, sensor)
        for camera in config.cameras:
            view, topic = camera.view, camera.topic
            if camera.compressed:
                self._sub(CompressedImage, topic, partial(self._on_compressed, view), sensor)
            else:
                self._sub(Image, topic, partial(self._on_image, view), sensor)
        # Each input three times: latched (state on join), reliable + volatile, and best effort
        # + volatile (matches any publisher). A message may arrive on several; the callbacks
        # are idempotent.
        anyone = QoSProfile(
            depth=10,
            reliability=ReliabilityPolicy.BEST_EFFORT,
            durability=DurabilityPolicy.VOLATILE,
        )
        # And reliable + volatile, so that a default-QoS publisher's one message is delivered
        # reliably: to the best-effort twin it goes best effort, and a single e-stop sent
        # right after discovery was lost that way (seen in the real-ROS tier).
        volatile = QoSProfile(
            depth=10,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.VOLATILE,
        )
        for qos in (latched, volatile, anyone):
            events = self._covered(qos is latched)
            self._sub(String, "instruction", self._on_instruction, qos, events)
            self._sub(Bool, "estop", self._on_estop, qos, events)
        start = node.create_service(Trigger, "~/start_episode", self._on_start)
        stop = node.create_service(Trigger, "~/stop", self._on_stop)
        self._entities += [(node.destroy_service, start), (node.destroy_service, stop)]
        if config.hold_service:
            self.hold_client = node.create_client(Trigger, config.hold_service)
            self._entities.append((node.destroy_client, self.hold_client))

    def _pub(self, msg_type: Any, topic: str, qos: QoSProfile) -> Any:
        publisher = self.node.create_lifecycle_publisher(msg_type, topic, qos)
        self._entities.append((self.node.destroy_lifecycle_publisher, publisher))
        return publisher

    def _sub(
        self, msg_type: Any, topic: str, callback: Any, qos: QoSProfile, events: Any = None
    ) -> None:
        subscription = self.node.create_subscription(
            msg_type, topic, callback, qos, event_callbacks=events
        )
        self._entities.append((self.node.destroy_subscription, subscription))

    def _covered(self, latched: bool) -> Any:
        """rclpy's default handler warns "offering incompatible QoS. No messages will be
        received from it" when a volatile publisher meets the latched subscription, which an
        operator reads as a broken e-stop; the twin subscription does receive it. Say so once."""
        if not latched:
            return None
        said = []

        def covered(event: Any) -> None:
            if not said:
                said.append(True)
                self.node.get_logger().info(
                    "a volatile publisher on estop/instruction is received by the node's "
                    "volatile subscriptions (the latched one cannot match it)"
                )

        return SubscriptionEventCallbacks(incompatible_qos=covered)

    def destroy(self) -> None:
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities.clear()

    # ------------------------------------------------------------------ callbacks

    def _on_joint_state(self, msg: Any) -> None:
        self.inputs.on_joint_state(msg.name, msg.position, msg.velocity, _seconds(msg.header.stamp))

    def _on_image(self, view: str, msg: Any) -> None:
        raw = RawImage(msg.height, msg.width, msg.encoding, msg.step, bytes(msg.data))
        self.inputs.on_image(view, raw, _seconds(msg.header.stamp))

    def _on_compressed(self, view: str, msg: Any) -> None:
        self.inputs.on_image(view, bytes(msg.data), _seconds(msg.header.stamp))

    def _on_instruction(self, msg: Any) -> None:
        self.inputs.instruction = msg.data

    def _on_estop(self, msg: Any) -> None:
        self.node.on_estop(bool(msg.data))

    def _on_start(self, request: Any, response: Any) -> Any:
        problem = self.node.start_episode()
        response.success = problem is None
        response.message = problem or f"episode {self.node.episodes.number} started"
        return response

    def _on_stop(self, request: Any, response: Any) -> Any:
        response.success = self.node.stop_episode("stopped", detail="~/stop service")
        response.message = "episode stopped" if response.success else "no episode running"
        return response

    # ------------------------------------------------------------------ sending

    def begin_episode(self) -> None:
        self.last_action = None
        self._last_positions = None
        self.action_space = ""
        self._underrun_held = False
        self._trajectory_seq = None
        self._streamer = None

    @property
    def streams_chunks(self) -> bool:
        return (
            self.config.output_type == "joint_trajectory" and self.config.trajectory_mode == "chunk"
        )

    def play(
        self,
        action: FloatArray,
        space: str,
        safety: SafetyChecks,
        period_s: float,
        tick: Any = None,
        remaining: int | None = None,
    ) -> str | None:
        """Check and publish one action; the reason it was refused, or None. With
        ``trajectory_mode=chunk`` the engine's ``tick`` says which chunk plays: its remaining
        steps go out once, as one trajectory, each checked like a single action first, and
        no more of them than the ``remaining`` actions of the episode (this one included)."""
        max_age = self.config.max_observation_age_s
        measured = self.inputs.measured_arm(max_age)
        previous = self.last_action
        first_absolute = previous is None and space == "joint_absolute"
        builds_positions = self.config.output_type != "float64_multi_array" and (
            space not in ABSOLUTE_SPACES
        )
        if measured is None and (first_absolute or builds_positions):
            # A target anchored at a stale reading would pull the arm back to it.
            return f"no fresh arm position: {self.inputs.arm_problem(max_age)}"
        if first_absolute:
            previous = measured  # the first target must not jump away from where the arm is
        elif previous is None and space in VELOCITY_SPACES:
            # The arm is still: bound the first velocity too (arm dims; the gripper is a position).
            previous = np.zeros(len(action) - self.config.gripper_dims)
        reason = safety.check(action, previous)
        if reason:
            return reason
        command = conv.command_from_action(
            action,
            action_space=space,
            gripper_dims=self.config.gripper_dims,
            measured=measured,
            period_s=period_s,
        )
        if self.streams_chunks and tick is not None:
            problem = self._stream(tick, action, space, safety, measured, period_s, remaining)
        else:
            problem = self._publish(command, period_s)
        if problem is None:
            self.last_action = action.copy()
            self._last_positions = command.positions
            self.action_space = space
            self.period_s = period_s
            self._underrun_held = False
        return problem

    def _stream(
        self,
        tick: Any,
        action: FloatArray,
        space: str,
        safety: SafetyChecks,
        measured: FloatArray | None,
        period_s: float,
        remaining: int | None = None,
    ) -> str | None:
        """Publish the rest of the playing chunk when it is new to the controller."""
        current = getattr(self.node.engine, "current_chunk", None)
        if self._trajectory_seq == tick.chunk_seq or current is None:
            return None  # the controller is already playing this chunk's trajectory
        chunk, anchor = current
        steps = np.array(chunk.steps[tick.step_index :], dtype=np.float64)
        if remaining is not None:
            # An absolute episode ends on its last target without a hold: the controller
            # would play whatever steps past max_actions the trajectory still carried.
            steps = steps[: max(1, remaining)]
        steps[0] = action  # what the engine plays now (and what play() checked)
        problem = traj.check_steps(steps[1:], action, safety.check)
        if problem:
            return problem
        streamer = self._streamer
        if streamer is None or streamer.action_space != space:
            streamer = self._streamer = traj.ChunkStreamer(
                action_space=space,
                gripper_dims=self.config.gripper_dims,
                velocities=self.config.trajectory_velocities,
            )
        late = traj.due_offset_s(anchor, tick.step_index, period_s, time.monotonic())
        stamp_ns = self.node.get_clock().now().nanoseconds - int(late * 1e9)
        planned = streamer.plan(
            steps, measured=measured, period_s=period_s, stamp_s=stamp_ns * 1e-9
        )
        if isinstance(planned, str):
            return planned
        stamp = Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
        names = self.config.joint_names
        rows = planned.velocities if planned.velocities is not None else [None] * len(planned)
        points = list(zip(planned.positions, rows, planned.times_s, strict=True))
        self.action_pub.publish(conv.joint_trajectory(_TYPES, names, points, stamp))
        if self.gripper_pub is not None and planned.gripper.shape[1]:
            grip = [(row, None, t) for row, t in zip(planned.gripper, planned.times_s, strict=True)]
            self.gripper_pub.publish(conv.joint_trajectory(_TYPES, self.gripper_names, grip, stamp))
        self._trajectory_seq = tick.chunk_seq
        return None

    def hold(self, *, early: bool) -> None:
        """Send the hold command; on an early stop also call the driver's hold service."""
        if early:
            self.holds += 1
            self._call_hold_service()
        if not self.action_space:
            return
        # Stale reading: hold at the last target sent (the controller's goal), not at it.
        measured = self.inputs.measured_arm(self.config.max_observation_age_s)
        command = hold_command(
            action_space=self.action_space,
            gripper_dims=self.config.gripper_dims,
            last_action=self.last_action,
            measured=self._last_positions if measured is None else measured,
        )
        if command is None:
            return
        self._trajectory_seq = None  # the hold replaces any trajectory sent
        if self._streamer is not None:
            self._streamer.reset()
        problem = self._publish(command, self.period_s)
        if problem:
            self.node.get_logger().error(f"hold not published: {problem}")
        else:
            # max_step compares the next action with what the arm was told last: the hold.
            self.last_action = np.concatenate([command.arm, command.gripper])
            self._last_positions = command.positions

    def hold_underrun(self) -> None:
        """Once per underrun spell: a velocity or delta command would otherwise keep
        running on a forward controller. Absolute targets already hold by themselves."""
        if self._underrun_held or self.last_action is None or self.action_space in ABSOLUTE_SPACES:
            return
        self._underrun_held = True
        self.hold(early=False)

    def _call_hold_service(self) -> None:
        client = self.hold_client
        if client is None:
            return
        if not client.service_is_ready():
            self.node.get_logger().error(
                f"hold service {self.config.hold_service} is not available"
            )
            return
        client.call_async(Trigger.Request()).add_done_callback(self._hold_answered)

    def _hold_answered(self, future: Any) -> None:
        response = future.result()
        if response is None or not response.success:
            message = getattr(response, "message", "no response")
            self.node.get_logger().error(f"hold service refused: {message}")

    def _publish(self, command: conv.Command, period_s: float) -> str | None:
        stamp = self.node.get_clock().now().to_msg()
        output, names = self.config.output_type, self.config.joint_names
        gripper_pub = self.gripper_pub
        split = gripper_pub is not None
        if output == "float64_multi_array":
            values = command.arm if split else np.concatenate([command.arm, command.gripper])
            self.action_pub.publish(conv.float64_multi_array(_TYPES, values, "action"))
        elif command.positions is None:
            return (
                f"output_type {output} needs joint positions: none measured on joint_states, "
                f"or action space {self.action_space or 'unknown'} has no joint targets"
            )
        elif output == "joint_trajectory":
            # Velocities only where the controller takes them at the last point (params.py).
            velocities = command.velocities
            if velocities is not None and np.any(velocities != 0.0):
                velocities = velocities if self.config.trajectory_velocities else None
            point = (command.positions, velocities, period_s)
            self.action_pub.publish(conv.joint_trajectory(_TYPES, names, [point], stamp))
        else:
            msg = conv.joint_state(_TYPES, names, command.positions, command.velocities, stamp)
            self.action_pub.publish(msg)
        if gripper_pub is not None and len(command.gripper):
            gripper_pub.publish(self._gripper_message(command.gripper, period_s, stamp))
        return None

    def _gripper_message(self, values: FloatArray, period_s: float, stamp: Any) -> Any:
        if self.config.output_type == "joint_trajectory":
            return conv.joint_trajectory(
                _TYPES, self.gripper_names, [(values, None, period_s)], stamp
            )
        if self.config.output_type == "joint_state":
            return conv.joint_state(_TYPES, self.gripper_names, values, None, stamp)
        return conv.float64_multi_array(_TYPES, values, "gripper")

    def publish_chunk(self, engine: Any) -> None:
        current = engine.current_chunk
        if current is None:
            return
        chunk, anchor = current
        now_ns = self.node.get_clock().now().nanoseconds
        anchor_ns = now_ns - int(max(0.0, time.monotonic() - anchor) * 1e9)
        stamp = Time(sec=anchor_ns // 1_000_000_000, nanosec=anchor_ns % 1_000_000_000)
        names = list(self.config.joint_names) + self.gripper_names
        if len(names) != chunk.action_dim:
            names = [f"dim_{i}" for i in range(chunk.action_dim)]
        msg = conv.chunk_trajectory(
            _TYPES,
            chunk.steps,
            names=names,
            action_space=chunk.action_space,
            control_hz=chunk.control_frequency_hz,
            stamp=stamp,
        )
        self.chunk_pub.publish(msg)
