"""Real rclpy: the policy node's lifecycle, parameters, log calls and process exits, as shipped.

Every test runs the node and the simulated arm as processes (see test/support/realros); assertions
are on states, messages and process liveness, never on timing.
"""

from __future__ import annotations

import signal

import pytest
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import DescribeParameters, GetParameters, SetParameters
from std_msgs.msg import Float64MultiArray
from support.realros import Tier, tier, wait_for
from support.realros.nodes import PolicyNode, sim_arm

from sequence_ai_ros import parameters
from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
__all__ = ["tier"]


def test_every_transition_then_configure_and_activate_again(
    tier: Tier, sim: GatewaySimulator
) -> None:
    sim_arm(tier)
    node = PolicyNode(tier, sim, max_actions=10)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.wait_up()
    assert node.state() == "unconfigured"
    assert node.transition("configure") and node.state() == "inactive"
    assert not node.trigger("start_episode").success  # inactive: nothing moves
    assert node.transition("activate") and node.state() == "active"
    node.start_episode()
    assert node.episode_end(1)["last.reason"] == "completed"
    assert node.transition("deactivate") and node.state() == "inactive"
    assert node.transition("cleanup") and node.state() == "unconfigured"
    count = len(actions)
    assert node.transition("configure") and node.transition("activate")
    node.start_episode()
    assert node.episode_end(2)["last.reason"] == "completed"
    assert len(actions.wait_count(count + 11)) >= count + 11  # 10 actions and the hold again
    assert node.transition("active_shutdown") and node.state() == "finalized"
    assert node.process.alive
    assert node.interrupt() == 0


@pytest.mark.parametrize(
    ("state", "invalid"),
    [
        ("unconfigured", "activate"),  # Jazzy/Humble rclpy raise RCLError out of spin here
        ("unconfigured", "deactivate"),
        ("unconfigured", "cleanup"),
        ("active", "configure"),
        ("active", "cleanup"),
    ],
)
def test_an_invalid_transition_is_refused_and_the_node_lives(
    tier: Tier, sim: GatewaySimulator, state: str, invalid: str
) -> None:
    node = PolicyNode(tier, sim, max_actions=10)
    node.wait_up()
    if state == "active":
        assert node.transition("configure") and node.transition("activate")
    assert not node.transition(invalid)
    assert not node.transition_by_label("no_such_transition")
    assert node.process.alive, node.output()
    assert node.state() == state
    if state == "unconfigured":
        assert node.transition("configure") and node.transition("activate")
    assert node.trigger("start_episode").success  # and it still works


def _parameter(node: PolicyNode, name: str) -> object:
    request = GetParameters.Request(names=[name])
    answer = node.probe.call(GetParameters, "sequence_ai/get_parameters", request, idempotent=True)
    value = answer.values[0]
    return {
        ParameterType.PARAMETER_DOUBLE: value.double_value,
        ParameterType.PARAMETER_INTEGER: value.integer_value,
    }.get(value.type, value)


def test_an_integer_for_a_double_parameter_is_taken(tier: Tier, sim: GatewaySimulator) -> None:
    sim_arm(tier)
    # `-p control_hz:=15`, the way everyone writes it; and an integer list for a double list.
    node = PolicyNode(tier, sim, max_actions=5, control_hz=15, max_observation_age_s=3,
                      max_step=[2, 2, 2, 2, 2, 2, 2, 2])  # fmt: skip
    node.bring_up()
    assert _parameter(node, "control_hz") == 15.0
    assert _parameter(node, "max_observation_age_s") == 3.0
    node.start_episode()
    assert node.episode_end(1)["last.reason"] == "completed"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [("max_actions", 1.5, "integer"), ("model", 3, "string"), ("joint_names", True, "string")],
)
def test_a_wrong_typed_parameter_leaves_the_node_unconfigured(
    tier: Tier, sim: GatewaySimulator, name: str, value: object, expected: str
) -> None:
    node = PolicyNode(tier, sim, **{name: value})
    node.wait_up()
    assert not node.transition("configure")
    assert node.process.alive and node.state() == "unconfigured"
    lines = [line for line in node.output().splitlines() if f"parameter '{name}'" in line]
    assert lines and expected in lines[-1], node.output()
    status = node.status_where(lambda s: f"parameter '{name}'" in s.message, "a config status")
    assert status.level == b"\x02"  # ERROR: a person must fix the parameters


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [("jpeg_quality", 101, "must be 1..100, got 101"), ("record_image_hz", -1, "got -1.0")],
)
def test_an_override_outside_the_declared_range_leaves_the_node_unconfigured(
    tier: Tier, sim: GatewaySimulator, name: str, value: int, says: str
) -> None:
    """rclpy refuses it at declare time (the descriptor's range); the node comes up all the
    same, and configure names the parameter in its rule's words. An integer for a double is
    taken as the double, and then refused by the range as well."""
    node = PolicyNode(tier, sim, **{name: value})
    node.wait_up()
    assert not node.transition("configure")
    assert node.process.alive and node.state() == "unconfigured"
    lines = [line for line in node.output().splitlines() if f"parameter '{name}'" in line]
    assert lines and says in lines[-1], node.output()


