"""One control tick of the node, ROS-free: the step due now, checked, published or held.

``Control.step`` is the node's one call per timer tick. It asks the engine for the step due
now, applies every safety rule (``safety.py``), builds the command and sends it through the
command sink, or holds; it returns what the node must do about the episode (stop, and why)
and the timer period to keep. It remembers what the arm was last commanded this episode,
which the next check and the hold command need. The node keeps the lifecycle and the ROS
wiring; the interfaces reach this only through ``DriverHold``.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Protocol

from sequence_ai_core import Episode, PlaybackEngine, SequencesError, Tick
from sequence_ai_core.node_api import FloatArray, StopReason, kind_of

from . import conversions as conv
from . import outputs, safety
from . import trajectories as traj
from .command_sink import CommandSink
from .hold import hold_command
from .inputs import InputStore
from .parameters import NodeConfig

#: The timer's period while the engine knows no rate (no control_hz parameter, a catalogue
#: entry without one, no chunk yet): how often it looks for the first chunk; not a period.
NO_RATE_POLL_S = 0.1


#: The rest of the playing chunk from the tick's step on, as it will be sent (the hand-over
#: included: ``PlaybackEngine.planned_rest``), and its anchor (monotonic seconds).
PlayingChunk = tuple[FloatArray, float]


class DriverHold(Protocol):
    """What a hold needs of the ROS side: the driver's hold service, and the error log."""

    def call_hold_service(self) -> None: ...

    def log_error(self, text: str) -> None: ...


@dataclass(frozen=True)
class Step:
    """What one tick means for the episode: the timer period to keep, and whether it ends
    (``reason``, or None with ``error`` for ``raised:<Class>``)."""

    period_s: float
    ends: bool = False
    reason: StopReason | None = None
    detail: str = ""
    error: BaseException | None = None
    trace: str = ""  # the traceback of an untyped failure, for the node's log


def _period(engine: PlaybackEngine) -> float:
    return engine.period_s or NO_RATE_POLL_S


def _playing(engine: PlaybackEngine, tick: Tick) -> PlayingChunk | None:
    """What a chunk trajectory carries: the targets the engine will send from this tick's
    step on, blended by the hand-over, not the chunk's raw steps (whose seam it smooths)."""
    current, rest = engine.current_chunk, engine.planned_rest(tick.step_index)
    if current is None or rest is None:
        return None
    return rest, current[1]


