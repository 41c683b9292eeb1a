"""Every ROS interface the node creates on configure, and the callbacks behind them.

Callbacks store inputs (``InputStore``) or call the episode controller, a narrow protocol
(start, stop, label, e-stop, takeover, the operator's commands), never the node as a whole.
Commands go out through ``CommandSink`` on the publishers made here.

QoS (docs/architecture.md §4; the tables are in docs/node.md): sensors best effort
(sensor-data profile, which also matches reliable publishers; cameras keep their newest frame
only, taken when a request is due); instruction, estop and
takeover reliable + transient local, so a late-joining node still sees a latched e-stop,
plus volatile twins of each (reliable, and best effort), because DDS matches no volatile or
best-effort publisher (``create_publisher(Bool, "estop", 10)``) with the latched one;
commands reliable; the operator's commands (``teleop_topic``) best effort, matching any.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal, Protocol

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

try:  # Jazzy (rclpy 7.1); importing rclpy.qos_event there warns that it is deprecated
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble (rclpy 3.3)
    from rclpy.qos_event import SubscriptionEventCallbacks
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Bool, String
from std_srvs.srv import SetBool, Trigger
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_core.node_api import Label

from .command_sink import Publishers
from .inputs import InputStore, RawImage
from .messages import MESSAGE_TYPES
from .outputs import OutputType
from .parameters import NodeConfig
from .sensor_inputs import SensorInputs


class EpisodeController(Protocol):
    """What the interfaces may ask of the node: the e-stop, and the two episode services."""

    @property
    def episode_number(self) -> int: ...

    def start_episode(self) -> str | None: ...

    # Only the reason the ~/stop service gives: a node whose reasons are a Literal matches too.
    def stop_episode(self, reason: Literal["stopped"], *, detail: str) -> bool: ...

    def on_estop(self, engaged: bool) -> None: ...

    def set_takeover(self, engaged: bool, source: str) -> str:
        """A person takes the arm (True) or hands it back; what happened, for the log."""

    def end_episode(self, label: Label) -> bool:
        """Stop the running episode with a person's label; False if none was running."""

    def on_teleop(self, msg: Any) -> None:
        """An operator's command on ``teleop_topic``."""


#: A camera's subscription: best effort as the sensor-data profile, and only the newest frame
#: kept, which is all a request takes (sensor_inputs.OnDemand).
NEWEST_FRAME = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)


def _stamp_s(stamp: Any) -> float:
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def _pixels(data: Any) -> bytes | memoryview:
    """An Image's data without a copy (rclpy gives an ``array.array``): the store keeps the
    latest frame, and only a request converts one."""
    try:
        return memoryview(data)
    except TypeError:  # a list of ints
        return bytes(data)


