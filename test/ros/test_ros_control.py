"""The node's one call per tick, ROS-free: ``Control.step`` on the real simulator and engine,
publishing Humble-shaped messages (test/support/humble_messages.py) through the real command
sink (the rig: test/support/control_rig.py).

The same step runs in the node on real rclpy (test/ros/test_ros_real_*.py); here each outcome of a
tick is pinned directly: played, refused, stale input, completed, and the hold each needs.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from support.control_rig import ABSOLUTE, JOINTS, Rig

from sequence_ai_ros.command_sink import BUILD_AHEAD_S
from sequence_ai_sim import GatewaySimulator


@pytest.fixture
def rig(sim: GatewaySimulator) -> Any:
    made: list[Rig] = []

    def make(**changes: Any) -> Rig:
        made.append(Rig(sim, **changes))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_step_plays_each_checked_action_and_ends_the_episode_at_max_actions(rig: Any) -> None:
    run = rig(max_actions=6)
    steps = run.run(200)
    assert steps[-1].ends and steps[-1].reason == "completed"
    assert all(not s.ends for s in steps[:-1])
    assert all(s.period_s == pytest.approx(1 / 15) for s in steps)
    sent = [np.array(m.data) for m in run.action.messages]
    assert len(sent) == 6 and all(len(a) == 8 and np.isfinite(a).all() for a in sent)
    assert np.array_equal(run.control.last_action, sent[-1])
    assert not run.control.holds_by_itself  # a velocity plan: the node ends it with zeros
    run.control.hold(early=False)
    assert not np.array(run.action.messages[-1].data)[:7].any() and run.driver.hold_calls == 0


def test_a_refused_action_ends_the_episode_and_nothing_goes_out(rig: Any) -> None:
    run = rig(max_step=[1e-9])  # every first velocity is a step from rest
    steps = run.run(200)
    assert steps[-1].ends and steps[-1].reason == "validate"
    assert "max_step" in steps[-1].detail
    assert run.action.messages == [] and run.control.last_action is None


def test_a_stale_arm_ends_the_episode_before_the_engine_is_asked(
    rig: Any, sim: GatewaySimulator
) -> None:
    run = rig(max_observation_age_s=0.05)
    run.inputs.on_joint_state([*JOINTS, "gripper"], [0.0] * 8, [])
    time.sleep(0.1)
    step = run.control.step(run.engine, run.episode, run.checks, time.monotonic())
    assert step.ends and step.reason == "stale_input" and "max_observation_age_s" in step.detail
    assert [r for r in sim.received if r.path == "/v1/act"] == []  # nothing was requested


def test_while_a_person_has_the_arm_nothing_goes_out_but_a_stale_arm_still_ends_it(
    rig: Any, sim: GatewaySimulator
) -> None:
    run = rig(max_observation_age_s=0.3)
    while not run.action.messages:
        run.run(1)
    run.episode.take_over(time.monotonic())
    sent, asked = len(run.action.messages), len(sim.received)
    steps = run.run(10)  # fresh inputs: ticks go by, the episode stays alive
    assert not any(s.ends for s in steps)
    assert (len(run.action.messages), len(sim.received)) == (sent, asked)
    assert run.driver.hold_calls == 0
    time.sleep(0.4)  # the arm's reading goes stale while the person has it
    step = run.control.step(run.engine, run.episode, run.checks, time.monotonic())
    assert step.ends and step.reason == "stale_input"
    assert run.driver.hold_calls == 1  # the stop's one hold


def test_the_hand_back_holds_at_rest_then_the_policy_resumes(rig: Any) -> None:
    run = rig()
    while len(run.action.messages) < 3:
        run.run(1)
    run.episode.take_over(time.monotonic())
    run.run(3)
    sent = len(run.action.messages)
    run.episode.hand_back(time.monotonic())
    hold = np.array(run.action.messages[sent].data)
    assert len(run.action.messages) == sent + 1 and not hold[:7].any()  # zero velocity
    steps = []
    while len(run.action.messages) < sent + 4 and len(steps) < 200:
        steps += run.run(1)
    resumed = [np.array(m.data) for m in run.action.messages[sent + 1 :]]
    assert len(resumed) == 3 and not any(s.ends for s in steps)
    assert run.driver.hold_calls == 0  # a hand-back calls no driver's hold service
    assert run.engine.outcome(reason="stopped", stopped_early=True).takeovers == 1


def test_an_untyped_failure_ends_the_episode_with_its_traceback(rig: Any) -> None:
    run = rig()

    def broken() -> None:
        raise RuntimeError("camera driver exploded")

    run.inputs.observe = broken  # type: ignore[method-assign]
    step = run.control.step(run.engine, run.episode, run.checks, time.monotonic())
    assert step.ends and step.reason is None and isinstance(step.error, RuntimeError)
    assert "camera driver exploded" in step.detail and "Traceback" in step.trace


def test_chunk_trajectories_go_out_once_per_chunk_with_the_blended_targets(rig: Any) -> None:
    """trajectory_mode chunk: the rest of a chunk goes out once, as the engine will send it
    (``planned_rest``), and the ticks it covers send nothing more."""
    run = rig(output_type="joint_trajectory", gripper_topic="gripper", max_actions=20)
    steps = run.run(300)
    assert steps[-1].ends and steps[-1].reason == "completed"
    trajectories = run.action.messages
    assert 1 <= len(trajectories) < 20  # one per chunk, not one per tick
    assert sum(len(m.points) for m in trajectories) >= 20
    first = trajectories[0]
    assert len(first.points) > 1


def test_a_step_past_the_trajectory_sent_goes_out_in_a_new_one(rig: Any) -> None:
    """Late ticks skip steps, and a trajectory carries no more steps than the episode has
    actions left: a tick whose step lies past its end sends the rest from that step (else
    the episode would count actions the controller was never sent)."""
    run = rig(max_actions=40, **ABSOLUTE)
    handed: list[Any] = []
    play = run.engine.play

    def observed(now: float) -> Any:
        handed.append(play(now))
        return handed[-1]

    run.engine.play = observed  # type: ignore[method-assign]
    covered, sent_again = [], 0
    for _ in range(400):
        run.feed()
        actions, messages = run.episode.actions, len(run.action.messages)
        step = run.control.step(run.engine, run.episode, run.checks, time.monotonic())
        if run.episode.actions > actions:
            played = handed[-1]
            covered.append(run.control.trajectory_step(played))
            trajectory = run.action.messages[-1]
            rows = [np.asarray(point.positions) for point in trajectory.points]
            assert any(np.array_equal(row, played.action[:6]) for row in rows)  # absolute
            fresh = len(run.action.messages) > messages
            sent_again += fresh and not played.new_chunk and played.step_index > 0
        if step.ends:
            break
        time.sleep(step.period_s * 2.5)  # every tick late: about two steps skipped each
    assert step.reason == "completed" and len(covered) == 40
    assert all(sent is not None for sent in covered)
    assert sent_again >= 1  # the last trajectory of the episode ran out before its actions


def test_a_tick_publishes_its_command_before_it_observes_for_a_request(rig: Any) -> None:
    """The request's observation, its images and its hand-off to a worker come after the
    command of the tick that starts it (``PlaybackEngine.refill``), so they never delay it."""
    run = rig(max_actions=40)
    observe = run.inputs.observe
    published_when_observed: list[tuple[int, int]] = []  # (commands before, this tick's)
    ticks = [0]

    def observed() -> Any:
        published_when_observed.append((len(run.action.messages), ticks[0]))
        return observe()

    run.inputs.observe = observed  # type: ignore[method-assign]
    commands_at_tick: list[int] = []
    for _ in range(400):
        run.feed()
        ticks[0] = len(commands_at_tick)
        before = len(run.action.messages)
        step = run.control.step(run.engine, run.episode, run.checks, time.monotonic())
        commands_at_tick.append(len(run.action.messages) - before)
        if step.ends:
            break
        time.sleep(step.period_s)
    assert step.reason == "completed"
    while_playing = [(n, t) for n, t in published_when_observed if commands_at_tick[t] == 1]
    assert len(while_playing) >= 2  # refills started at ticks that sent a command
    for commands, tick in while_playing:
        assert commands == sum(commands_at_tick[: tick + 1])  # this tick's command went first


def test_a_tick_begun_before_its_due_time_plays_that_step_and_publishes_at_it(rig: Any) -> None:
    """The control clock starts a tick up to ``BUILD_AHEAD_S`` early and gives it its due
    time: the engine plays the step due then, and the command leaves no earlier."""
    run = rig(max_actions=40)
    played: list[float] = []
    play = run.engine.play

    def observed(now: float) -> Any:
        played.append(now)
        return play(now)

    run.engine.play = observed  # type: ignore[method-assign]
    published: list[float] = []
    publish = run.action.publish

    def clocked(msg: Any) -> None:
        published.append(time.monotonic())
        publish(msg)

    run.action.publish = clocked  # type: ignore[method-assign]
    dues: list[float] = []
    for _ in range(400):
        run.feed()
        due = time.monotonic() + BUILD_AHEAD_S
        sent = len(published)
        step = run.control.step(run.engine, run.episode, run.checks, due)
        if len(published) > sent:
            dues.append(due)
            assert published[-1] >= due
        if step.ends:
            break
        time.sleep(step.period_s)
    assert step.reason == "completed" and len(dues) == 40
    assert set(dues) <= set(played)
