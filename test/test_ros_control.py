"""The node's one call per tick, ROS-free: ``Control.step`` on the real simulator and engine,
publishing Humble-shaped messages (test/humble_messages.py) through the real command sink.

The same step runs in the node on real rclpy (test/test_ros_real_*.py); here each outcome of a
tick is pinned directly: played, refused, stale input, completed, and the hold each needs.
"""

from __future__ import annotations

import time
from typing import Any

import humble_messages as messages
import numpy as np
import pytest
from conftest import TEST_KEY

from sequence_ai_core.playback.engine import PlaybackEngine
from sequence_ai_core.playback.episode import Episode
from sequence_ai_core.policy import Policy, connect
from sequence_ai_ros import outputs, parameters
from sequence_ai_ros.command_sink import CommandSink, Publishers
from sequence_ai_ros.control import Control, Step
from sequence_ai_ros.episode_recording import EpisodeRecordings
from sequence_ai_ros.inputs import InputStore, RawImage
from sequence_ai_ros.safety import checks_from_config
from sequence_ai_sim import GatewaySimulator

JOINTS = [f"joint_{i + 1}" for i in range(7)]
VIEWS = ["exterior_1", "wrist_left"]


class Topic:
    def __init__(self) -> None:
        self.messages: list[Any] = []

    def publish(self, msg: Any) -> None:
        self.messages.append(msg)


class Driver:
    def __init__(self) -> None:
        self.hold_calls = 0
        self.errors: list[str] = []

    def call_hold_service(self) -> None:
        self.hold_calls += 1

    def log_error(self, text: str) -> None:
        self.errors.append(text)


class Rig:
    """A control step wired as the node wires it, on the simulator at ``sim.url``: the engine
    and its journal (a recorder when ``record_dir`` is set) from ``EpisodeRecordings``."""

    def __init__(self, sim: GatewaySimulator, **changes: Any) -> None:
        values = {spec.name: spec.default for spec in parameters.PARAMETERS}
        values.update(
            joint_names=JOINTS, gripper_joint="gripper", gripper_dims=1, camera_views=VIEWS,
            camera_topics=[f"/{v}" for v in VIEWS], camera_encodings=["raw", "raw"],
            image_size=[32, 32], base_url=sim.url, max_observation_age_s=5.0,
        )  # fmt: skip
        values.update(changes)
        self.config = parameters.parse(values)
        self.policy: Policy = connect(api_key=TEST_KEY, **parameters.connect_arguments(self.config))
        model = self.policy.describe()
        self.inputs = InputStore(self.config)
        self.action = Topic()
        self.gripper = Topic()
        gripper = self.gripper if self.config.gripper_topic else None
        publishers = Publishers(self.action, gripper, Topic())
        output = outputs.get(self.config.output_type)
        types = messages.message_types()
        sink = CommandSink(self.config, output, types, publishers, lambda: 1_800_000_000 * 10**9)
        self.driver = Driver()
        self.control = Control(self.config, self.inputs, sink, self.driver)
        self.checks = checks_from_config(self.config, model.action_dim)
        self.warnings: list[str] = []
        self.recordings = EpisodeRecordings(self.warnings.append)
        self.recordings.configure(self.config.record)
        settings = self.config.run.with_catalogue(model)
        self.engine: PlaybackEngine = self.recordings.engine(self.policy, settings)
        self.episode = Episode(
            self.engine,
            max_actions=self.config.max_actions,
            hold=lambda: self.control.hold(early=True),
            hold_underrun=self.control.hold_underrun,
            journal=self.engine.journal,
        )
        self.control.begin_episode()
        self.feed()

    def feed(self) -> None:
        joints = [*self.config.joint_names, "gripper"]
        self.inputs.on_joint_state(joints, [0.0] * len(joints), [])
        for camera in self.config.cameras:
            self.inputs.on_image(camera.view, RawImage(2, 2, "rgb8", 6, bytes(12)))

    def run(self, ticks: int) -> list[Step]:
        """Up to ``ticks`` ticks at the engine's period, until one ends the episode."""
        steps: list[Step] = []
        for _ in range(ticks):
            self.feed()
            steps.append(
                self.control.step(self.engine, self.episode, self.checks, time.monotonic())
            )
            if steps[-1].ends:
                break
            time.sleep(steps[-1].period_s)
        return steps

    def close(self) -> None:
        self.engine.close(wait=False)
        self.policy.close()
        self.recordings.close()


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


ABSOLUTE = {
    "model": "lingbot-va-5b", "joint_names": [f"joint_{i + 1}" for i in range(6)],
    "camera_views": ["front", "wrist"], "camera_topics": ["/front", "/wrist"],
    "output_type": "joint_trajectory", "gripper_topic": "gripper",
}  # fmt: skip


def test_a_step_past_the_trajectory_sent_goes_out_in_a_new_one(rig: Any) -> None:
    """Late ticks skip steps, and a trajectory carries no more steps than the episode has
    actions left: a tick whose step lies past its end sends the rest from that step (else
    the episode would count actions the controller was never sent)."""
    run = rig(max_actions=40, **ABSOLUTE)
    handed: list[Any] = []
    tick = run.engine.tick

    def observed(now: float, observe: Any) -> Any:
        handed.append(tick(now, observe))
        return handed[-1]

    run.engine.tick = observed  # type: ignore[method-assign]
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