class NodeInterfaces:
    def __init__(
        self, node: Any, config: NodeConfig, inputs: InputStore, controller: EpisodeController
    ) -> None:
        self.node = node  # the rclpy node the entities belong to
        self.config = config
        self.inputs = inputs
        self.controller = controller
        self.hold_client: Any = None
        self._entities: list[tuple[Callable[[Any], Any], Any]] = []

    # ------------------------------------------------------------------ creation

    def create(self, output: OutputType) -> Publishers:
        """Subscriptions, services, the hold client, and the publishers, which it returns."""
        node, config = self.node, self.config
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        msg_type = output.message_type(MESSAGE_TYPES)
        action = self._pub(msg_type, "action", reliable)
        gripper = (
            self._pub(msg_type, config.gripper_topic, reliable) if config.gripper_topic else None
        )
        chunk = self._pub(JointTrajectory, "~/chunk", reliable)
        self._create_sensor_inputs()
        self._create_latched_inputs()
        start = node.create_service(Trigger, "~/start_episode", self._on_start)
        stop = node.create_service(Trigger, "~/stop", self._on_stop)
        end = node.create_service(SetBool, "~/end_episode", self._on_end)
        takeover = node.create_service(SetBool, "~/set_takeover", self._on_set_takeover)
        self._entities += [(node.destroy_service, s) for s in (start, stop, end, takeover)]
        if config.teleop_topic:
            teleop = self.controller.on_teleop
            self._sub(msg_type, config.teleop_topic, teleop, qos_profile_sensor_data)
        if config.hold_service:
            self.hold_client = node.create_client(Trigger, config.hold_service)
            self._entities.append((node.destroy_client, self.hold_client))
        return Publishers(action=action, gripper=gripper, chunk=chunk)

    def _create_sensor_inputs(self) -> None:
        """Cameras and joint_states, off the control executor (sensor_inputs.py); the
        cameras' frames taken when ``observe`` needs them."""
        sensors = SensorInputs(self.node, self.log_error)
        self._entities.append((SensorInputs.destroy, sensors))
        sensors.subscribe(JointState, "joint_states", self._on_joint_state, qos_profile_sensor_data)
        cameras = []
        for camera in self.config.cameras:
            kind, store = (
                (CompressedImage, self._on_compressed)
                if camera.compressed
                else (Image, self._on_image)
            )
            deliver = partial(store, camera.view)
            cameras.append(sensors.on_demand(kind, camera.topic, deliver, NEWEST_FRAME))

        def pull_frames() -> None:
            for each in cameras:
                each.pull()

        self.inputs.pull_frames = pull_frames

    def _create_latched_inputs(self) -> None:
        """Each of instruction and estop three times: latched (state on join), reliable +
        volatile, and best effort + volatile (matches any publisher). A message may arrive
        on several; the callbacks are idempotent."""
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
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
            self._sub(Bool, "takeover", self._on_takeover, qos, events)

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
        operator reads as a broken e-stop; the twin subscription does receive it. Say so once.
        The twins get no handlers."""
        if not latched:
            # The twins match any publisher the latched one does not, and the latched one's
            # default handlers report a wrong type on the topic; each handler is one more
            # entity the control executor rebuilds its wait set from on every wake.
            return SubscriptionEventCallbacks(use_default_callbacks=False)
        said: list[bool] = []

        def covered(event: Any) -> None:
            if not said:
                said.append(True)
                self.node.get_logger().info(
                    "a volatile publisher on estop/instruction/takeover is received by the node's "
                    "volatile subscriptions (the latched one cannot match it)"
                )

        return SubscriptionEventCallbacks(incompatible_qos=covered)

    def destroy(self) -> None:
        for destroy, entity in reversed(self._entities):
            destroy(entity)
        self._entities.clear()
        self.hold_client = None

    # ------------------------------------------------------------------ callbacks

    def _on_joint_state(self, msg: Any) -> None:
        self.inputs.on_joint_state(msg.name, msg.position, msg.velocity, _stamp_s(msg.header.stamp))

    def _on_image(self, view: str, msg: Any, arrived: float | None = None) -> None:
        raw = RawImage(msg.height, msg.width, msg.encoding, msg.step, _pixels(msg.data))
        self.inputs.on_image(view, raw, _stamp_s(msg.header.stamp), arrived)

    def _on_compressed(self, view: str, msg: Any, arrived: float | None = None) -> None:
        self.inputs.on_image(view, bytes(msg.data), _stamp_s(msg.header.stamp), arrived)

    def _on_instruction(self, msg: Any) -> None:
        self.inputs.instruction = msg.data

    def _on_estop(self, msg: Any) -> None:
        self.controller.on_estop(bool(msg.data))

    def _on_takeover(self, msg: Any) -> None:
        self.controller.set_takeover(bool(msg.data), "takeover topic")

    def _on_set_takeover(self, request: Any, response: Any) -> Any:
        response.message = self.controller.set_takeover(bool(request.data), "~/set_takeover")
        response.success = True
        return response

    def _on_end(self, request: Any, response: Any) -> Any:
        label: Label = "success" if request.data else "failure"
        response.success = self.controller.end_episode(label)
        response.message = f"episode ended: {label}" if response.success else "no episode running"
        return response

    def _on_start(self, request: Any, response: Any) -> Any:
        problem = self.controller.start_episode()
        response.success = problem is None
        response.message = problem or f"episode {self.controller.episode_number} started"
        return response

    def _on_stop(self, request: Any, response: Any) -> Any:
        response.success = self.controller.stop_episode("stopped", detail="~/stop service")
        response.message = "episode stopped" if response.success else "no episode running"
        return response

    # ------------------------------------------------------------------ the node's side

    def now_ns(self) -> int:
        """Nanoseconds on the node's clock (ROS time: sim time when use_sim_time is set)."""
        return int(self.node.get_clock().now().nanoseconds)

    def log_error(self, text: str) -> None:
        self.node.get_logger().error(text)

    def call_hold_service(self) -> None:
        """Ask the driver to hold (early stops), without waiting for its answer."""
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
