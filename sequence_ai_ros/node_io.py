"""The node's I/O in one object: its ROS interfaces (``interfaces.py``), the safety rules
every action meets (``safety.py``), and the command sink that publishes what passed
(``command_sink.py``). It remembers what the arm was last commanded this episode, which the
safety rules and the hold command need."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sequence_ai_core.types import ABSOLUTE_SPACES, ActionChunk, FloatArray, Model

from . import conversions as conv
from . import outputs, safety
from . import trajectories as traj
from .command_sink import CommandSink
from .hold import hold_command
from .inputs import InputStore
from .interfaces import MESSAGE_TYPES, EpisodeController, NodeInterfaces
from .params import NodeConfig

#: The chunk playing and its anchor (monotonic seconds), as ``PlaybackEngine.current_chunk``.
PlayingChunk = Callable[[], "tuple[ActionChunk, float] | None"]


class NodeIO:
    def __init__(
        self,
        node: Any,
        config: NodeConfig,
        model: Model,
        *,
        controller: EpisodeController,
        playing: PlayingChunk,
    ) -> None:
        self.config = config
        self.model = model
        self.output = outputs.get(config.output_type)
        self.inputs = InputStore(config)
        self.interfaces = NodeInterfaces(node, config, self.inputs, controller)
        self._playing = playing
        self._sink: CommandSink | None = None
        #: What the arm was last commanded, in action-space units (a hold included).
        self.last_action: FloatArray | None = None
        self._last_positions: FloatArray | None = None  # last joint targets sent
        self.action_space = ""
        #: The period of the last command sent (the engine's, passed to ``play``); a hold
        #: goes out with it, and only after a command (``action_space`` is set with it).
        self.period_s = 0.0
        self.holds = 0  # holds for early stops (each also calls the hold service)
        self._underrun_held = False

    def create(self) -> None:
        publishers = self.interfaces.create(self.output)
        self._sink = CommandSink(
            self.config, self.output, MESSAGE_TYPES, publishers, self.interfaces.now_ns
        )

    def destroy(self) -> None:
        self.interfaces.destroy()
        self._sink = None

    @property
    def sink(self) -> CommandSink:
        if self._sink is None:  # a bug in the caller: refuse to send, loudly
            raise RuntimeError("NodeIO.create() has not run: no publishers to send on")
        return self._sink

    def begin_episode(self) -> None:
        self.last_action = None
        self._last_positions = None
        self.action_space = ""
        self._underrun_held = False
        self.sink.reset()

    # ------------------------------------------------------------------ actions

    def play(
        self,
        action: FloatArray,
        space: str,
        checks: safety.SafetyChecks,
        period_s: float,
        tick: Any = None,
        remaining: int | None = None,
    ) -> str | None:
        """Check and publish one action; the reason it was refused, or None. With
        ``trajectory_mode=chunk`` the engine's ``tick`` says which chunk plays: its remaining
        steps go out once, as one trajectory, each checked like a single action first, and
        no more of them than the ``remaining`` actions of the episode (this one included)."""
        max_age = self.config.max_observation_age_s
        measured = self.inputs.measured_arm(max_age)
        reason = safety.check_action(
            checks,
            action,
            action_space=space,
            last_action=self.last_action,
            measured=measured,
            arm_problem=None if measured is not None else self.inputs.arm_problem(max_age),
            gripper_dims=self.config.gripper_dims,
            builds_positions=self.output.needs_positions,
        )
        if reason:
            return reason
        command = conv.command_from_action(
            action,
            action_space=space,
            gripper_dims=self.config.gripper_dims,
            measured=measured,
            period_s=period_s,
        )
        sink = self.sink
        if sink.streams_chunks and tick is not None:
            problem = self._stream(tick, action, space, checks, measured, period_s, remaining)
        else:
            problem = sink.send(command, period_s, self.action_space)
        if problem is None:
            self.last_action = action.copy()
            self._last_positions = command.positions
            self.action_space = space
            self.period_s = period_s
            self._underrun_held = False
        return problem

    def _stream(
        self,
        tick: Any,
        action: FloatArray,
        space: str,
        checks: safety.SafetyChecks,
        measured: FloatArray | None,
        period_s: float,
        remaining: int | None,
    ) -> str | None:
        """Publish the rest of the playing chunk when it is new to the controller."""
        current = self._playing()
        if current is None or self.sink.streamed(tick.chunk_seq):
            return None  # the controller is already playing this chunk's trajectory
        chunk, anchor = current
        steps = safety.trajectory_steps(chunk.steps[tick.step_index :], action, remaining)
        problem = safety.check_trajectory(checks, steps[1:], action)
        if problem:
            return problem
        return self.sink.stream(
            steps,
            chunk_seq=tick.chunk_seq,
            action_space=space,
            measured=measured,
            period_s=period_s,
            late_s=traj.due_offset_s(anchor, tick.step_index, period_s, time.monotonic()),
        )

    def publish_chunk(self, engine: Any) -> None:
        current = engine.current_chunk
        if current is not None:
            chunk, anchor = current
            self.sink.publish_chunk(chunk, time.monotonic() - anchor)

    # ------------------------------------------------------------------ holds

    def hold(self, *, early: bool) -> None:
        """Send the hold command; on an early stop also call the driver's hold service."""
        if early:
            self.holds += 1
            self.interfaces.call_hold_service()
        if not self.action_space:
            return
        command = hold_command(
            action_space=self.action_space,
            gripper_dims=self.config.gripper_dims,
            last_action=self.last_action,
            measured=self.inputs.measured_arm(self.config.max_observation_age_s),
            last_target=self._last_positions,
        )
        if command is None:
            return
        problem = self.sink.send_hold(command, self.period_s, self.action_space)
        if problem:
            self.interfaces.log_error(f"hold not published: {problem}")
        else:
            self.last_action = safety.after_hold(command)
            self._last_positions = command.positions

    def hold_underrun(self) -> None:
        """Once per underrun spell: a velocity or delta command would otherwise keep
        running on a forward controller. Absolute targets already hold by themselves."""
        if self._underrun_held or self.last_action is None or self.action_space in ABSOLUTE_SPACES:
            return
        self._underrun_held = True
        self.hold(early=False)
