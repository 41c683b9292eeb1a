"""One control tick of the node, ROS-free: the step due now, checked, published or held.

``Control.step`` is the node's one call per timer tick, a driver of the engine as
``Policy.run()``'s loop is: it asks the engine for the step due now, applies every safety
rule (``safety.py``), builds the command and sends it through the command sink, or says
why not; the core ``Episode`` takes that verdict (``Episode.settle``) and decides whether
the episode ends; only then may the engine start a request (``refill``), so its
observation never delays the command; while a person has the arm it sends nothing.
``step`` returns that end, if any, and the timer period to keep. It remembers what the arm
was last commanded this episode, which the next check and the hold command need. The node
keeps the lifecycle and the ROS wiring; the interfaces reach this only through
``DriverHold``.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Protocol

from sequence_ai_core import Episode, PlaybackEngine, SequencesError, Tick
from sequence_ai_core.node_api import FloatArray, kind_of

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


class DriverHold(Protocol):
    """What a hold needs of the ROS side: the driver's hold service, and the error log."""

    def call_hold_service(self) -> None: ...

    def log_error(self, text: str) -> None: ...


@dataclass(frozen=True)
class Step:
    """What one tick means for the episode: the timer period to keep, and whether the
    episode ended at this tick (its ``reason``, or None with ``error`` for
    ``raised:<Class>``, as the episode decided)."""

    period_s: float
    ends: bool = False
    reason: str | None = None
    detail: str = ""
    error: BaseException | None = None
    trace: str = ""  # the traceback of an untyped failure, for the node's log


def _period(engine: PlaybackEngine) -> float:
    return engine.period_s or NO_RATE_POLL_S


def _failed(engine: PlaybackEngine, episode: Episode, exc: Exception) -> Step:
    """The engine raised: the episode ends on that error, with its hold."""
    trace = "" if isinstance(exc, SequencesError) else traceback.format_exc()
    episode.stop(error=exc, detail=str(exc))
    return _ended(_period(engine), episode, trace)


def _ended(period_s: float, episode: Episode, trace: str = "") -> Step:
    """The step of a tick at which the episode ended, as its outcome says."""
    outcome = episode.outcome
    raised = outcome.reason.startswith("raised:")
    return Step(
        period_s,
        ends=True,
        reason=None if raised else outcome.reason,
        detail=episode.detail,
        error=outcome.error,
        trace=trace,
    )


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

    def begin_episode(self) -> None:
        self.last_action = None
        self._last_positions = None
        self.action_space = ""
        self._underrun_held = False
        self.sink.reset()

    # ------------------------------------------------------------------ the tick

    def step(
        self, engine: PlaybackEngine, episode: Episode, checks: safety.SafetyChecks, now: float
    ) -> Step:
        """Play the step due at ``now`` (monotonic seconds; the command is not published
        before it, if the tick began early), or hold; what the episode does."""
        stale = safety.stale_input(self.inputs, self.config)
        if stale is not None:
            episode.stop("stale_input", detail=stale)
            return _ended(_period(engine), episode)
        if episode.taken_over:  # a person's device has the controller: send nothing
            episode.watch(now, self.inputs.observe)
            return Step(_period(engine))
        try:
            tick = engine.play(now)
        except Exception as exc:  # an untyped failure must still hold, not kill the executor
            return _failed(engine, episode, exc)
        period = _period(engine)
        if tick.action is None:  # the underrun hold, the stall bound
            ends = episode.idle(tick.kind, now)
        else:
            ends = self._send(tick, tick.action, engine, episode, checks, period, now)
        if tick.new_chunk:  # after the command: the chunk's topic is for watching
            self._publish_chunk(tick)
        if ends:
            return _ended(period, episode)
        try:  # after the command, so that a request never delays it
            engine.refill(now, self.inputs.observe)
        except Exception as exc:
            return _failed(engine, episode, exc)
        return Step(period)

    def _send(
        self,
        tick: Tick,
        action: FloatArray,
        engine: PlaybackEngine,
        episode: Episode,
        checks: safety.SafetyChecks,
        period: float,
        now: float,
    ) -> bool:
        """Publish the tick's action, or refuse it; True when the episode ends with it."""
        # With trajectory_mode=chunk the controller plays this tick's step from the trajectory
        # in force, if one carries it; else one goes out from this step (its first point is
        # the action). Either way the command recorded is the step as the controller plays
        # it: one command per action the episode counts, whatever the output type.
        in_force = self.sink.trajectory_step(tick.chunk_seq, tick.step_index)
        refused = self.play(
            action,
            engine.action_space or "",
            checks,
            period,
            tick=tick,
            in_force=in_force is not None,
            remaining=episode.remaining,
            at=now,
        )
        return episode.settle(tick, refused, sent=in_force)

    def play(
        self,
        action: FloatArray,
        space: str,
        checks: safety.SafetyChecks,
        period_s: float,
        *,
        tick: Tick | None = None,
        in_force: bool = False,
        remaining: int | None = None,
        at: float | None = None,
    ) -> str | None:
        """Check and publish one action; the reason it was refused, or None. With
        ``trajectory_mode=chunk`` the rest of the ``tick``'s chunk from its step on goes out
        once, as one trajectory (``Tick.rest``: the steps as the engine will send them),
        each step checked like a single action first, and no more of them than the
        ``remaining`` actions of the episode (this one included); again from a later step
        only when the trajectory sent does not carry it (``in_force`` False). A single
        command goes out no earlier than ``at`` (``CommandSink.send``)."""
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
            problem = self.sink.send(command, period_s, self.action_space, at)
        elif in_force:  # the controller already plays this step of the chunk's trajectory
            problem = None
        else:
            problem = self._stream(tick, action, space, checks, measured, period_s, remaining)
        if problem is None:
            self.last_action = action.copy()
            self._last_positions = command.positions
            self.action_space = space
            self.period_s = period_s
            self._underrun_held = False
        return problem

    def trajectory_step(self, tick: Tick) -> FloatArray | None:
        """The step of the chunk trajectory in force that the controller plays at ``tick``,
        as sent; None when none covers it (``CommandSink.trajectory_step``)."""
        return self.sink.trajectory_step(tick.chunk_seq, tick.step_index)

    def _stream(
        self,
        tick: Tick,
        action: FloatArray,
        space: str,
        checks: safety.SafetyChecks,
        measured: FloatArray | None,
        period_s: float,
        remaining: int | None,
    ) -> str | None:
        """Publish the rest of the tick's chunk from its step on as one trajectory."""
        rest = tick.rest()
        if rest is None:
            return "no chunk to send as a trajectory"
        steps = safety.trajectory_steps(rest, action, remaining)
        problem = safety.check_trajectory(checks, steps[1:], action)
        if problem:
            return problem
        return self.sink.stream(
            steps,
            chunk_seq=tick.chunk_seq,
            first_step=tick.step_index,
            action_space=space,
            measured=measured,
            period_s=period_s,
            late_s=traj.due_offset_s(tick.anchor, tick.step_index, period_s, time.monotonic()),
        )

    def _publish_chunk(self, tick: Tick) -> None:
        chunk = tick.chunk
        if chunk is not None:
            self.sink.publish_chunk(chunk, time.monotonic() - tick.anchor)

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

    def hold_release(self) -> None:
        """At a hand-back, until the policy's next chunk: zeros for speeds, the measured
        position for targets (where the person left the arm), on the action topic."""
        self._underrun_held = False
        self.hold(early=False)

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
