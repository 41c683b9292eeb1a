"""The lifecycle node: the same PlaybackEngine as ``Policy.run()``, driven by a control clock.

configure opens the connection and creates every interface; activate enables the publishers;
an episode starts the clock at the engine's control period; deactivate, cleanup and shutdown
stop the episode and hold. Each tick asks the engine for the step due now, checks it, and
publishes it or holds. The ticks run on the clock's thread (control_clock.py), everything
else on the executor's; the node's lock keeps them apart (``_exclusive``).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import Node, State, TransitionCallbackReturn
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import ok, try_shutdown

from sequence_ai_core import Episode, PlaybackEngine, Policy, RunOutcome, SequencesError, connect
from sequence_ai_core.node_api import Label, StopReason, resolve_api_key
from sequence_ai_ros.msg import RunOutcome as RunOutcomeMsg

from . import diagnostics, parameters, rclpy_guards
from .chunk_validator import ChunkValidator
from .command_sink import BUILD_AHEAD_S
from .control import NO_RATE_POLL_S
from .control_clock import ControlClock
from .episode import EpisodeEnd, Episodes
from .episode_action import EpisodeAction
from .episode_recording import EpisodeRecordings
from .health_publisher import HealthPublisher
from .messages import MESSAGE_TYPES
from .node_io import NodeIO
from .outcome_message import DETAILED, error_text, outcome_message
from .safety import SafetyChecks, checks_from_config
from .teleop import operator_values

#: Where the node reads an openpi server's key (sent as ``Authorization: Api-Key``); the
#: gateway's key is never sent to an openpi server.
OPENPI_KEY_ENV = "OPENPI_API_KEY"

#: The lifecycle state each transition leads to when its callback succeeds (diagnostics).
_AFTER = {"configure": "inactive", "activate": "active", "deactivate": "inactive"}
_AFTER |= dict.fromkeys(("cleanup", "shutdown", "error recovery"), "unconfigured")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _exclusive(
    method: Callable[Concatenate[PolicyNode, _P], _R],
) -> Callable[Concatenate[PolicyNode, _P], _R]:
    """Under the node's lock: a tick (the clock's thread) and the executor's callbacks (the
    e-stop, services, goals, transitions, diagnostics) never interleave. Re-entrant: an
    e-stop stops the episode, a hand-back runs a tick."""

    @wraps(method)
    def locked(node: PolicyNode, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with node.lock:
            return method(node, *args, **kwargs)

    return locked


class PolicyNode(Node):  # type: ignore[misc, unused-ignore]  # Jazzy's rclpy has types, Humble's not
    def __init__(self, node_name: str = "sequence_ai", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.lock = threading.RLock()
        self._control_clock = ControlClock(
            self.on_tick, self.lock, self.fail_safe, lead_s=BUILD_AHEAD_S
        )
        self._refused_overrides = rclpy_guards.declare_parameters(self, parameters.PARAMETERS)
        for name, refused in self._refused_overrides.items():
            self.get_logger().error(
                f"parameter '{name}': {refused.problem}; configure refuses until it is set right"
            )
        rclpy_guards.refuse_unregistered_transitions(self, self.get_logger().warning)
        self.episodes = Episodes()
        self._lifecycle = "unconfigured"
        self._configure_problem: str | None = None
        self._clear()
        self.recordings = EpisodeRecordings(lambda t: self.get_logger().warning(self._redact(t)))
        # From construction on, so that an unconfigured or failed node reports too.
        self.health = HealthPublisher(self, "policy", self._report)
        named = {n: self.get_parameter_or(n).value for n in ("hardware_id", "model")}
        self.health.hardware_id = diagnostics.hardware_id(
            str(named["hardware_id"]), str(named["model"])
        )
        # For the node's lifetime: a goal that a cleanup ends still gets its result.
        self.episode_action = EpisodeAction(self, self)

    def _clear(self) -> None:
        self.config: parameters.NodeConfig | None = None
        self.io: NodeIO | None = None
        self._policy: Policy | None = None
        self.engine: PlaybackEngine | None = None
        self._safety: SafetyChecks | None = None
        self._validator: ChunkValidator | None = None
        self._secret: str | None = None
        self._last_outcome: RunOutcome | None = None
        self._last_error: BaseException | None = None

    # ------------------------------------------------------------------ transitions

    def _guarded(self, name: str, body: Callable[[], bool]) -> TransitionCallbackReturn:
        """rclpy turns an exception in a transition into ERROR without a word: log it here.
        The one place the node's view of its lifecycle state changes (``_AFTER``)."""
        try:
            if not body():
                return TransitionCallbackReturn.FAILURE
            self._lifecycle = _AFTER[name]
            return TransitionCallbackReturn.SUCCESS
        except parameters.ParameterError as exc:
            # may quote the catalogue (camera views), which came back to a request with the key
            self._configure_problem = f"{name} failed: {self._redact(exc)}"
            self.get_logger().error(self._configure_problem)
            return TransitionCallbackReturn.FAILURE
        except SequencesError as exc:
            self._configure_problem = f"{name} failed: {type(exc).__name__}: {self._redact(exc)}"
            self.get_logger().error(self._configure_problem)
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:
            trace = self._redact(traceback.format_exc())
            self.get_logger().error(
                f"{name} raised {type(exc).__name__}: {self._redact(exc)}\n{trace}"
            )
            return TransitionCallbackReturn.ERROR

    @_exclusive
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        self._configure_problem = None
        result = self._guarded("configure", self._configure)
        if result != TransitionCallbackReturn.SUCCESS:
            self._teardown()
            self._configure_problem = self._configure_problem or "configure failed (see log)"
            self.health.publish_now()
        return result

    @_exclusive
    def on_activate(self, state: State) -> TransitionCallbackReturn:
        result = super().on_activate(state)  # enables the lifecycle publishers
        if result != TransitionCallbackReturn.SUCCESS:
            return result
        result = self._guarded("activate", lambda: True)  # the clock starts with an episode
        if result == TransitionCallbackReturn.SUCCESS and self.config and self.config.autostart:
            self._autostart()
        return result

    def _autostart(self) -> None:
        """After activate succeeded (start_episode needs the node active)."""
        try:
            problem = self.start_episode()
        except Exception as exc:  # logged with its cause; the node stays active and serves
            problem = f"{type(exc).__name__}: {self._redact(exc)}"
        if problem:
            self.get_logger().warning(f"autostart: no episode started: {problem}")

    @_exclusive
    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        # Hold first: lifecycle publishers drop messages once super().on_deactivate() ran.
        result = self._guarded("deactivate", lambda: self._deactivate("deactivated"))
        super_result = super().on_deactivate(state)
        return result if result != TransitionCallbackReturn.SUCCESS else super_result

    @_exclusive
    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        return self._guarded("cleanup", self._teardown)

    @_exclusive
    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        return self._guarded("shutdown", lambda: self._deactivate("shutdown") and self._teardown())

    @_exclusive
    def on_error(self, state: State) -> TransitionCallbackReturn:
        return self._guarded(
            "error recovery", lambda: self._deactivate("error") and self._teardown()
        )

    def _parameter_values(self) -> dict[str, Any]:
        # rclpy 3.3 keeps parameter overrides (launch, YAML, CLI) in `_parameter_overrides`,
        # the only place an undeclared `api_key:=...` would be visible before it is used.
        override_names = list(getattr(self, "_parameter_overrides", {}) or {})
        for name in parameters.secret_parameter_names(override_names):
            raise parameters.ParameterError(
                name,
                "looks like a credential; the key must come from $SEQUENCES_API_KEY or the "
                "credentials file, never a ROS parameter (parameters are dumped and recorded)",
            )
        values = {
            spec.name: self.get_parameter_or(spec.name).value for spec in parameters.PARAMETERS
        }
        for name, refused in list(self._refused_overrides.items()):
            if values[name] != refused.declared:  # set since (ros2 param set): the override is gone
                del self._refused_overrides[name]
            else:
                raise parameters.ParameterError(name, refused.problem)
        return values

    def _configure(self) -> bool:
        config = parameters.parse(self._parameter_values())
        self.recordings.configure(config.record)  # before any I/O: no rosbags, no configure
        if config.profile is not None:  # an openpi server: never the gateway's key
            self._secret = os.environ.get(OPENPI_KEY_ENV) or None
        else:
            self._secret = resolve_api_key()
            if self._secret is None:
                self.get_logger().warning(
                    "no API key in $SEQUENCES_API_KEY or the credentials file; "
                    "requests go without one"
                )
        self._policy = connect(api_key=self._secret, **parameters.connect_arguments(config))
        model = self._policy.describe()
        parameters.check_against_model(
            config,
            model.action_dim,
            model.camera_views,
            lambda text: self.get_logger().warning(self._redact(text)),
        )
        self._safety = checks_from_config(config, model.action_dim)
        self.config = config
        self.io = NodeIO(self, config, model, controller=self)
        self.io.create()
        if config.chunk_validator:
            self._validator = ChunkValidator(
                self,
                config.chunk_validator,
                timeout_s=config.run.chunk_validator_timeout_s,
                model=model.id,
                names=self.io.dimension_names(model.action_dim),
                arm_names=list(config.joint_names),
                types=MESSAGE_TYPES,
            )
        self.health.hardware_id = config.hardware_id
        self.get_logger().info(
            f"configured {model.id}: {model.action_dim} dims at {model.control_hz:g} Hz, "
            f"output {config.output_type}"
        )
        return True

    def _deactivate(self, why: str) -> bool:
        """Stop the episode (reason ``stopped``; ``why`` is the detail) and the clock."""
        self.stop_episode("stopped", detail=why)
        self._control_clock.stop()
        return True

    @_exclusive
    def release(self, why: str) -> None:
        """Stop (with hold), then close the connection and destroy the interfaces."""
        self._deactivate(why)
        self._teardown()
        self._lifecycle = "unconfigured"

    def _teardown(self) -> bool:
        """Undo configure (diagnostics keep reporting)."""
        self._deactivate("cleanup")
        if self.io is not None:
            self.io.destroy()
        if self._validator is not None:
            self._validator.destroy()
        if self._policy is not None:
            self._policy.close()
        self.recordings.close()  # a bounded wait: the bags still being finished
        self._clear()
        return True

    # ------------------------------------------------------------------ episodes

    @_exclusive
    def start_refusal(self) -> str | None:
        """Why no episode may start now (however asked), or None."""
        if self.config is None or self._policy is None or self.io is None:
            return "node is not configured"
        problem = self.episodes.refusal(active=self._lifecycle == "active")
        if problem is None and self.episode_action.running:
            problem = "a run_episode goal is still being finished"
        return problem or (self._validator.absent() if self._validator else None)

    @_exclusive
    def start_episode(self, *, instruction: str = "", max_actions: int = 0) -> str | None:
        """Begin an episode; None on success, else why not. A non-empty ``instruction``
        replaces the current one; ``max_actions`` 0 is the parameter's."""
        problem = self.start_refusal()
        config, policy, io = self.config, self._policy, self.io
        if problem or config is None or policy is None or io is None:
            return problem or "node is not configured"
        # Built before the episode counts as started: a refusal here leaves nothing running.
        settings = config.run.with_catalogue(policy.describe())
        gate = self._validator.check if self._validator else None
        engine = self.recordings.engine(policy, settings, validate_chunk=gate)
        if instruction:
            io.inputs.instruction = instruction
        control = io.control
        self.episodes.start(
            Episode(
                engine,
                max_actions=max_actions or config.max_actions,
                hold=lambda: control.hold(early=True),
                hold_underrun=control.hold_underrun,  # absolute targets hold by themselves
                hold_release=control.hold_release,
                stall_timeout_s=settings.stall_timeout_s,
                journal=engine.journal,  # the recorder hears of every hold and the outcome
            ),
            time.monotonic(),
        )
        self.engine = engine
        self._last_error = None
        control.begin_episode()
        # the engine's period (the catalogue's rate) from tick 1; the first chunk may change it
        self._control_clock.start(engine.period_s or NO_RATE_POLL_S)
        self.get_logger().info(f"episode {self.episodes.number} started")
        return None

    @_exclusive
    def stop_episode(
        self, reason: StopReason | None, *, detail: str = "", error: BaseException | None = None
    ) -> bool:
        """End the running episode (``raised:<Class>`` of ``error`` when ``reason`` is None):
        the episode's one hold, its outcome. False if none was running."""
        return self._episode_ended(self.episodes.end(reason, error=error, detail=detail))

    def _episode_ended(self, ended: tuple[EpisodeEnd, RunOutcome] | None) -> bool:
        """Publish and log the end the episode decided, and let go of its engine; False if
        there was none to record."""
        if ended is None:
            return False
        self._control_clock.stop()  # no tick until the next episode
        end, outcome = ended
        self._last_outcome = self.recordings.stamped(outcome)  # the bag, on ~/outcome too
        self._publish_outcome(end.number, self._last_outcome, end.detail)
        # A forward controller keeps executing a velocity, so a completed velocity episode
        # ends with zeros too. A completed absolute plan ends on its last target, which holds
        # by itself: a hold at the measured position would be one more command, a step back.
        if not end.early and self.io is not None and not self.io.control.holds_by_itself:
            self.recordings.hold(end.reason)  # the one hold the core Episode does not send
            self.io.control.hold(early=False)
        self.recordings.end()  # the bag is finished off this thread
        if self.engine is not None:
            # Never block the executor on an HTTP exchange still in flight (up to timeout_s);
            # abort it, as run() does: an exchange outliving its episode would hold one of
            # the connections the next episode's refills are counted on (connections_for).
            self.engine.close(wait=False)
            self.engine = None
            if self._policy is not None:
                self._policy.cancel_requests()
        self._last_error = self._last_outcome.error
        text = self._redact(
            f"episode {end.number} ended: {end.reason}{f' ({end.detail})' if end.detail else ''}; "
            f"{self._last_outcome!r}"
        )
        # One call site per severity: rclpy raises if a call site changes its severity.
        if end.early and end.reason != "stopped":
            self.get_logger().error(text)
        else:
            self.get_logger().info(text)
        self.health.publish_now()
        return True

    def _publish_outcome(self, number: int, outcome: RunOutcome, detail: str) -> None:
        """On ~/outcome, and the result of the goal that started it, if one did."""
        msg = outcome_message(
            RunOutcomeMsg,
            outcome,
            episode=number,
            model=self._policy.model if self._policy else "",
            stamp=self.get_clock().now().to_msg(),
            error=error_text(
                outcome.error, detail if outcome.reason in DETAILED else "", self._secret
            ),
            secret=self._secret,
        )
        self.episode_action.ended(msg)

    @_exclusive
    def on_estop(self, engaged: bool) -> None:
        """Latch and stop at once, from the subscription callback, not the next tick.
        Idempotent: one message may arrive on every e-stop subscription (interfaces.py)."""
        was_latched = self.episodes.estop_latched
        if self.episodes.set_estop(engaged):
            self.stop_episode("estop")
        if engaged and not was_latched:
            self.get_logger().warning("e-stop engaged: latched until released")
        self.health.publish_now()

    @_exclusive
    def set_takeover(self, engaged: bool, source: str) -> str:
        """A person takes the arm (from the callback: nothing goes out from now on) or hands
        it back (the hold, then a tick at once: the request goes out now, not a period
        later). Idempotent: one message may arrive on every takeover subscription."""
        if not self.episodes.set_takeover(engaged, time.monotonic()):
            return f"unchanged: {'a person has' if engaged else 'the policy has'} the arm"
        who = "a person has the arm" if engaged else "handed back to the policy"
        self.get_logger().info(f"{who} ({source})")
        if not engaged:
            self.on_tick()
        self.health.publish_now()
        return who

    @_exclusive
    def end_episode(self, label: Label) -> bool:
        """Stop the running episode (one hold) with a person's label (~/end_episode)."""
        ended = self.episodes.end("stopped", detail=f"~/end_episode: {label}", label=label)
        return self._episode_ended(ended)

    @_exclusive
    def on_teleop(self, msg: Any) -> None:
        """The operator's device's command (``teleop_topic``), journaled while taken over."""
        if self.engine is not None and self.episodes.taken_over:
            topic = self.config.teleop_topic if self.config else "teleop"
            self.engine.journal.operator(time.monotonic(), operator_values(msg), topic)

    @_exclusive
    def fail_safe(self, exc: BaseException) -> None:
        """An exception escaped a callback: log it, hold, and keep serving (e-stop, services)."""
        self.get_logger().error(self._redact(f"callback raised: {traceback.format_exc()}"))
        self.stop_episode(None, detail=str(exc), error=exc)

    # ------------------------------------------------------------------ control loop

    @property
    def episode_number(self) -> int:
        return self.episodes.number

    @_exclusive
    def on_tick(self, due: float = 0.0) -> None:
        """One call into the ROS-free control step, for the step ``due`` (the clock's
        deadline; now, if passed); the node only keeps the clock and the episode's lifecycle."""
        engine, io, safety, episode = self.engine, self.io, self._safety, self.episodes.current
        if engine is None or io is None or safety is None or episode is None or episode.ended:
            return
        step = io.control.step(engine, episode, safety, max(due, time.monotonic()))
        if step.trace:
            self.get_logger().error(self._redact(step.trace))
        if step.period_s != self._control_clock.period_s:  # the first chunk told the rate
            self._control_clock.period_s = step.period_s
        if step.ends:  # the episode ended itself at this tick
            self._episode_ended(self.episodes.record())
        else:
            self.episode_action.feedback(engine.phase, engine.snapshot, episode.actions)

    # ------------------------------------------------------------------ diagnostics

    def _redact(self, text: object) -> str:
        return diagnostics.redact(str(text), self._secret)

    @_exclusive
    def _report(self) -> tuple[int, str, list[tuple[str, str]]]:
        health = diagnostics.Health(
            lifecycle=self._lifecycle,
            model=self.config.model if self.config else "",
            episode_running=self.episodes.running,
            episode_number=self.episodes.number,
            actions=self.episodes.actions,
            estop_latched=self.episodes.estop_latched,
            input_problem=self.io.inputs.problem if self.io else None,
            last_end=self.episodes.last_end,
            error=self._last_error,
            snapshot=self.engine.snapshot() if self.engine else None,
            outcome=self._last_outcome,
            seam_warn=self.config.seam_warn if self.config else diagnostics.SEAM_WARN,
            secret=self._secret,
            gateway=self._policy.base_url if self._policy else "",
            requests_sent=self._policy.requests_sent if self._policy else None,
            configure_problem=self._configure_problem if self.config is None else None,
            recording=self.recordings.status(),
            control_source="human" if self.episodes.taken_over else "policy",
        )
        return diagnostics.evaluate(health)


