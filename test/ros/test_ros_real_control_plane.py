"""Real rclpy: the control plane as shipped, built by colcon with its own interfaces.

Episodes as ``RunEpisode`` goals (feedback, a typed result equal to /diagnostics' figures,
cancel, one goal at a time, an e-stop mid-goal), every outcome latched on ``~/outcome``, and a
``ValidateChunk`` service that vets each chunk before any of its steps is published.
"""

from __future__ import annotations

from typing import Any

import pytest
from std_msgs.msg import Float64MultiArray
from support.realros import Tier, tier, wait_for
from support.realros.control_plane import EpisodeClient, Validator
from support.realros.nodes import HoldServer, PolicyNode, sim_arm
from trajectory_msgs.msg import JointTrajectory

from sequence_ai_sim import GatewaySimulator

pytestmark = [pytest.mark.ros, pytest.mark.timeout(150)]
__all__ = ["tier"]

#: Compared with /diagnostics' last.* values, as diagnostics formats them.
FIGURES = ("actions", "chunks", "requests", "underruns", "retries", "skipped_stale", "reason")
FLOATS = ("elapsed_s", "duty_cycle", "latency_p50_s", "latency_p95_s", "max_seam_jump")


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _arm(tier: Tier, sim: GatewaySimulator, **changes: Any) -> tuple[PolicyNode, HoldServer]:
    sim_arm(tier)
    hold = HoldServer(tier)
    node = PolicyNode(tier, sim, hold_service=f"{tier.namespace}/arm/hold", **changes)
    node.bring_up()
    return node, hold