def test_the_running_nodes_descriptors_are_the_declarations(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node = PolicyNode(tier, sim)
    node.wait_up()
    declared = list(parameters.PARAMETERS)
    request = DescribeParameters.Request(names=[p.name for p in declared])
    answer = node.probe.call(
        DescribeParameters, "sequence_ai/describe_parameters", request, idempotent=True
    )
    assert len(answer.descriptors) == len(declared)
    for each, described in zip(declared, answer.descriptors, strict=True):
        made = parameters.descriptor(each)
        assert described.description == made.description, each.name
        assert described.additional_constraints == made.additional_constraints, each.name
        ints = [(r.from_value, r.to_value) for r in described.integer_range]
        floats = [(r.from_value, r.to_value) for r in described.floating_point_range]
        assert ints == ([made.integer_range] if made.integer_range else []), each.name
        assert floats == ([made.floating_point_range] if made.floating_point_range else [])
    # `ros2 param set` out of the range is refused by rclpy, and the value stays
    value = ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=101)
    request = SetParameters.Request(parameters=[Parameter(name="jpeg_quality", value=value)])
    answer = node.probe.call(SetParameters, "sequence_ai/set_parameters", request)
    assert not answer.results[0].successful and "out of range" in answer.results[0].reason
    default = next(p.default for p in declared if p.name == "jpeg_quality")
    assert _parameter(node, "jpeg_quality") == default
    assert node.transition("configure")


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"output_type": "twist"}, "output_type"),
        ({"output_type": "joint_trajectory", "joint_names": None}, "joint_names"),
        ({"validator": "not a validator"}, "validator"),
        ({"api_key": "sk-test-0123456789abcdef"}, "api_key"),
    ],
)
def test_a_bad_parameter_value_is_refused_by_name(
    tier: Tier, sim: GatewaySimulator, changes: dict[str, object], named: str
) -> None:
    node = PolicyNode(tier, sim, **changes)
    node.wait_up()
    assert not node.transition("configure")
    assert node.process.alive and node.state() == "unconfigured"
    output = node.output()
    assert f"parameter '{named}'" in output
    assert "sk-test-0123456789abcdef" not in output.replace("api_key:=", "")


@pytest.mark.parametrize("first", ["completed", "estop"])
def test_an_info_end_then_an_error_end_and_the_reverse(
    tier: Tier, sim: GatewaySimulator, first: str
) -> None:
    """rclpy raises if one log call site changes severity: an episode's end is logged at info
    (completed, ~/stop) or error (e-stop); both in one process must not kill it."""
    sim_arm(tier)
    node = PolicyNode(tier, sim, max_actions=8)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    for number, how in enumerate([first, "estop" if first == "completed" else "completed"], 1):
        count = len(actions)
        node.start_episode()
        if how == "estop":
            actions.wait_count(count + 2)
            node.estop(True)
        end = node.episode_end(number)
        assert end["last.reason"] == how, end
        assert node.process.alive, node.output()
        if how == "estop":
            assert end["estop_latched"] == "True"
            node.estop(False)
            wait_for(lambda: node.values(node.last_status())["estop_latched"] == "False")
    assert "Logger severity cannot be changed" not in node.output()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_exit_signal_holds_on_a_live_context(
    tier: Tier, sim: GatewaySimulator, sig: int
) -> None:
    sim_arm(tier)
    node = PolicyNode(tier, sim, max_actions=10_000)
    actions = tier.probe.listen(Float64MultiArray, "action")
    node.bring_up()
    node.start_episode()
    moving = actions.wait_count(5)
    assert any(any(v != 0.0 for v in m.data) for m in moving)
    assert node.interrupt(sig) == 0, node.output()
    last = wait_for(lambda: _zero_last(actions.snapshot()), what="the zero hold after the signal")
    assert list(last.data) == [0.0] * 7
    assert "hold on exit failed" not in node.output()


def _zero_last(messages: list[Float64MultiArray]) -> Float64MultiArray | None:
    return messages[-1] if not any(messages[-1].data) else None
