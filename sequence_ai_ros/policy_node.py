"""The lifecycle node: the same PlaybackEngine as ``Policy.run()``, driven by a ROS timer.

configure opens the connection and creates every interface; activate enables the publishers
and starts the timer; deactivate, cleanup and shutdown stop the episode and hold. Each timer
tick asks the engine for the step due now, checks it, and publishes it or holds.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.lifecycle import Node, State, TransitionCallbackReturn
from rclpy.signals import SignalHandlerOptions

from sequence_ai_core.credentials import resolve_api_key
from sequence_ai_core.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.errors import SequencesError
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import ABSOLUTE_SPACES

from . import diagnostics, params, rclpy_guards
from .episode import Episodes
from .health_publisher import HealthPublisher
from .node_io import NodeIO, default_period
from .safety import SafetyChecks, load_validator

#: Where the node reads an openpi server's key (sent as ``Authorization: Api-Key``); the
#: gateway's key is never sent to an openpi server.
OPENPI_KEY_ENV = "OPENPI_API_KEY"


class PolicyNode(Node):  # type: ignore[misc]  # rclpy ships no type stubs
    def __init__(self, node_name: str = "sequence_ai", **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self._wrong_types = rclpy_guards.declare_parameters(self, params.PARAMETERS)
        for name, wrong in self._wrong_types.items():
            self.get_logger().error(
                f"parameter '{name}': {wrong.problem}; configure refuses until it is set right"
            )
        rclpy_guards.refuse_unregistered_transitions(self, self.get_logger().warning)
        self.episodes = Episodes()
        self._lifecycle = "unconfigured"
        self._configure_problem: str | None = None
        self._clear()
        # From construction on, so that an unconfigured or failed node reports too.
        self.health = HealthPublisher(self, "policy", self._report)
        named = {n: self.get_parameter_or(n).value for n in ("hardware_id", "model")}
        self.health.hardware_id = str(named["hardware_id"] or f"sequence-ai:{named['model']}")

    def _clear(self) -> None:
        self.config: params.NodeConfig | None = None
        self.io: NodeIO | None = None
        self._policy: Policy | None = None
        self.engine: PlaybackEngine | None = None
        self._safety: SafetyChecks | None = None
        self._secret: str | None = None
        self._timer: Any = None
        self._timer_period = 0.0
        self._default_period = 0.0
        self._last_outcome: Any = None
        self._last_error: BaseException | None = None

    # ------------------------------------------------------------------ transitions

    def _guarded(self, name: str, body: Callable[[], bool]) -> TransitionCallbackReturn:
        """rclpy turns an exception in a transition into ERROR without a word: log it here."""
        try:
            return TransitionCallbackReturn.SUCCESS if body() else TransitionCallbackReturn.FAILURE
        except params.ParameterError as exc:
            self._configure_problem = f"{name} failed: {exc}"
            self.get_logger().error(self._configure_problem)
            return TransitionCallbackReturn.FAILURE
        except SequencesError as exc:
            self._configure_problem = f"{name} failed: {type(exc).__name__}: {self._redact(exc)}"
            self.get_logger().error(self._configure_problem)
            return TransitionCallbackReturn.FAILURE
        except Exception as exc:
            trace = self._redact(traceback.format_exc())
            self.get_logger().error(f"{name} raised {type(exc).__name__}: {exc}\n{trace}")
            return TransitionCallbackReturn.ERROR

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        self._configure_problem = None
        result = self._guarded("configure", self._configure)
        if result != TransitionCallbackReturn.SUCCESS:
            self._teardown()
            self._configure_problem = self._configure_problem or "configure failed (see log)"
            self.health.publish_now()
        return result

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        result = super().on_activate(state)  # enables the lifecycle publishers
        if result != TransitionCallbackReturn.SUCCESS:
            return result
        return self._guarded("activate", self._activate)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        # Hold first: lifecycle publishers drop messages once super().on_deactivate() ran.
        result = self._guarded("deactivate", lambda: self._deactivate("deactivated"))
        super_result = super().on_deactivate(state)
        self._lifecycle = "inactive"
        return result if result != TransitionCallbackReturn.SUCCESS else super_result

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        return self._guarded("cleanup", self._teardown)

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        return self._guarded("shutdown", lambda: self._deactivate("shutdown") and self._teardown())

    def on_error(self, state: State) -> TransitionCallbackReturn:
        return self._guarded(
            "error recovery", lambda: self._deactivate("error") and self._teardown()
        )

    def _parameter_values(self) -> dict[str, Any]:
        # rclpy 3.3 keeps parameter overrides (launch, YAML, CLI) in `_parameter_overrides`,
        # the only place an undeclared `api_key:=...` would be visible before it is used.
        override_names = list(getattr(self, "_parameter_overrides", {}) or {})
        for name in params.secret_parameter_names(override_names):
            raise params.ParameterError(
                name,
                "looks like a credential; the key must come from $SEQUENCES_API_KEY or the "
                "credentials file, never a ROS parameter (parameters are dumped and recorded)",
            )
        values = {spec.name: self.get_parameter_or(spec.name).value for spec in params.PARAMETERS}
        for name, wrong in list(self._wrong_types.items()):
            if values[name] != wrong.declared:  # set since (ros2 param set): the override is gone
                del self._wrong_types[name]
            else:
                raise params.ParameterError(name, wrong.problem)
        return values

    def _configure(self) -> bool:
        config = params.parse(self._parameter_values())
        if config.profile is not None:  # an openpi server: never the gateway's key
            self._secret = os.environ.get(OPENPI_KEY_ENV) or None
        else:
            self._secret = resolve_api_key()
            if self._secret is None:
                self.get_logger().warning(
                    "no API key in $SEQUENCES_API_KEY or the credentials file; "
                    "requests go without one"
                )
        self._policy = connect(
            config.model if config.profile is None else str(config.base_url),
            api_key=self._secret,
            base_url=config.base_url if config.profile is None else None,
            profile=config.profile,
            control_hz=config.control_hz,
            allow_insecure_http=config.allow_insecure_http,
            max_connections=config.max_in_flight + 2,
        )
        model = self._policy.describe()
        params.check_against_model(
            config, model.action_dim, model.camera_views, self.get_logger().warning
        )
        self._safety = self._safety_checks(config, model.action_dim)
        self._default_period = default_period(config, model)  # catalogue may lack control_hz
        self.config = config
        self.io = NodeIO(self, config, model)
        self.io.create()
        self.health.hardware_id = config.hardware_id
        self._lifecycle = "inactive"
        self.get_logger().info(
            f"configured {model.id}: {model.action_dim} dims at {model.control_hz:g} Hz, "
            f"output {config.output_type}"
        )
        return True

    def _safety_checks(self, config: params.NodeConfig, action_dim: int) -> SafetyChecks:
        validator = None
        if config.validator:
            try:
                validator = load_validator(config.validator)
            except ValueError as exc:
                raise params.ParameterError("validator", str(exc)) from exc
        return SafetyChecks(
            action_dim,
            lower=config.lower_limits,
            upper=config.upper_limits,
            max_step=config.max_step,
            validator=validator,
            validator_name=config.validator,
        )

    def _activate(self) -> bool:
        assert self.config is not None
        self._lifecycle = "active"
        self._set_timer(self._default_period)
        if self.config.autostart:
            problem = self.start_episode()
            if problem:
                self.get_logger().warning(f"autostart: no episode started: {problem}")
        return True

    def _deactivate(self, why: str) -> bool:
        self.stop_episode("stopped", detail=why)
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        if self._lifecycle == "active":
            self._lifecycle = "inactive"
        return True

    def release(self, why: str) -> None:
        """Stop (with hold), then close the connection and destroy the interfaces."""
        self._deactivate(why)
        self._teardown()

    def _teardown(self) -> bool:
        """Undo configure (diagnostics keep reporting)."""
        self._deactivate("cleanup")
        if self.io is not None:
            self.io.destroy()
        if self._policy is not None:
            self._policy.close()
        self._clear()
        self._lifecycle = "unconfigured"
        return True

    # ------------------------------------------------------------------ episodes

    def start_episode(self) -> str | None:
        """Begin an episode; None on success, else why not."""
        if self.config is None or self._policy is None:
            return "node is not configured"
        # Built before episodes.start(): a ValueError here must not leave an episode "running"
        # without an engine. A catalogue entry without horizon/rate covers 0 s: unknown.
        covers = self._policy.describe().covers_seconds
        engine_config = EngineConfig(
            prefetch=self.config.prefetch,
            max_in_flight=self.config.max_in_flight,
            freshness=self.config.freshness,
            smooth_seam=self.config.smooth_seam,
            startup_timeout_s=self.config.startup_timeout_s,
            control_hz=self.config.control_hz,
            # Known chunk length lets the first requests stagger (0.50/0.64 s models).
            expected_covers_s=covers if covers > 0 else None,
        )
        problem = self.episodes.start(
            active=self._lifecycle == "active", max_actions=self.config.max_actions
        )
        if problem:
            return problem
        self.engine = PlaybackEngine(self._policy, engine_config, clock=time.monotonic)
        self._last_error = None
        assert self.io is not None
        self.io.begin_episode()
        self.get_logger().info(f"episode {self.episodes.number} started")
        return None

    def stop_episode(
        self, reason: str, *, detail: str = "", error: BaseException | None = None
    ) -> bool:
        """End the running episode: hold (exactly once), record the outcome. False if idle."""
        end = self.episodes.end(reason, detail)
        if end is None:
            return False
        assert self.io is not None
        # A completed absolute plan ends on its last target, which holds by itself: a hold at
        # the measured position would be one more command, a small step back.
        if end.early or self.io.action_space not in ABSOLUTE_SPACES:
            self.io.hold(early=end.early)
        if self.engine is not None:
            self._last_outcome = self.engine.outcome(reason=reason, stopped_early=end.early)
            # Never block the executor on an HTTP exchange still in flight (up to timeout_s).
            self.engine.close(wait=False)
            self.engine = None
        self._last_error = error
        text = self._redact(
            f"episode {end.number} ended: {reason}{f' ({detail})' if detail else ''}; "
            f"{self._last_outcome!r}"
        )
        # One call site per severity: rclpy raises if a call site changes its severity.
        if end.early and reason != "stopped":
            self.get_logger().error(text)
        else:
            self.get_logger().info(text)
        self.health.publish_now()
        return True

    def on_estop(self, engaged: bool) -> None:
        """Latch and stop at once, from the subscription callback, not the next tick.
        Idempotent: one message may arrive on both e-stop subscriptions (see NodeIO)."""
        was_latched = self.episodes.estop_latched
        if self.episodes.set_estop(engaged):
            self.stop_episode("estop")
        if engaged and not was_latched:
            self.get_logger().warning("e-stop engaged: latched until released")
        self.health.publish_now()

    def fail_safe(self, exc: BaseException) -> None:
        """An exception escaped a callback: log it, hold, and keep serving (e-stop, services)."""
        self.get_logger().error(self._redact(f"callback raised: {traceback.format_exc()}"))
        self.stop_episode(f"raised:{type(exc).__name__}", detail=str(exc), error=exc)

    # ------------------------------------------------------------------ control loop

    def _set_timer(self, period: float) -> None:
        if self._timer is not None:
            self.destroy_timer(self._timer)
        self._timer = self.create_timer(period, self.on_tick)
        self._timer_period = period

    @property
    def timer_period(self) -> float:
        return self._timer_period if self._timer is not None else 0.0

    def on_tick(self) -> None:
        engine, io, safety = self.engine, self.io, self._safety
        if engine is None or io is None or safety is None or not self.episodes.running:
            return
        # One rule for every output type: an arm state older than max_observation_age_s ends
        # motion and the episode at this tick, i.e. within that age plus one control period of
        # the last reading. A plan must not play on (or a target be built) on a frozen reading.
        assert self.config is not None
        stale = io.inputs.arm_stale(self.config.max_observation_age_s)
        if stale is not None:
            self.stop_episode("stale_input", detail=stale)
            return
        try:
            tick = engine.tick(time.monotonic(), io.inputs.observe)
        except SequencesError as exc:
            self.stop_episode(f"raised:{type(exc).__name__}", detail=str(exc), error=exc)
            return
        except Exception as exc:  # an untyped failure must still hold, not kill the executor
            self.get_logger().error(self._redact(traceback.format_exc()))
            self.stop_episode(f"raised:{type(exc).__name__}", detail=str(exc), error=exc)
            return
        period = engine.period_s or self._default_period
        if abs(period - self._timer_period) > 1e-9:
            self._set_timer(period)  # the chunk's rate differs from the catalogue's
        if tick.new_chunk:
            io.publish_chunk(engine)
        if tick.kind == "action" and tick.action is not None:
            remaining = self.episodes.max_actions - self.episodes.actions
            problem = io.play(
                tick.action, engine.action_space or "", safety, period, tick, remaining
            )
            if problem:
                self.stop_episode("validate", detail=problem)
            elif self.episodes.count_action():
                self.stop_episode("completed")
        elif tick.kind == "underrun":
            io.hold_underrun()

    # ------------------------------------------------------------------ diagnostics

    def _redact(self, text: object) -> str:
        return diagnostics.redact(str(text), self._secret)

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
            seam_warn=self.config.seam_warn if self.config else 0.2,
            secret=self._secret,
            gateway=self._policy.base_url if self._policy else "",
            requests_sent=self._policy.requests_sent if self._policy else None,
            configure_problem=self._configure_problem if self.config is None else None,
        )
        return diagnostics.evaluate(health)


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
    try:
        # Nothing wakes a blocked wait on a signal now (rclpy's handler did): poll, so that
        # Python runs the handler even when no timer is due (an unconfigured node).
        while rclpy.ok():
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
        except Exception as exc:  # the context may already be shut down by the signal
            node.get_logger().error(f"hold on exit failed: {exc}")
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
