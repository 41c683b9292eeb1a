"""The node's control step wired as the node wires it, ROS-free: the real engine on a simulator,
the real command sink publishing Humble-shaped messages to topics that keep what they get."""

from __future__ import annotations

import time
from typing import Any

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
from support import TEST_KEY
from support import humble_messages as messages

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
            hold_release=self.control.hold_release,
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


#: An absolute-position model driving joint_trajectory_controller, chunk by chunk.
ABSOLUTE = {
    "model": "lingbot-va-5b", "joint_names": [f"joint_{i + 1}" for i in range(6)],
    "camera_views": ["front", "wrist"], "camera_topics": ["/front", "/wrist"],
    "output_type": "joint_trajectory", "gripper_topic": "gripper",
}  # fmt: skip
