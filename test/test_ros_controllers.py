"""The node into the simulated arm's ros2_control controller models, through the rclpy
double: what the node publishes by default is accepted by Humble's and Jazzy's default
joint_trajectory_controller, and a configuration Jazzy would reject is refused on
configure, naming the controller parameter."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy_double import real_rclpy_available
from rclpy_double.graph import Graph
from rclpy_double.harness import Driver, bring_up, policy_node, ros, sim_arm, spin_until_actions

from sequence_ai_core.sim import GatewaySimulator

pytestmark = pytest.mark.skipif(
    real_rclpy_available(), reason="real rclpy present: the real-rclpy tier covers the node"
)
__all__ = ["ros"]
#: These tests are about what the controllers accept, not about stale inputs: a loaded
#: machine must not end an episode on a late joint_states message.
PATIENT = 2.0


@pytest.mark.parametrize("controller", ["jtc_humble", "jtc_jazzy"])
def test_default_trajectories_are_accepted_and_move_the_arm(
    ros: Graph, sim: GatewaySimulator, controller: str
) -> None:
    arm = sim_arm(command_type="joint_trajectory", controller=controller)
    start = arm.arm.joint_positions
    driver = Driver()
    node = policy_node(sim, output_type="joint_trajectory", max_observation_age_s=PATIENT)
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 2)  # two chunks, each the rest of its plan in one message
    ros.spin_for(0.3)
    assert arm.rejected == 0 and arm.arm.controlled.controller.accepted >= 2
    assert not np.allclose(arm.arm.joint_positions, start)  # the controller played them
    assert driver.call("/sequence_ai/stop").success, (node.episodes.last_end, node.log_records)
    assert arm.rejected == 0  # the hold is accepted too
    assert node.episodes.last_end.reason == "stopped"


def test_forward_command_into_the_forward_controller_model(
    ros: Graph, sim: GatewaySimulator
) -> None:
    arm = sim_arm(controller="forward_command")
    node = policy_node(sim, max_observation_age_s=PATIENT)
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 5)
    assert arm.rejected == 0 and arm.arm.controlled.controller.accepted >= 5
    moving = arm.arm.controlled.reference
    ros.spin_for(0.2)
    assert not np.allclose(arm.arm.controlled.reference, moving)  # moving while it plays
    assert node.stop_episode("stopped")  # the hold: zero velocity
    ros.spin_for(0.05)
    held = arm.arm.controlled.reference
    ros.spin_for(0.3)
    assert np.allclose(arm.arm.controlled.reference, held)


def test_velocities_at_every_tick_are_refused_on_configure_naming_the_parameter(
    ros: Graph, sim: GatewaySimulator
) -> None:
    from rclpy.lifecycle import TransitionCallbackReturn

    node = policy_node(
        sim, output_type="joint_trajectory", trajectory_mode="point", trajectory_velocities=True
    )
    assert node.trigger_configure() == TransitionCallbackReturn.FAILURE
    assert node.lifecycle_state == "unconfigured"
    errors = [text for level, text in node.log_records if level == "ERROR"]
    assert any(
        "parameter 'trajectory_velocities'" in t
        and "allow_nonzero_velocity_at_trajectory_end: true on the controller" in t
        for t in errors
    ), errors


def test_a_controller_set_to_allow_what_it_does_not_rejects_every_message(
    ros: Graph, sim: GatewaySimulator
) -> None:
    """Telling the node the controller allows a moving end when a default Jazzy one does not:
    nothing moves, and only the controller's log says why (what the sim arm reproduces)."""
    arm = sim_arm(command_type="joint_trajectory", controller="jtc_jazzy")
    node = policy_node(
        sim,
        output_type="joint_trajectory",
        trajectory_mode="point",
        trajectory_velocities=True,
        allow_nonzero_velocity_at_trajectory_end=True,
        max_observation_age_s=PATIENT,
    )
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 4)
    assert arm.rejected >= 3
    texts = [text for level, text in arm.log_records if level == "ERROR"]
    assert texts and texts[0].startswith("Velocity of last trajectory point of joint joint_")


def test_estop_replaces_the_chunk_trajectory_with_the_hold(
    ros: Graph, sim: GatewaySimulator
) -> None:
    """The controller would otherwise play out the rest of the chunk it was sent."""
    arm = sim_arm(command_type="joint_trajectory", controller="jtc_jazzy")
    driver = Driver()
    node = policy_node(sim, output_type="joint_trajectory", max_observation_age_s=PATIENT)
    bring_up(node)
    assert node.start_episode() is None
    spin_until_actions(ros, 1)
    ros.spin_for(0.2)  # part-way through the first chunk's trajectory
    assert len(ros.messages("/action")[-1].points) > 1
    driver.estop(True)
    hold = ros.messages("/action")[-1]
    assert len(hold.points) == 1 and list(hold.points[0].velocities) == [0.0] * 7
    ros.spin_for(0.3)  # the hold's one period, then still
    held = arm.arm.controlled.reference
    ros.spin_for(0.5)
    assert np.allclose(arm.arm.controlled.reference, held)
    assert arm.rejected == 0 and node.episodes.last_end.reason == "estop"


def test_sim_arm_refuses_a_controller_that_does_not_take_its_command_type(ros: Graph) -> None:
    with pytest.raises(ValueError, match="takes command_type joint_trajectory"):
        sim_arm(command_type="float64_multi_array", controller="jtc_jazzy")
    with pytest.raises(ValueError, match="unknown controller 'jtc_iron'"):
        sim_arm(command_type="joint_trajectory", controller="jtc_iron")