def test_a_goal_plays_its_limit_with_feedback_and_a_result_equal_to_diagnostics(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node, hold = _arm(tier, sim)
    client = EpisodeClient(tier)
    goal = client.send(instruction="put the cup in the sink", max_actions=40)
    assert goal.accepted
    status, outcome = goal.result()
    assert status == "succeeded", node.output()
    assert outcome.reason == "completed" and outcome.actions == 40 and outcome.error == ""
    assert outcome.episode == 1 and outcome.model.endswith("pi05-droid")
    assert outcome.action_space == "joint_velocity" and outcome.chunks >= 2
    end = node.episode_end(1)
    for name in FIGURES:
        assert end[f"last.{name}"] == str(getattr(outcome, name)), name
    for name in FLOATS:
        assert end[f"last.{name}"] == _fmt(getattr(outcome, name)), name
    feedback = goal.feedback.snapshot()
    assert feedback and {f.state for f in feedback} <= {"waiting", "warming", "playing", "holding"}
    assert "playing" in {f.state for f in feedback}
    assert [f.actions for f in feedback] == sorted(f.actions for f in feedback)
    latched = client.outcomes.wait_count(1)[-1]
    assert (latched.episode, latched.reason, latched.actions) == (1, "completed", 40)
    assert hold.calls == 0  # a completed episode is no early stop
    sent = {(r["observation"] or {}).get("instruction") for r in sim.received}
    assert sent == {"put the cup in the sink"}


def test_a_cancel_stops_with_one_hold_and_a_second_goal_is_rejected(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node, hold = _arm(tier, sim)
    client = EpisodeClient(tier)
    actions = tier.probe.listen(Float64MultiArray, "action")
    goal = client.playing(actions=5)
    assert not client.send(max_actions=10).accepted  # one episode at a time
    answer = node.trigger("start_episode")  # however it is asked
    assert not answer.success and "already running" in answer.message
    goal.cancel()
    status, outcome = goal.result()
    assert status == "canceled" and outcome.reason == "stopped", node.output()
    assert not any(actions.snapshot()[-1].data[:7])  # held: zero velocity
    wait_for(lambda: hold.calls == 1, what="the driver's hold service")
    node.last_status()
    assert hold.calls == 1
    again = client.send(max_actions=5)  # the node takes goals again
    assert again.accepted and again.result()[0] == "succeeded"


def test_an_estop_aborts_the_goal_and_goals_are_rejected_while_latched(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node, hold = _arm(tier, sim)
    client = EpisodeClient(tier)
    goal = client.playing(actions=5)
    node.estop(True)
    status, outcome = goal.result()
    assert (status, outcome.reason) == ("aborted", "estop")
    wait_for(lambda: hold.calls == 1, what="the driver's hold service")
    assert not client.send(max_actions=5).accepted
    assert "e-stop is latched" in node.output()


def test_goals_are_rejected_while_the_node_is_inactive(tier: Tier, sim: GatewaySimulator) -> None:
    node, _ = _arm(tier, sim)
    assert node.transition("deactivate")
    client = EpisodeClient(tier)
    assert not client.send(max_actions=5).accepted
    assert "not active" in node.output()


def test_a_validator_refusing_the_third_chunk_stops_before_any_step_of_it(
    tier: Tier, sim: GatewaySimulator
) -> None:
    def third_refused(request: Any) -> tuple[bool, str]:
        return (False, "would hit the fixture") if len(validator.requests) == 3 else (True, "")

    validator = Validator(tier, "safety", third_refused)
    try:
        node, hold = _arm(tier, sim, chunk_validator=validator.name)
        actions = tier.probe.listen(Float64MultiArray, "action")
        chunks = tier.probe.listen(JointTrajectory, "sequence_ai/chunk")
        goal = EpisodeClient(tier).send(max_actions=100_000)
        status, outcome = goal.result()
        assert (status, outcome.reason) == ("aborted", "validate"), node.output()
        assert "would hit the fixture" in outcome.error and "ChunkRefused" in outcome.error
        refused = validator.requests[2]
        assert refused.action_space == "joint_velocity" and refused.model.endswith("pi05-droid")
        assert len(refused.chunk.points) == 15 and len(refused.chunk.joint_names) == 8
        assert len(refused.state.position) == 7
        steps = {tuple(p.velocities) for p in refused.chunk.points}
        wait_for(lambda: hold.calls == 1, what="the driver's hold service")
        node.last_status()
        published = [tuple(m.data) for m in actions.snapshot()]
        assert published and not steps & set(published[:-1])  # the last is the hold
        assert not any(published[-1][:7])
        assert len(chunks) == outcome.chunks == 2  # the refused one never started
        assert hold.calls == 1
    finally:
        validator.close()


def test_a_validator_that_never_answers_ends_the_episode_with_validate(
    tier: Tier, sim: GatewaySimulator
) -> None:
    validator = Validator(tier, "silent", lambda request: (True, ""), delay_s=60.0)
    try:
        node, hold = _arm(tier, sim, chunk_validator=validator.name, chunk_validator_timeout_s=0.5)
        actions = tier.probe.listen(Float64MultiArray, "action")
        status, outcome = EpisodeClient(tier).send(max_actions=100).result()
        assert (status, outcome.reason) == ("aborted", "validate"), node.output()
        assert "did not answer within 0.5 s" in outcome.error
        assert outcome.actions == 0 and len(actions) == 0  # nothing ever played
        wait_for(lambda: hold.calls == 1, what="the driver's hold service")
    finally:
        validator.close()


def test_an_accepting_validator_keeps_the_arm_moving(tier: Tier, sim: GatewaySimulator) -> None:
    validator = Validator(tier, "accepting", lambda request: (True, ""))
    try:
        node, hold = _arm(tier, sim, chunk_validator=validator.name)
        status, outcome = EpisodeClient(tier).send(max_actions=60).result()
        assert (status, outcome.reason) == ("succeeded", "completed"), node.output()
        assert outcome.underruns == 0 and outcome.duty_cycle == 1.0
        assert len(validator.requests) >= outcome.chunks
        assert hold.calls == 0
    finally:
        validator.close()


def test_an_absent_validator_refuses_the_start(tier: Tier, sim: GatewaySimulator) -> None:
    node, _ = _arm(tier, sim, chunk_validator=f"{tier.namespace}/nobody")
    answer = node.trigger("start_episode")
    assert not answer.success and "nobody is not available" in answer.message
    assert not EpisodeClient(tier).send(max_actions=5).accepted


def test_deactivate_and_process_exit_during_a_goal_each_give_its_result(
    tier: Tier, sim: GatewaySimulator
) -> None:
    node, hold = _arm(tier, sim)
    client = EpisodeClient(tier)
    goal = client.playing()
    assert node.transition("deactivate")
    status, outcome = goal.result()
    assert (status, outcome.reason, outcome.episode) == ("aborted", "stopped", 1)
    assert node.transition("activate")
    goal = client.playing()
    assert node.interrupt() == 0
    status, outcome = goal.result()
    assert (status, outcome.reason, outcome.episode) == ("aborted", "stopped", 2)
    wait_for(lambda: hold.calls == 2, what="one hold for each end")