class Control:
    def __init__(
        self, config: NodeConfig, inputs: InputStore, sink: CommandSink, driver: DriverHold
    ) -> None:
        self.config = config
        self.inputs = inputs
        self.sink = sink
        self._driver = driver
        self._output = outputs.get(config.output_type)
        #: What the arm was last commanded, in action-space units (a hold included).
        self.last_action: FloatArray | None = None
        self._last_positions: FloatArray | None = None  # last joint targets sent
        self.action_space = ""
        #: The period of the last command sent; a hold goes out with it, and only after a
        #: command (``action_space`` is set with it).
        self.period_s = 0.0
        self.holds = 0  # holds for early stops (each also calls the hold service)
        self._underrun_held = False
        #: The chunk trajectory sent last: its chunk, the step it starts at and its steps as
        #: sent (action-space units); in force while the sink says the chunk is streamed.
        self._trajectory: tuple[int, int, FloatArray] | None = None

    def begin_episode(self) -> None:
        self.last_action = None
        self._last_positions = None
        self.action_space = ""
        self._underrun_held = False
        self._trajectory = None
        self.sink.reset()

    # ------------------------------------------------------------------ the tick

    def step(
        self, engine: PlaybackEngine, episode: Episode, checks: safety.SafetyChecks, now: float
    ) -> Step:
        """Play the step due at ``now`` (monotonic seconds), or hold; what the episode does."""
        stale = safety.stale_input(self.inputs, self.config)
        if stale is not None:
            return Step(_period(engine), ends=True, reason="stale_input", detail=stale)
        try:
            tick = engine.tick(now, self.inputs.observe)
        except Exception as exc:  # an untyped failure must still hold, not kill the executor
            trace = "" if isinstance(exc, SequencesError) else traceback.format_exc()
            return Step(_period(engine), ends=True, detail=str(exc), error=exc, trace=trace)
        period = _period(engine)
        if tick.new_chunk:
            self._publish_chunk(engine)
        if tick.action is None:
            stalled = episode.empty_tick(tick.kind, now)  # the underrun hold, the stall bound
            if stalled is None:
                return Step(period)
            return Step(period, ends=True, detail=str(stalled), error=stalled)
        space = engine.action_space or ""
        # built only when a chunk trajectory is due: the rest of a chunk is not free per tick
        sink = self.sink
        due = sink.streams_chunks and self.trajectory_step(tick) is None
        playing = _playing(engine, tick) if due else None
        problem = self.play(
            tick.action,
            space,
            checks,
            period,
            tick=tick,
            playing=playing,
            remaining=episode.remaining,
        )
        if not episode.offer(problem):  # refused: nothing went out
            return Step(period, ends=True, reason="validate", detail=problem or "")
        # It went out: the journal (the episode's recorder, if any) records the command
        # played at this tick, as Policy.run()'s driver does after act(), in the action
        # space's units (command_from_action made the published values from it): the action
        # the engine handed out, hand-over blend included. A chunk trajectory carries many
        # ticks' steps in one message, and at each tick the controller plays the point made
        # from that tick's step: the tick records that step as the trajectory carries it
        # (the engine's blended rest when it was sent; the first is the action of the tick
        # that sent it), on the ticks that publish nothing too. So there is one command per
        # action the episode counts, whatever the output type.
        sent = self.trajectory_step(tick) if sink.streams_chunks else None
        engine.journal.command(now, tick.action if sent is None else sent)
        if episode.commit():
            return Step(period, ends=True, reason="completed")
        return Step(period)

    def play(
        self,
        action: FloatArray,
        space: str,
        checks: safety.SafetyChecks,
        period_s: float,
        *,
        tick: Tick | None = None,
        playing: PlayingChunk | None = None,
        remaining: int | None = None,
    ) -> str | None:
        """Check and publish one action; the reason it was refused, or None. With
        ``trajectory_mode=chunk`` the rest of the ``playing`` chunk (the engine's
        ``current_chunk``, from the ``tick``'s step on) goes out once, as one trajectory, each
        step checked like a single action first, and no more of them than the ``remaining``
        actions of the episode (this one included); again from a later step only if the
        trajectory sent ends before it (``trajectory_step``)."""
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
            builds_positions=self._output.needs_positions,
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
        if not self.sink.streams_chunks or tick is None:
            problem = self.sink.send(command, period_s, self.action_space)
        elif playing is None:  # the controller already plays this chunk's trajectory
            problem = None
        else:
            problem = self._stream(
                tick, playing, action, space, checks, measured, period_s, remaining
            )
        if problem is None:
            self.last_action = action.copy()
            self._last_positions = command.positions
            self.action_space = space
            self.period_s = period_s
            self._underrun_held = False
        return problem

    def trajectory_step(self, tick: Tick) -> FloatArray | None:
        """The step of the chunk trajectory in force that the controller plays at
        ``tick``, as sent; None when none covers it: a new chunk, a hold since, or a step
        past the trajectory's end (late ticks skip steps, and a trajectory carries only as
        many steps as the episode had actions left), which the next trajectory then sends."""
        sent = self._trajectory
        if sent is None or sent[0] != tick.chunk_seq or not self.sink.streamed(tick.chunk_seq):
            return None
        _, first, steps = sent
        offset = tick.step_index - first
        return steps[offset] if 0 <= offset < len(steps) else None

    def _stream(
        self,
        tick: Tick,
        playing: PlayingChunk,
        action: FloatArray,
        space: str,
        checks: safety.SafetyChecks,
        measured: FloatArray | None,
        period_s: float,
        remaining: int | None,
    ) -> str | None:
        """Publish the rest of the playing chunk from this tick's step, unless the
        trajectory in force already carries that step."""
        if self.trajectory_step(tick) is not None:
            return None  # the controller is already playing this chunk's trajectory
        rest, anchor = playing
        steps = safety.trajectory_steps(rest, action, remaining)
        problem = safety.check_trajectory(checks, steps[1:], action)
        if problem:
            return problem
        problem = self.sink.stream(
            steps,
            chunk_seq=tick.chunk_seq,
            action_space=space,
            measured=measured,
            period_s=period_s,
            late_s=traj.due_offset_s(anchor, tick.step_index, period_s, time.monotonic()),
        )
        if problem is None:
            self._trajectory = (tick.chunk_seq, tick.step_index, steps)
        return problem

    def _publish_chunk(self, engine: PlaybackEngine) -> None:
        current = engine.current_chunk
        if current is not None:
            chunk, anchor = current
            self.sink.publish_chunk(chunk, time.monotonic() - anchor)

    # ------------------------------------------------------------------ holds

    def hold(self, *, early: bool) -> None:
        """Send the hold command; on an early stop also call the driver's hold service."""
        if early:
            self.holds += 1
            self._driver.call_hold_service()
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
            self._driver.log_error(f"hold not published: {problem}")
        else:
            self.last_action = safety.after_hold(command)
            self._last_positions = command.positions

    def hold_underrun(self) -> None:
        """Once per underrun spell: a velocity or delta command would otherwise keep
        running on a forward controller. Absolute targets already hold by themselves."""
        if self._underrun_held or self.last_action is None or self.holds_by_itself:
            return
        self._underrun_held = True
        self.hold(early=False)

    @property
    def holds_by_itself(self) -> bool:
        """The last command was an absolute target, which a controller keeps: a completed
        absolute plan ends on it (a hold at the measured position would be a step back)."""
        return kind_of(self.action_space) == "absolute"