#: How long an exiting node spins on to answer the goal its exit ended.
RESULT_GRACE_S = 0.5
#: How long it spins on once the goal has ended, for the result's answer to go out.
RESULT_SETTLE_S = 0.2


def _give_results(executor: SingleThreadedExecutor, node: PolicyNode) -> None:
    """The episode of a running goal ended with the hold: let its client have the result."""
    if not node.episode_action.running:
        return
    deadline = time.monotonic() + RESULT_GRACE_S
    while node.episode_action.running and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.05)
    # The answer to the result request is a callback of its own, behind whatever else is ready
    # (the health timer, a goal's task): one spin may run another, so spin on a little.
    settle = time.monotonic() + RESULT_SETTLE_S
    while time.monotonic() < settle:
        executor.spin_once(timeout_sec=0.05)


def main(args: list[str] | None = None) -> None:
    # rclpy's own SIGINT/SIGTERM handlers shut the context down before KeyboardInterrupt gets
    # here, so the hold in release() would go out on a dead context and a forward controller
    # would keep the last velocity. Without them, SIGINT raises KeyboardInterrupt and SIGTERM
    # (launch's second stop signal) is made to do the same; the context stays up for the hold.
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    if threading.current_thread() is threading.main_thread():  # signal.signal's requirement
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    node = PolicyNode()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    # What is loaded by now lives as long as the process: out of the garbage collector's full
    # passes, whose scan of it would otherwise pause the control clock (the process is ours;
    # a node composed into another process leaves its collector alone).
    gc.collect()
    gc.freeze()
    try:
        # Nothing wakes a blocked wait on a signal now (rclpy's handler did): poll, so that
        # Python runs the handler even when no timer is due (an unconfigured node).
        while ok():
            try:
                executor.spin_once(timeout_sec=0.1)
            except (KeyboardInterrupt, ExternalShutdownException):
                raise
            except Exception as exc:  # a callback's bug must not take the hold and latch away
                node.fail_safe(exc)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        try:
            node.release("process exit")
            _give_results(executor, node)
        except Exception as exc:  # the context may already be shut down by the signal
            node.get_logger().error(f"hold on exit failed: {exc}")
        node.destroy_node()
        try_shutdown()


if __name__ == "__main__":
    main()
