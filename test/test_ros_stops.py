"""How the node refuses and stops: bad parameters, stale inputs, gateway errors, rejected
actions and underruns, each with its hold and its diagnostics (through the rclpy double)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import TEST_KEY
from rclpy_double import real_rclpy_available
from rclpy_double.graph import Graph
from rclpy_double.harness import (
    JOINTS,
    SPIN_LIMIT_S,
    VIEWS,
    Driver,
    bring_up,
    last_status,
    policy_node,
    ros,
    sim_arm,
    spin_until_actions,
    status_values,
)

from sequence_ai_core.sim import GatewaySimulator

pytestmark = pytest.mark.skipif(
    real_rclpy_available(),
    reason="real rclpy present: test_ros_rclpy_smoke.py and test_ros_launch.py cover the node",
)
__all__ = ["ros"]  # the fixture, imported for pytest to find


# ---------------------------------------------------------------------- refusals and stops


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"output_type": "twist"}, "output_type"),
        ({"joint_names": JOINTS[:6]}, "joint_names"),
        ({"camera_topics": ["only_one"]}, "camera_topics"),
        ({"validator": "no_such_module_q:check"}, "validator"),
        ({"api_key": TEST_KEY}, "api_key"),
    ],
)
def test_bad_parameter_leaves_node_unconfigured(
    ros: Graph, sim: GatewaySimulator, changes: dict[str, Any], named: str
) -> None:
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    node = policy_node(sim, **changes)
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert node.lifecycle_state == "unconfigured"
    errors = [text for level, text in node.log_records if level == "ERROR"]
    assert len(errors) == 1 and f"parameter '{named}'" in errors[0]
    assert TEST_KEY not in errors[0]
    assert node.subscriptions == [] and node.services == []
    assert [p.topic_name for p in node.publishers] == ["/diagnostics"]  # health, always
    if named != "api_key":
        fixed = {"output_type": "float64_multi_array", "joint_names": JOINTS}
        fixed.update({"camera_topics": [f"camera/{v}/image_raw/compressed" for v in VIEWS]})
        fixed["validator"] = ""
        node.set_parameters([Parameter(k, value=v) for k, v in fixed.items()])
        assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS


def test_stale_inputs_send_nothing_and_say_which(ros: Graph, sim: GatewaySimulator) -> None:
    driver = Driver()
    node = policy_node(sim)
    bring_up(node)
    assert node.start_episode() is None
    ros.spin_for(0.4)
    assert sim.stats()["act_requests"] == 0
    node.health.publish_now()
    status = last_status(ros)
    assert status.level == b"\x02" and "no joint_states received yet" in status.message
    assert status_values(status)["input_problem"] == "no joint_states received yet"
    assert ros.messages("/action") == [] and driver.hold_calls == 0


def test_out_of_credit_stops_holds_once_and_reports(
    ros: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.02, credit=2) as limited:
        sim_arm()
        driver = Driver()
        node = policy_node(limited)
        bring_up(node)
        assert node.start_episode() is None
        reached = ros.spin_for(SPIN_LIMIT_S, until=lambda: not node.episodes.running)
        assert reached and node.episodes.last_end.reason == "raised:OutOfCredit"
        assert list(ros.messages("/action")[-1].data) == [0.0] * 7 and driver.hold_calls == 1
        node.health.publish_now()
        status = last_status(ros)
        assert status.level == b"\x02" and "OutOfCredit" in status.message
        assert status_values(status)["last.reason"] == "raised:OutOfCredit"


def test_wrong_key_is_an_auth_error_without_the_key(
    ros: Graph, sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-key-000000000000"
    monkeypatch.setenv("SEQUENCES_API_KEY", wrong)
    sim_arm()
    driver = Driver()
    node = policy_node(sim)
    bring_up(node)  # the catalogue is public: configure succeeds
    assert node.start_episode() is None
    assert ros.spin_for(SPIN_LIMIT_S, until=lambda: not node.episodes.running)
    assert node.episodes.last_end.reason == "raised:AuthError"
    assert ros.messages("/action") == [] and driver.hold_calls == 1
    texts = [m for _, m in node.log_records] + [repr(m) for _, m in ros.published]
    assert any("AuthError" in t for t in texts) and not any(wrong in t for t in texts)


def test_rejected_action_stops_the_episode(ros: Graph, sim: GatewaySimulator) -> None:
    sim_arm()
    driver = Driver()
    upper = [0.05] * 7 + [1.0]  # the reference arm moves faster than 0.05 rad/s
    node = policy_node(sim, lower_limits=[-0.05] * 7 + [0.0], upper_limits=upper)
    bring_up(node)
    assert node.start_episode() is None
    assert ros.spin_for(SPIN_LIMIT_S, until=lambda: not node.episodes.running)
    end = node.episodes.last_end
    assert end.reason == "validate" and "limits" in end.detail
    assert all(max(abs(v) for v in m.data) <= 0.05 for m in ros.messages("/action"))
    assert driver.hold_calls == 1


def test_underrun_holds_once_per_spell(ros: Graph, sim: GatewaySimulator) -> None:
    sim_arm()
    driver = Driver()
    node = policy_node(sim)
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 4)
    sim.set_latency(1.5)  # longer than the 1.0 s chunk: the plan runs out
    assert ros.spin_for(SPIN_LIMIT_S, until=lambda: node.engine.snapshot()["underruns"] >= 5)
    commands = [list(m.data) for m in ros.messages("/action")]
    moving = max(i for i, c in enumerate(commands) if any(v != 0.0 for v in c))
    assert commands[moving + 1 :] == [[0.0] * 7]  # one zero-velocity hold for the whole spell
    assert driver.hold_calls == 0  # an underrun is not an early stop
    node.health.publish_now()
    status = last_status(ros)
    assert status.level == b"\x01" and "underruns" in status.message


def test_first_absolute_target_must_be_near_the_measured_arm(
    ros: Graph, sim: GatewaySimulator
) -> None:
    from sensor_msgs.msg import JointState

    joints = [f"joint_{i + 1}" for i in range(6)]
    driver = Driver()
    far = JointState(name=[*joints, "gripper"], position=[2.5] * 6 + [0.5])
    publisher = driver.node.create_publisher(JointState, "joint_states", 10)
    driver.node.create_timer(0.02, lambda: publisher.publish(far))
    node = policy_node(
        sim,
        model="lingbot-va-5b",
        joint_names=joints,
        output_type="joint_trajectory",
        camera_views=None,
        camera_topics=None,
        camera_encodings=None,
        max_step=[0.5],
    )
    bring_up(node)
    assert node.start_episode() is None
    assert ros.spin_for(SPIN_LIMIT_S, until=lambda: not node.episodes.running)
    end = node.episodes.last_end
    assert end.reason == "validate" and "max_step" in end.detail
    assert ros.messages("/action") == [] and driver.hold_calls == 1


# ---------------------------------------------------------------------- what the checks compare


def test_max_step_compares_with_the_hold_and_bounds_the_first_velocity(
    ros: Graph, sim: GatewaySimulator
) -> None:
    import numpy as np

    node = policy_node(sim, max_step=[0.5])
    bring_up(node)
    io, safety, period = node.io, node._safety, 1 / 15

    def play(arm: float, gripper: float = 0.5) -> str | None:
        return io.play(np.array([arm] * 7 + [gripper]), "joint_velocity", safety, period)

    io.begin_episode()
    assert "max_step" in (play(0.6) or "")  # from rest: 0.6 rad/s in one step
    assert play(0.4, gripper=0.9) is None  # the gripper is a position, not compared with 0
    io.hold_underrun()
    assert list(ros.messages("/action")[-1].data) == [0.0] * 7
    assert "max_step" in (play(0.85) or "")  # 0.85 from the hold's 0, not from 0.4
    assert play(0.3) is None


def _joint_trajectory_node(sim: GatewaySimulator, **changes: Any) -> Any:
    values: dict[str, Any] = {
        "output_type": "joint_trajectory",
        "camera_views": None,
        "camera_topics": None,
        "camera_encodings": None,
    }
    return policy_node(sim, **{**values, **changes})


def test_stale_joint_states_stop_before_a_target_is_anchored_on_them(
    ros: Graph, sim: GatewaySimulator
) -> None:
    from sensor_msgs.msg import JointState

    driver = Driver()
    publisher = driver.node.create_publisher(JointState, "joint_states", 10)
    live = [True]

    def publish() -> None:
        if live[0]:
            publisher.publish(JointState(name=[*JOINTS, "gripper"], position=[0.1] * 7 + [0.5]))

    driver.node.create_timer(0.02, publish)
    node = _joint_trajectory_node(sim, max_observation_age_s=0.2)
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 3)
    live[0] = False  # the driver stalls; its last reading stays at 0.1
    assert ros.spin_for(3.0, until=lambda: not node.episodes.running)
    end = node.episodes.last_end
    assert end.reason == "stale_input" and "joint_states is" in end.detail and "old" in end.detail
    commands = ros.messages("/action")
    hold, last = commands[-1].points[0], commands[-2].points[0]
    assert list(hold.velocities) == [0.0] * 7
    assert list(hold.positions) == list(last.positions)  # at the last target, not at 0.1
    assert driver.hold_calls == 1


@pytest.mark.parametrize("control_hz", [15.0, 0.0])
def test_catalogue_entry_without_horizon_or_rate(
    ros: Graph, sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch, control_hz: float
) -> None:
    import dataclasses

    from sequence_ai_core.policy import Policy

    describe = Policy.describe
    monkeypatch.setattr(
        Policy,
        "describe",
        lambda self: dataclasses.replace(describe(self), action_horizon=0, control_hz=0.0),
    )
    sim_arm()
    driver = Driver()
    node = policy_node(sim, control_hz=control_hz)
    bring_up(node)
    assert node.start_episode() is None
    assert node.engine is not None and node.engine.config.expected_covers_s is None
    spin_until_actions(ros, 3)
    assert driver.call("/sequence_ai/stop").success
    assert list(ros.messages("/action")[-1].data) == [0.0] * 7 and driver.hold_calls == 1
