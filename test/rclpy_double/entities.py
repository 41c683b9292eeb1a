"""The entities rclpy 3.3.15 nodes create (publishers, subscriptions, timers, services,
clients, futures), QoS types, logger and clock, as far as the project's nodes use them."""

from __future__ import annotations

import time
from enum import Enum
from typing import Any

from .graph import Graph


class QoSProfile:
    _SLOTS = (
        "history", "depth", "reliability", "durability", "lifespan", "deadline", "liveliness",
        "liveliness_lease_duration", "avoid_ros_namespace_conventions",
    )  # fmt: skip

    def __init__(self, **kwargs: Any) -> None:
        assert all(k in self._SLOTS for k in kwargs), f"Invalid arguments passed: {kwargs}"
        if "history" not in kwargs and "depth" not in kwargs:
            raise ValueError("History and/or depth settings are required.")
        self.depth = kwargs.get("depth", 10)
        self.reliability = kwargs.get("reliability", ReliabilityPolicy.RELIABLE)
        self.durability = kwargs.get("durability", DurabilityPolicy.VOLATILE)
        self.history = kwargs.get("history", HistoryPolicy.KEEP_LAST)


class HistoryPolicy(Enum):
    SYSTEM_DEFAULT = 0
    KEEP_LAST = 1
    KEEP_ALL = 2


class ReliabilityPolicy(Enum):
    SYSTEM_DEFAULT = 0
    RELIABLE = 1
    BEST_EFFORT = 2


class DurabilityPolicy(Enum):
    SYSTEM_DEFAULT = 0
    TRANSIENT_LOCAL = 1
    VOLATILE = 2


qos_profile_sensor_data = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
qos_profile_services_default = QoSProfile(depth=10)


class Future:
    def __init__(self) -> None:
        self._done = False
        self._result: Any = None
        self._callbacks: list[Any] = []

    def done(self) -> bool:
        return self._done

    def result(self) -> Any:
        return self._result

    def exception(self) -> BaseException | None:
        return None

    def set_result(self, result: Any) -> None:
        self._result, self._done = result, True
        for callback in self._callbacks:
            callback(self)

    def add_done_callback(self, callback: Any) -> None:
        if self._done:
            callback(self)
        else:
            self._callbacks.append(callback)


class RCLError(RuntimeError):
    """rclpy._rclpy_pybind11.RCLError: what an entity of a shut-down context raises."""


class _Entity:
    destroyed = False


class Publisher(_Entity):
    def __init__(self, node: Any, msg_type: Any, topic: str, qos: Any) -> None:
        self.node, self.msg_type, self.topic_name, self.qos = node, msg_type, topic, qos

    def publish(self, msg: Any) -> None:
        if not isinstance(msg, self.msg_type):
            raise TypeError(f"Expected {self.msg_type.__name__}, got {type(msg).__name__}")
        assert not self.destroyed, "publish on a destroyed publisher"
        if self.node.graph.shutdown:
            raise RCLError("Failed to publish: publisher's context is invalid")
        self.node.graph.deliver(self.topic_name, msg, self.qos, self)


class LifecyclePublisher(Publisher):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._enabled = False

    def on_activate(self, state: Any) -> Any:
        self._enabled = True
        return TransitionCallbackReturn.SUCCESS

    def on_deactivate(self, state: Any) -> Any:
        self._enabled = False
        return TransitionCallbackReturn.SUCCESS

    @property
    def is_activated(self) -> bool:
        return self._enabled

    def publish(self, msg: Any) -> None:
        if self._enabled:
            super().publish(msg)


class Subscription(_Entity):
    def __init__(self, msg_type: Any, topic: str, callback: Any, qos: Any) -> None:
        self.msg_type, self.topic_name, self.callback, self.qos = msg_type, topic, callback, qos


class Timer(_Entity):
    def __init__(self, period_s: float, callback: Any) -> None:
        self.timer_period_ns = int(float(period_s) * 1e9)
        self.callback = callback
        self.canceled = False
        self.calls = 0
        self.next_due = time.monotonic() + period_s

    def fire(self, now: float) -> None:
        period = self.timer_period_ns / 1e9
        missed = int((now - self.next_due) // period)
        self.next_due += period * (missed + 1)
        self.calls += 1
        self.callback()

    def cancel(self) -> None:
        self.canceled = True

    def reset(self) -> None:
        self.canceled = False
        self.next_due = time.monotonic() + self.timer_period_ns / 1e9

    def is_canceled(self) -> bool:
        return self.canceled


class Service(_Entity):
    def __init__(self, srv_type: Any, name: str, callback: Any) -> None:
        self.srv_type, self.srv_name, self.callback = srv_type, name, callback


class Client(_Entity):
    def __init__(self, graph: Graph, srv_type: Any, name: str) -> None:
        self.graph, self.srv_type, self.srv_name = graph, srv_type, name
        self.requests: list[Any] = []

    def service_is_ready(self) -> bool:
        service = self.graph.services.get(self.srv_name)
        return service is not None and not service.destroyed

    def wait_for_service(self, timeout_sec: float | None = None) -> bool:
        return self.service_is_ready()

    def call_async(self, request: Any) -> Future:
        assert isinstance(request, self.srv_type.Request)
        self.requests.append(request)
        future = Future()
        if self.service_is_ready():
            service = self.graph.services[self.srv_name]
            future.set_result(service.callback(request, self.srv_type.Response()))
        return future


class Logger:
    def __init__(self, records: list[tuple[str, str]]) -> None:
        self.records = records

    def _log(self, severity: str, message: str) -> None:
        self.records.append((severity, str(message)))

    def debug(self, message: str, **kwargs: Any) -> None:
        self._log("DEBUG", message)

    def info(self, message: str, **kwargs: Any) -> None:
        self._log("INFO", message)

    def warning(self, message: str, **kwargs: Any) -> None:
        self._log("WARN", message)

    warn = warning

    def error(self, message: str, **kwargs: Any) -> None:
        self._log("ERROR", message)

    def fatal(self, message: str, **kwargs: Any) -> None:
        self._log("FATAL", message)


class Time:
    def __init__(self, *, seconds: float = 0, nanoseconds: int = 0) -> None:
        self.nanoseconds = int(seconds * 1e9) + int(nanoseconds)

    def to_msg(self) -> Any:
        from . import MSGS

        sec, nanosec = divmod(self.nanoseconds, 1_000_000_000)
        return MSGS["Time"](sec=sec, nanosec=nanosec)


class Clock:
    def now(self) -> Time:
        return Time(nanoseconds=time.time_ns())


class TransitionCallbackReturn(Enum):
    SUCCESS = 0
    FAILURE = 1
    ERROR = 2


class SubscriptionEventCallbacks:
    """rclpy.qos_event.SubscriptionEventCallbacks (3.3.15): keyword-only callbacks."""

    def __init__(
        self,
        *,
        deadline: Any = None,
        incompatible_qos: Any = None,
        liveliness: Any = None,
        message_lost: Any = None,
        use_default_callbacks: bool = True,
    ) -> None:
        self.incompatible_qos = incompatible_qos
