"""Turns a checked action, a planned trajectory or a hold into messages on the publishers.

ROS-free: the publishers are anything with ``publish``, the message classes come in as
``MessageTypes`` and the time as nanoseconds on the node's clock, so the same code runs in the
node and, with Humble's message definitions, in the ROS-free tests. What to send is decided
before (``safety.py`` checks it, ``hold.py`` says what a hold is); this module only builds and
publishes, through the output type's own message builders (``outputs/``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from sequence_ai_core import ActionChunk
from sequence_ai_core.node_api import FloatArray

from . import conversions as conv
from . import trajectories as traj
from .outputs import Envelope, OutputType
from .parameters import NodeConfig

#: A tick may build its command up to this long before it is due (the control clock wakes that
#: early), so that it leaves at its deadline however long the build took. The send spins to
#: the due time: a sleep this short wakes late (docs/performance.md, "Measured on real rclpy").
BUILD_AHEAD_S = 0.0008


@dataclass(frozen=True)
class InForce:
    """The chunk trajectory the controller is playing: chunk ``chunk_seq`` from step
    ``first_step`` on, its ``steps`` as sent (action-space units)."""

    chunk_seq: int
    first_step: int
    steps: FloatArray

    def step(self, chunk_seq: int, index: int) -> FloatArray | None:
        """Step ``index`` of chunk ``chunk_seq`` as this trajectory carries it, or None."""
        offset = index - self.first_step
        if chunk_seq != self.chunk_seq or not 0 <= offset < len(self.steps):
            return None
        step: FloatArray = self.steps[offset]
        return step


class Publisher(Protocol):
    def publish(self, msg: Any) -> None: ...


@dataclass(frozen=True)
class Publishers:
    action: Publisher
    gripper: Publisher | None  # gripper dims on their own topic (gripper_topic)
    chunk: Publisher  # ~/chunk, the whole chunk for recording and plotting


def gripper_joint_names(config: NodeConfig) -> list[str]:
    """Joint names of the gripper dims on the gripper topic: the gripper joint when there is
    one gripper dim and it is named, else ``gripper_<i>``."""
    dims = config.gripper_dims
    if dims == 1 and config.gripper_joint:
        return [config.gripper_joint]
    return [f"gripper_{i}" for i in range(dims)]


class CommandSink:
    def __init__(
        self,
        config: NodeConfig,
        output: OutputType,
        types: conv.MessageTypes,
        publishers: Publishers,
        now_ns: Callable[[], int],
    ) -> None:
        self._config = config
        self._output = output
        self._types = types
        self._publishers = publishers
        self._now_ns = now_ns
        self.gripper_names = gripper_joint_names(config)
        #: The one record of the trajectory in force (trajectory_mode=chunk): a hold or a new
        #: episode ends it. The streamer only remembers where it takes the arm.
        self._in_force: InForce | None = None
        self._streamer: traj.ChunkStreamer | None = None

    @property
    def streams_chunks(self) -> bool:
        """The rest of each chunk goes out as one trajectory, not one command per tick."""
        return self._output.streams_trajectories and self._config.trajectory_mode == "chunk"

    def reset(self) -> None:
        """A new episode: no trajectory has been sent."""
        self._in_force = None
        self._streamer = None

    def streamed(self, chunk_seq: int) -> bool:
        """Whether the controller is already playing this chunk's trajectory."""
        return self._in_force is not None and self._in_force.chunk_seq == chunk_seq

    def trajectory_step(self, chunk_seq: int, index: int) -> FloatArray | None:
        """Step ``index`` of chunk ``chunk_seq`` as the trajectory in force carries it (the
        controller plays it); None when none does: another chunk's, a hold since, or a step
        past its end."""
        return None if self._in_force is None else self._in_force.step(chunk_seq, index)

    def send(
        self, command: conv.Command, period_s: float, action_space: str, at: float | None = None
    ) -> str | None:
        """Publish one command (arm, and gripper on its topic), not before ``at`` (monotonic
        seconds; at most ``BUILD_AHEAD_S`` on); why not, or None."""
        output, config = self._output, self._config
        if output.needs_positions and command.positions is None:
            return (
                f"output_type {output.name} needs joint positions: none measured on "
                f"joint_states, or action space {action_space or 'unknown'} has no joint targets"
            )
        ahead_s = _ahead_s(at)
        due = time.monotonic() + ahead_s  # built early: out at its due time, stamped with it
        stamp = conv.stamp(self._types, self._now_ns() + int(ahead_s * 1e9))
        gripper = self._publishers.gripper
        arm = output.arm_message(
            Envelope(self._types, config.joint_names, period_s, stamp),
            command,
            with_gripper=gripper is None,
            velocities=config.trajectory_velocities,
        )
        grip = None
        if gripper is not None and len(command.gripper):
            to_gripper = Envelope(self._types, self.gripper_names, period_s, stamp)
            grip = output.gripper_message(to_gripper, command.gripper)
        while time.monotonic() < due:
            pass
        self._publishers.action.publish(arm)
        if gripper is not None and grip is not None:
            gripper.publish(grip)
        return None

    def send_hold(self, command: conv.Command, period_s: float, action_space: str) -> str | None:
        """Publish a hold; it replaces any trajectory sent, so the next one starts afresh."""
        self._in_force = None
        if self._streamer is not None:
            self._streamer.reset()
        return self.send(command, period_s, action_space)

    def stream(
        self,
        steps: FloatArray,
        *,
        chunk_seq: int,
        first_step: int = 0,
        action_space: str,
        measured: FloatArray | None,
        period_s: float,
        late_s: float,
    ) -> str | None:
        """Publish ``steps`` (checked; the first, step ``first_step`` of chunk ``chunk_seq``,
        due ``late_s`` ago) as one trajectory, which is then in force."""
        streamer = self._streamer
        if streamer is None or streamer.action_space != action_space:
            streamer = self._streamer = traj.ChunkStreamer(
                action_space=action_space,
                gripper_dims=self._config.gripper_dims,
                velocities=self._config.trajectory_velocities,
            )
        stamp_ns = self._now_ns() - int(late_s * 1e9)
        planned = streamer.plan(
            steps, measured=measured, period_s=period_s, stamp_s=stamp_ns * 1e-9
        )
        if isinstance(planned, str):
            return planned
        types = self._types
        stamp = conv.stamp(types, stamp_ns)
        rows = planned.velocities if planned.velocities is not None else [None] * len(planned)
        points = list(zip(planned.positions, rows, planned.times_s, strict=True))
        output, names = self._output, self._config.joint_names
        self._publishers.action.publish(output.trajectory_message(types, names, points, stamp))
        gripper = self._publishers.gripper
        if gripper is not None and planned.gripper.shape[1]:
            grip = [(row, None, t) for row, t in zip(planned.gripper, planned.times_s, strict=True)]
            gripper.publish(output.trajectory_message(types, self.gripper_names, grip, stamp))
        self._in_force = InForce(chunk_seq, first_step, steps)
        return None

    def publish_chunk(self, chunk: ActionChunk, age_s: float) -> None:
        """The whole chunk on ~/chunk, stamped with its observation's time (``age_s`` ago)."""
        types = self._types
        stamp = conv.stamp(types, self._now_ns() - int(max(0.0, age_s) * 1e9))
        names = list(self._config.joint_names) + self.gripper_names
        if len(names) != chunk.action_dim:
            names = [f"dim_{i}" for i in range(chunk.action_dim)]
        msg = conv.chunk_trajectory(
            types,
            chunk.steps,
            names=names,
            action_space=chunk.action_space,
            control_hz=chunk.control_frequency_hz,
            stamp=stamp,
        )
        self._publishers.chunk.publish(msg)


def _ahead_s(at: float | None) -> float:
    """How long until ``at`` (monotonic), at most ``BUILD_AHEAD_S``; 0 when it has passed."""
    return 0.0 if at is None else max(0.0, min(at - time.monotonic(), BUILD_AHEAD_S))
