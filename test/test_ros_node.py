"""The policy node's wiring, run through the rclpy test double against the real simulator.

The simulated arm node publishes joint_states and camera images and follows the commands, so
every episode here is the whole loop: ROS inputs -> observation -> HTTP -> engine -> checked
action -> ROS output -> arm. Assertions are on counts, orders and values, never on timing.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pytest
from conftest import TEST_KEY
from rclpy_double import real_rclpy_available
from rclpy_double.graph import Graph
from rclpy_double.harness import (
    JOINTS,
    Driver,
    bring_up,
    last_status,
    policy_node,
    ros,
    sim_arm,
    spin_until_actions,
)

from sequence_ai_core.sim import GatewaySimulator

pytestmark = pytest.mark.skipif(
    real_rclpy_available(),
    reason="real rclpy present: test_ros_rclpy_smoke.py and test_ros_launch.py cover the node",
)
__all__ = ["ros"]  # the fixture, imported for pytest to find


# ---------------------------------------------------------------------- the whole lifecycle


def test_lifecycle_episode_estop_hold_and_reconfigure(ros: Graph, sim: GatewaySimulator) -> None:
    from rclpy.lifecycle import TransitionCallbackReturn

    arm, driver, node = sim_arm(), Driver(), policy_node(sim)
    bring_up(node)
    driver.instruction_pub.publish(driver.String(data="stack the cups"))
    answer = driver.call("/sequence_ai/start_episode")
    assert answer.success and answer.message == "episode 1 started"
    spin_until_actions(ros, 12)
    actions = ros.messages("/action")
    assert all(len(m.data) == 7 and all(math.isfinite(v) for v in m.data) for m in actions)
    grippers = ros.messages("/gripper_command")
    assert len(grippers) == len(actions) and all(0.0 <= m.data[0] <= 1.0 for m in grippers)
    assert arm.commands >= 2 * 12  # arm and gripper commands both reached the arm
    assert all(r["observation"]["instruction"] == "stack the cups" for r in sim.received)
    assert all(len(r["observation"]["images"]) == 2 for r in sim.received)

    before = len(ros.messages("/action"))
    driver.estop(True)  # the hold goes out from the callback, before any further tick
    assert node.episodes.last_end.reason == "estop"
    after = ros.messages("/action")[before:]
    assert len(after) == 1 and list(after[0].data) == [0.0] * 7
    assert ros.messages("/gripper_command")[-1].data[0] == grippers[-1].data[0]  # not zeroed
    assert driver.hold_calls == 1
    status = last_status(ros)
    assert status.level == b"\x02" and "e-stop" in status.message
    assert status.hardware_id == "sequence-ai:pi05-droid"
    ros.spin_for(0.4)
    assert len(ros.messages("/action")) == before + 1  # nothing moves while latched
    refused = driver.call("/sequence_ai/start_episode")
    assert not refused.success and "latched" in refused.message

    driver.estop(False)
    assert driver.call("/sequence_ai/start_episode").success
    spin_until_actions(ros, 3)
    assert node.trigger_deactivate() == TransitionCallbackReturn.SUCCESS
    assert list(ros.messages("/action")[-1].data) == [0.0] * 7  # hold before publishers stop
    assert driver.hold_calls == 2 and node.episodes.last_end.reason == "stopped"
    count = len(ros.messages("/action"))
    ros.spin_for(0.3)
    assert len(ros.messages("/action")) == count

    assert node.trigger_cleanup() == TransitionCallbackReturn.SUCCESS
    assert node.lifecycle_state == "unconfigured"
    assert node.subscriptions == [] and node.services == [] and node.clients == []
    assert [p.topic_name for p in node.publishers] == ["/diagnostics"]  # the one Updater
    bring_up(node)  # configure again: no second diagnostic_updater.period declaration
    assert driver.call("/sequence_ai/start_episode").message == "episode 3 started"
    spin_until_actions(ros, 3)
    assert node.trigger_shutdown() == TransitionCallbackReturn.SUCCESS
    assert node.lifecycle_state == "finalized" and driver.hold_calls == 3
    assert sim.stats()["act_requests"] >= 3

    texts = [m for _, m in node.log_records] + [repr(m) for _, m in ros.published]
    texts += [repr(p.value) for p in node._parameters.values()]
    assert not [t for t in texts if TEST_KEY in t]


# ---------------------------------------------------------------------- output types


def _check_float64(ros: Graph, hold: Any, gripper_hold: Any) -> None:
    msg = ros.messages("/action")[0]
    dim = msg.layout.dim[0]
    assert (dim.label, dim.size, dim.stride, len(msg.data)) == ("action", 7, 7, 7)
    assert ros.messages("/gripper_command")[0].layout.dim[0].label == "gripper"
    assert list(hold.data) == [0.0] * 7 and len(gripper_hold.data) == 1


def _check_trajectory(ros: Graph, hold: Any, gripper_hold: Any) -> None:
    """trajectory_mode=chunk (the default): the rest of each chunk as one trajectory, one
    period per step, positions only, re-sent per chunk; the hold replaces it."""
    msg = ros.messages("/action")[0]
    assert msg.joint_names == JOINTS and len(msg.points) == 15  # the first chunk, whole
    times = [p.time_from_start.sec * 10**9 + p.time_from_start.nanosec for p in msg.points]
    assert times[0] == 66_666_667 and times[-1] == 1_000_000_000
    assert times == sorted(set(times))  # strictly increasing
    assert all(len(p.positions) == 7 and list(p.velocities) == [] for p in msg.points)
    assert msg.header.stamp.sec > 0
    gripper = ros.messages("/gripper_command")[0]
    assert gripper.joint_names == ["gripper"] and len(gripper.points) == 15
    assert gripper.header.stamp == msg.header.stamp
    assert len(hold.points) == 1
    measured = list(ros.messages("/joint_states")[-1].position[:7])
    assert np.allclose(hold.points[0].positions, measured)  # hold at the measured position
    assert list(hold.points[0].velocities) == [0.0] * 7


def _check_point_trajectory(ros: Graph, hold: Any, gripper_hold: Any) -> None:
    """trajectory_mode=point: one point per tick, one period ahead, positions only (a
    non-zero velocity at the only point is what Jazzy's default controller rejects)."""
    msg = ros.messages("/action")[0]
    assert msg.joint_names == JOINTS and len(msg.points) == 1
    point = msg.points[0]
    assert len(point.positions) == 7 and list(point.velocities) == []
    assert (point.time_from_start.sec, point.time_from_start.nanosec) == (0, 66_666_667)
    assert len(ros.messages("/action")) >= 5
    measured = list(ros.messages("/joint_states")[-1].position[:7])
    assert np.allclose(hold.points[0].positions, measured)
    assert list(hold.points[0].velocities) == [0.0] * 7


def _check_joint_state(ros: Graph, hold: Any, gripper_hold: Any) -> None:
    msg = ros.messages("/action")[0]
    assert msg.name == JOINTS and len(msg.position) == 7 and len(msg.velocity) == 7
    gripper = ros.messages("/gripper_command")[0]
    assert gripper.name == ["gripper"] and len(gripper.position) == 1
    assert list(gripper.velocity) == []
    assert list(hold.velocity) == [0.0] * 7 and len(hold.position) == 7
    assert gripper_hold.name == ["gripper"]


def _gripper_value(msg: Any) -> float:
    if hasattr(msg, "data"):
        return float(msg.data[0])
    if hasattr(msg, "points"):
        return float(msg.points[0].positions[0])
    return float(msg.position[0])


@pytest.mark.parametrize(
    ("output_type", "check", "compressed", "mode"),
    [
        ("float64_multi_array", _check_float64, True, "chunk"),
        ("joint_trajectory", _check_trajectory, True, "chunk"),
        ("joint_trajectory", _check_point_trajectory, True, "point"),
        ("joint_state", _check_joint_state, False, "chunk"),
    ],
)
def test_output_messages_field_by_field(
    ros: Graph, sim: GatewaySimulator, output_type: str, check: Any, compressed: bool, mode: str
) -> None:
    image_format = "compressed" if compressed else "raw"
    arm = sim_arm(command_type=output_type, image_format=image_format)
    driver = Driver()
    node = policy_node(sim, output_type=output_type, compressed=compressed, trajectory_mode=mode)
    bring_up(node)
    assert node.start_episode() is None
    streams = output_type == "joint_trajectory" and mode == "chunk"
    spin_until_actions(ros, 2 if streams else 5)
    for velocities in ros.messages("/action"):
        values = getattr(velocities, "data", None)
        assert values is None or all(math.isfinite(v) for v in values)
    chunk = ros.messages("/sequence_ai/chunk")[0]
    assert chunk.joint_names == [*JOINTS, "gripper"] and len(chunk.points) == 15
    assert [p.time_from_start.nanosec for p in chunk.points[:2]] == [0, 66_666_667]
    assert len(chunk.points[0].velocities) == 8 and list(chunk.points[0].positions) == []
    gripper_before = _gripper_value(ros.messages("/gripper_command")[-1])
    assert driver.call("/sequence_ai/stop").success
    gripper_hold = ros.messages("/gripper_command")[-1]
    assert _gripper_value(gripper_hold) == gripper_before  # the hand stays as it was
    check(ros, ros.messages("/action")[-1], gripper_hold)
    assert arm.commands > 0 and driver.hold_calls == 1


# ---------------------------------------------------------------------- timer rate


@pytest.mark.parametrize(("control_hz", "period"), [(0.0, 0.04), (10.0, 0.1)])
def test_timer_follows_the_chunk_rate(
    ros: Graph, sim: GatewaySimulator, control_hz: float, period: float
) -> None:
    joints = [f"joint_{i + 1}" for i in range(6)]
    arm = sim_arm("lingbot-va-5b", "joint_trajectory")
    node = policy_node(
        sim,
        model="lingbot-va-5b",
        joint_names=joints,
        output_type="joint_trajectory",
        camera_views=["front", "wrist"],
        camera_topics=["camera/front/image_raw/compressed", "camera/wrist/image_raw/compressed"],
        control_hz=control_hz,
        max_step=[0.5],
    )
    bring_up(node)
    assert node.timer_period == pytest.approx(period)
    assert node.start_episode() is None
    spin_until_actions(ros, 4)
    assert node.engine.period_s == pytest.approx(period)
    assert node.timer_period == pytest.approx(period)
    point = ros.messages("/action")[0].points[0]
    assert list(point.velocities) == [] and len(point.positions) == 6  # absolute space
    assert point.time_from_start.nanosec == round(period * 1e9)
    assert arm.commands > 0


def test_main_spins_until_shutdown_and_releases(ros: Graph) -> None:
    import threading

    import rclpy

    from sequence_ai_ros import policy_node as module

    thread = threading.Thread(target=module.main, args=([],), daemon=True)
    thread.start()
    deadline = time.monotonic() + 5.0  # poll without firing timers: main's executor does that
    while not any(n.get_name() == "sequence_ai" for n in ros.nodes) and time.monotonic() < deadline:
        time.sleep(0.01)
    rclpy.shutdown()
    thread.join(timeout=5.0)
    assert not thread.is_alive()
    assert not any(n.get_name() == "sequence_ai" for n in ros.nodes)  # destroyed on the way out


# ---------------------------------------------------------------------- exit and e-stop wiring


@pytest.mark.parametrize("signal_name", ["SIGINT", "SIGTERM"])
def test_exit_signal_holds_on_a_live_context(
    ros: Graph, sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch, signal_name: str
) -> None:
    """Ctrl-C, and launch's SIGINT then SIGTERM. With rclpy's default handlers the context is
    shut down before main() sees the signal and the hold dies with it (the double models
    Humble's handlers: contexts shut down, SIGINT chained to KeyboardInterrupt)."""
    import os
    import signal

    signum = getattr(signal, signal_name)

    from sequence_ai_ros import policy_node as module

    sim_arm()
    driver = Driver()
    node = policy_node(sim)
    bring_up(node)
    assert node.start_episode() is None
    monkeypatch.setattr(module, "PolicyNode", lambda: node)
    sent: list[int] = []

    def stop_process() -> None:
        if len(ros.messages("/action")) >= 4 and not sent:
            # Never kill the test run itself: only signal into a Python handler.
            assert callable(signal.getsignal(signum)), f"{signal_name} would kill pytest"
            sent.append(len(ros.messages("/action")))
            os.kill(os.getpid(), signum)

    driver.node.create_timer(0.01, stop_process)
    module.main([])  # in the main thread, as ros2 run / launch start it
    assert sent and not [m for level, m in node.log_records if level == "ERROR"]
    assert len(ros.messages("/action")) > sent[0]
    assert list(ros.messages("/action")[-1].data) == [0.0] * 7  # the hold went out
    assert driver.hold_calls == 1 and node.episodes.last_end.reason == "stopped"
    assert not any(n.get_name() == "sequence_ai" for n in ros.nodes)
    assert ros.signal_handler_options.name == "NO"


def test_main_calls_rclpy_as_humble_defines_it() -> None:
    """The double accepts what it is given; rclpy 3.3.15's sources say what init() takes."""
    import ast
    import sysconfig
    from pathlib import Path

    rclpy_dir = Path(sysconfig.get_paths()["purelib"]) / "rclpy"
    if not rclpy_dir.is_dir():
        pytest.skip("rclpy-intellisense not installed")
    init_source = (rclpy_dir / "__init__.py").read_text()
    init = next(
        n
        for n in ast.parse(init_source).body
        if isinstance(n, ast.FunctionDef) and n.name == "init"
    )
    accepted = {a.arg for a in init.args.kwonlyargs}
    source = Path(__file__).resolve().parents[1] / "sequence_ai_ros" / "policy_node.py"
    main = next(
        n
        for n in ast.parse(source.read_text()).body
        if isinstance(n, ast.FunctionDef) and n.name == "main"
    )
    calls = {ast.unparse(c.func): c for c in ast.walk(main) if isinstance(c, ast.Call)}
    keywords = {k.arg: ast.unparse(k.value) for k in calls["rclpy.init"].keywords}
    assert set(keywords) <= accepted
    assert keywords["signal_handler_options"] == "SignalHandlerOptions.NO"
    assert "SignalHandlerOptions.NO" in init_source  # a pybind11 enum: its members show here
    assert "from rclpy.utilities import ok" in init_source  # rclpy.ok()
    spin_once = calls["executor.spin_once"]
    assert [k.arg for k in spin_once.keywords] == ["timeout_sec"]
    assert "signal.signal(signal.SIGTERM, signal.default_int_handler)" in ast.unparse(main)


def test_double_matches_qos_as_dds_does(ros: Graph) -> None:
    from rclpy.node import Node
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Bool

    node = Node("qos_probe")
    latched = QoSProfile(
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )
    got: list[bool] = []
    node.create_subscription(Bool, "probe", lambda m: got.append(m.data), latched)
    node.create_publisher(Bool, "probe", 10).publish(Bool(data=True))  # volatile offer
    best_effort = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    node.create_publisher(Bool, "probe", best_effort).publish(Bool(data=True))
    assert got == []
    node.create_publisher(Bool, "probe", latched).publish(Bool(data=False))
    assert got == [False]
    node.create_subscription(Bool, "probe", lambda m: got.append(m.data), latched)
    assert got == [False, False]  # the late joiner got the latched message


@pytest.mark.parametrize("profile", ["default", "sensor_data"])
def test_estop_from_an_ordinary_publisher_latches(
    ros: Graph, sim: GatewaySimulator, profile: str
) -> None:
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from std_msgs.msg import Bool, String

    sim_arm()
    driver = Driver()
    node = policy_node(sim)
    bring_up(node)
    qos = 10 if profile == "default" else qos_profile_sensor_data
    operator = Node("operator")
    operator.create_publisher(String, "instruction", qos).publish(String(data="wipe"))
    assert node.io.inputs.instruction == "wipe"
    assert node.start_episode() is None
    spin_until_actions(ros, 2)
    before = len(ros.messages("/action"))
    operator.create_publisher(Bool, "estop", qos).publish(Bool(data=True))
    assert node.episodes.estop_latched and node.episodes.last_end.reason == "estop"
    assert len(ros.messages("/action")) == before + 1 and driver.hold_calls == 1
    assert node.start_episode() is not None  # latched
    driver.estop(True)  # reliable + transient local: arrives on both subscriptions
    warnings = [m for level, m in node.log_records if "e-stop engaged" in m]
    assert len(warnings) == 1 and driver.hold_calls == 1


def test_estop_latched_before_configure_is_seen_on_join(ros: Graph, sim: GatewaySimulator) -> None:
    driver = Driver()
    driver.estop(True)  # reliable + transient local: kept for late joiners
    node = policy_node(sim)
    bring_up(node)
    assert node.episodes.estop_latched
    assert "latched" in (node.start_episode() or "")
