"""Real rclpy, the node in the test process: what needs the node's insides or a patched
catalogue. Everything else runs the node as its own process (the other test_ros_real_*)."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.lifecycle import TransitionCallbackReturn
from rclpy.parameter import Parameter
from std_msgs.msg import Float64MultiArray
from support import TEST_KEY
from support.realros import Recording, ros_context, wait_for

from sequence_ai_core.policy import Policy
from sequence_ai_ros.safety import checks_from_config
from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
JOINTS = [f"joint_{i + 1}" for i in range(7)]
_names = iter(range(1, 1_000_000))


class InProcess:
    def __init__(self, sim: GatewaySimulator, **changes: Any) -> None:
        from sequence_ai_ros.policy_node import PolicyNode

        self.namespace = f"/inproc{next(_names)}"
        values = {"base_url": sim.url, "joint_names": JOINTS, "gripper_dims": 1, **changes}
        context = ros_context()
        self.node = PolicyNode(
            namespace=self.namespace,
            context=context,
            parameter_overrides=[Parameter(k, value=v) for k, v in values.items()],
        )
        self.actions = Recording("action")
        self.node.create_subscription(Float64MultiArray, "action", self.actions, 50)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)

    def spin_until(self, condition: Any, timeout_s: float = 15.0) -> None:
        def step() -> bool:
            self.executor.spin_once(timeout_sec=0.02)
            return bool(condition())

        wait_for(step, timeout_s)

    def close(self) -> None:
        self.node.release("test end")
        self.executor.shutdown(timeout_sec=1)
        self.node.destroy_node()


@pytest.fixture
def inprocess(sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    made: list[InProcess] = []

    def make(**changes: Any) -> InProcess:
        made.append(InProcess(sim, **changes))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_max_step_compares_with_the_hold_and_bounds_the_first_velocity(inprocess: Any) -> None:
    run = inprocess(max_step=[0.5])
    node = run.node
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    # the checks the node builds from its configuration, for pi05-droid's 8 dimensions
    control, safety, period = node.io.control, checks_from_config(node.config, 8), 1 / 15

    def play(arm: float, gripper: float = 0.5) -> str | None:
        return control.play(np.array([arm] * 7 + [gripper]), "joint_velocity", safety, period)

    control.begin_episode()
    node.io.inputs.on_joint_state([*JOINTS], [0.0] * 7, [])
    assert "max_step" in (play(0.6) or "")  # from rest: 0.6 rad/s in one step
    assert play(0.4, gripper=0.9) is None  # the gripper is a position, not compared with 0
    control.hold_underrun()
    assert "max_step" in (play(0.85) or "")  # 0.85 from the hold's 0, not from 0.4
    assert play(0.3) is None


@pytest.mark.parametrize("control_hz", [15.0, 0.0])
def test_a_catalogue_entry_without_horizon_or_rate(
    inprocess: Any, monkeypatch: pytest.MonkeyPatch, control_hz: float
) -> None:
    describe = Policy.describe
    monkeypatch.setattr(
        Policy,
        "describe",
        lambda self: dataclasses.replace(describe(self), action_horizon=0, control_hz=0.0),
    )
    run = inprocess(control_hz=control_hz, max_observation_age_s=5.0)
    node = run.node
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    node.io.inputs.on_joint_state([*JOINTS, "gripper"], [0.0] * 8, [])
    assert node.start_episode() is None
    assert node.engine is not None and node.engine.config.expected_covers_s is None
    run.spin_until(lambda: len(run.actions) >= 3)
    assert node.stop_episode("stopped", detail="test")
    run.spin_until(lambda: len(run.actions) >= 4 and not any(run.actions.snapshot()[-1].data[:7]))


def test_the_imported_rclpy_is_real_and_nothing_shadows_it() -> None:
    """rclpy-intellisense (Humble's sources, not runnable) installs a top-level rclpy/; it
    lives in .venv/humble-rclpy for the static check, never in an environment that runs."""
    import rclpy

    assert any(Path(rclpy.__file__).parent.glob("_rclpy_pybind11*")), rclpy.__file__
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version("rclpy-intellisense")


def _frame(stamp_s: float) -> Any:
    from sensor_msgs.msg import Image

    msg = Image(height=2, width=2, encoding="rgb8", step=6, data=bytes(12))
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int(stamp_s % 1 * 1e9)
    return msg


def test_a_camera_frame_is_taken_when_a_request_needs_it_and_dated_by_its_arrival(
    inprocess: Any,
) -> None:
    """The newest frame only, and its age from when it arrived: a frame taken late must not
    pass for a fresh one (max_observation_age_s)."""
    from sensor_msgs.msg import Image

    run = inprocess(camera_views=["exterior_1"], camera_topics=["cam"], max_observation_age_s=0.5)
    node = run.node
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    camera = rclpy.create_node("camera", namespace=run.namespace, context=node.context)
    try:
        publisher = camera.create_publisher(Image, "cam", 10)
        wait_for(lambda: publisher.get_subscription_count() >= 1, what="the camera subscriber")
        inputs = node.io.inputs
        now = time.time()
        for stamp in (now - 0.3, now - 0.2, now - 0.1):
            publisher.publish(_frame(stamp))
        time.sleep(0.2)
        inputs.on_joint_state([*JOINTS], [0.0] * 7, [])
        observation = inputs.observe()
        assert observation is not None, inputs.problem
        assert [f.timestamp_ms for f in observation.images] == [int((now - 0.1) * 1000)]

        published = time.monotonic()
        publisher.publish(_frame(time.time()))
        time.sleep(0.7)  # arrived 0.7 s before it is first taken
        inputs.on_joint_state([*JOINTS], [0.0] * 7, [])
        assert inputs.observe() is None
        age = re.search(r"image on cam is ([0-9.]+) s old", str(inputs.problem))
        assert age is not None, inputs.problem
        # as old as since it was published, however late the sleep woke; not 0 (taken now)
        assert 0.69 <= float(age.group(1)) <= time.monotonic() - published + 0.01, age.group(0)
    finally:
        camera.destroy_node()


class _NoStamps:
    """A subscription whose middleware dates nothing: rclpy's take_message gives a
    received_timestamp of 0 then (rmw_message_info_t left as initialised)."""

    msg_type = object

    def __init__(self, messages: int) -> None:
        self.left = messages
        self.handle = self

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None

    def take_message(self, msg_type: Any, raw: bool) -> Any:
        if not self.left:
            return None
        self.left -= 1
        return ("frame", {"source_timestamp": 0, "received_timestamp": 0})


def test_frames_without_a_reception_stamp_are_taken_as_they_arrive_instead() -> None:
    from sequence_ai_ros.sensor_inputs import OnDemand

    adopted: list[Any] = []
    delivered: list[Any] = []
    sensors = type("Sensors", (), {"adopt": lambda self, s: adopted.append(s)})()
    subscription = _NoStamps(messages=2)
    frames = OnDemand(sensors, subscription, lambda m, arrived: delivered.append((m, arrived)))
    frames.pull()
    assert delivered == [] and adopted == [subscription] and frames.on_arrival
    subscription.left = 1
    frames.pull()  # the loop takes it now, as it arrives
    assert subscription.left == 1 and adopted == [subscription]


@pytest.mark.parametrize("middleware", ["rmw_fastrtps_cpp", "rmw_cyclonedds_cpp"])
def test_frames_are_taken_on_arrival_where_the_middleware_does_not_date_them(
    inprocess: Any, monkeypatch: pytest.MonkeyPatch, middleware: str
) -> None:
    """rmw_cyclonedds_cpp stamps a message's reception when it is taken (Jazzy) or not at all
    (Humble): there a camera is taken on arrival, by the loop, not left for a request."""
    from sensor_msgs.msg import Image

    from sequence_ai_ros import sensor_inputs
    from sequence_ai_ros.interfaces import NEWEST_FRAME

    monkeypatch.setattr(sensor_inputs, "get_rmw_implementation_identifier", lambda: middleware)
    run = inprocess()
    sensors = sensor_inputs.SensorInputs(run.node, lambda text: None)
    camera = rclpy.create_node("camera", namespace=run.namespace, context=run.node.context)
    try:
        delivered: list[Any] = []
        frames = sensors.on_demand(
            Image, "cam", lambda m, arrived: delivered.append(arrived), NEWEST_FRAME
        )
        publisher = camera.create_publisher(Image, "cam", 10)
        wait_for(lambda: publisher.get_subscription_count() >= 1, what="the camera subscriber")
        publisher.publish(_frame(time.time()))
        if middleware in sensor_inputs.DATED_ON_ARRIVAL:
            time.sleep(0.3)
            assert delivered == [] and not frames.on_arrival  # left for a request
            frames.pull()
            assert len(delivered) == 1 and delivered[0] is not None
        else:
            wait_for(lambda: delivered, what="the frame taken on arrival")
            assert delivered == [None] and frames.on_arrival  # dated as it is taken
    finally:
        sensors.destroy()
        camera.destroy_node()
