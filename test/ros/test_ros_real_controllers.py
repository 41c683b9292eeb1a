"""Real rclpy: the node into the simulated arm's ros2_control controller models.

What the node publishes by default is accepted by Humble's and Jazzy's default
joint_trajectory_controller and moves the arm; forward_command into the forward controller
moves it and the hold stops it; a configuration Jazzy would reject is refused on configure,
naming the controller parameter; the e-stop replaces a chunk trajectory with the hold. The
sim arm logs every rejection as the real controller does, so its log is the verdict.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from support.realros import Tier, tier, wait_for
from support.realros.nodes import PolicyNode, sim_arm
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]
REJECTED = "[ERROR]"  # how the sim arm's rclpy logger prints a controller's rejection
#: Stillness after a hold: the simulated servo's 30 ms lag has settled to well under this
#: within the waits below; a command still playing moves a joint by far more.
STILL_RAD = 1e-3


def _arm_positions(states: Any) -> np.ndarray:
    """The seven arm joints of the latest joint_states message."""
    return np.array(states.wait_count(1)[-1].position[:7], dtype=np.float64)


def _moved(states: Any, start: np.ndarray) -> bool:
    return not np.allclose(_arm_positions(states), start, atol=STILL_RAD)


def _stays_still(states: Any) -> None:
    """After a hold: two readings half a second apart agree."""
    time.sleep(0.3)
    held = _arm_positions(states)
    time.sleep(0.5)
    assert np.allclose(_arm_positions(states), held, atol=STILL_RAD)


@pytest.mark.parametrize("controller", ["jtc_humble", "jtc_jazzy"])
def test_default_trajectories_are_accepted_and_move_the_arm(
    tier: Tier, sim: GatewaySimulator, controller: str
) -> None:
    arm = sim_arm(tier, command_type="joint_trajectory", controller=controller)
    states = tier.probe.listen(JointState, "joint_states", qos_profile_sensor_data)
    node = PolicyNode(tier, sim, output_type="joint_trajectory")
    actions = tier.probe.listen(JointTrajectory, "action")
    node.bring_up()
    start = _arm_positions(states)
    node.start_episode()
    # trajectory_mode chunk (the default): the rest of each chunk as one trajectory
    first = actions.wait_count(1)[0]
    assert len(first.points) > 1 and all(not p.velocities for p in first.points)
    wait_for(lambda: _moved(states, start), what="the controller to move the arm")
    assert node.trigger("stop").success
    assert node.episode_end(1)["last.reason"] == "stopped"
    hold = wait_for(lambda: (m := actions.snapshot()[-1]) and len(m.points) == 1 and m)
    assert list(hold.points[0].velocities) == [0.0] * 7
    _stays_still(states)
    assert REJECTED not in arm.output(), arm.output()  # every trajectory and the hold accepted


def test_forward_command_into_the_forward_controller_model(
    tier: Tier, sim: GatewaySimulator
) -> None:
    arm = sim_arm(tier, controller="forward_command")
    states = tier.probe.listen(JointState, "joint_states", qos_profile_sensor_data)
    node = PolicyNode(tier, sim)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    start = _arm_positions(states)
    node.start_episode()
    actions.wait_count(5)
    wait_for(lambda: _moved(states, start), what="the forward controller to move the arm")
    assert node.trigger("stop").success
    wait_for(lambda: not any(actions.snapshot()[-1].data[:7]), what="the zero hold")
    _stays_still(states)
    assert REJECTED not in arm.output(), arm.output()


def test_velocities_at_every_tick_are_refused_on_configure_naming_the_parameter(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node = PolicyNode(
        tier, sim, output_type="joint_trajectory", trajectory_mode="point",
        trajectory_velocities=True,
    )  # fmt: skip
    node.wait_up()
    assert not node.transition("configure")
    assert node.state() == "unconfigured"
    wait_for(
        lambda: "allow_nonzero_velocity_at_trajectory_end: true on the controller" in node.output(),
        what="the configure error naming the controller parameter",
    )
    errors = [line for line in node.output().splitlines() if "[ERROR]" in line]
    assert any("trajectory_velocities" in line for line in errors), errors


def test_a_controller_set_to_allow_what_it_does_not_rejects_every_message(
    tier: Tier, sim: GatewaySimulator
) -> None:
    """Telling the node the controller allows a moving end when a default Jazzy one does not:
    only the controller's log says why (what the sim arm reproduces)."""
    arm = sim_arm(tier, command_type="joint_trajectory", controller="jtc_jazzy")
    node = PolicyNode(
        tier, sim, output_type="joint_trajectory", trajectory_mode="point",
        trajectory_velocities=True, allow_nonzero_velocity_at_trajectory_end=True,
    )  # fmt: skip
    actions = tier.probe.listen(JointTrajectory, "action")
    node.bring_up()
    node.start_episode()
    moving = actions.wait_count(4)
    assert all(len(m.points) == 1 and any(m.points[0].velocities) for m in moving[:3])
    message = "Velocity of last trajectory point of joint joint_"
    wait_for(lambda: arm.output().count(message) >= 3, what="the controller's rejections")
    rejections = [line for line in arm.output().splitlines() if REJECTED in line]
    assert rejections and all(message in line for line in rejections), rejections


def test_estop_replaces_the_chunk_trajectory_with_the_hold(
    tier: Tier, sim: GatewaySimulator
) -> None:
    """The controller would otherwise play out the rest of the chunk it was sent."""
    arm = sim_arm(tier, command_type="joint_trajectory", controller="jtc_jazzy")
    states = tier.probe.listen(JointState, "joint_states", qos_profile_sensor_data)
    node = PolicyNode(tier, sim, output_type="joint_trajectory")
    actions = tier.probe.listen(JointTrajectory, "action")
    node.bring_up()
    node.start_episode()
    assert len(actions.wait_count(1)[0].points) > 1
    node.estop(True)
    assert node.episode_end(1)["last.reason"] == "estop"
    hold = wait_for(lambda: (m := actions.snapshot()[-1]) and len(m.points) == 1 and m)
    assert list(hold.points[0].velocities) == [0.0] * 7
    _stays_still(states)  # the hold's one period, then still: not the rest of the chunk
    assert REJECTED not in arm.output(), arm.output()


@pytest.mark.parametrize(
    ("command_type", "controller", "message"),
    [
        ("float64_multi_array", "jtc_jazzy", "controller jtc_jazzy takes command_type joint_"),
        ("joint_trajectory", "jtc_iron", "unknown controller 'jtc_iron'"),
    ],
)
def test_sim_arm_refuses_a_controller_that_does_not_take_its_command_type(
    tier: Tier, command_type: str, controller: str, message: str
) -> None:
    arm = sim_arm(tier, command_type=command_type, controller=controller)
    assert arm.wait(timeout_s=60) != 0
    assert message in arm.output(), arm.output()
