"""The high-rate sensor subscriptions (cameras, ``joint_states``) on a node of their own, taken
on a thread by a wait loop of their own.

An rclpy executor rebuilds its wait set from every entity of its nodes on each wake and wraps
each callback in a task, which cost more CPU than the control tick itself, at every camera
frame and joint state (docs/performance.md, "Measured on real rclpy"). Here a wake is one
``rcl_wait`` on these subscriptions and a take, and the control executor wakes for its timer,
the e-stop and the services only. The callbacks only store into
``InputStore``, which the control thread reads: each store is one reference assignment.

The loop uses rclpy's wait set binding, as its executors do (the same calls in Humble's rclpy
3.3 and Jazzy's 7.1); subscriptions get no event handlers, which nothing here would wait on.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

try:  # Jazzy (rclpy 7.1); importing rclpy.qos_event there warns that it is deprecated
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble (rclpy 3.3)
    from rclpy.qos_event import SubscriptionEventCallbacks

#: A wait's bound, so that a shut-down context ends the loop without anything waking it.
_WAIT_NS = 500_000_000
#: How long destroy() waits for the thread.
_STOP_TIMEOUT_S = 2.0


class SensorInputs:
    def __init__(self, owner: Any, log_error: Callable[[str], None]) -> None:
        self._owner = owner
        self._log_error = log_error
        # No global arguments: a launch file's ``__node:=`` remap would give this node the
        # lifecycle node's name. The lifecycle node resolves (and remaps) the topic names.
        self.node = rclpy.create_node(
            f"{owner.get_name()}_inputs",
            context=owner.context,
            namespace=owner.get_namespace(),
            use_global_arguments=False,
            enable_rosout=False,
            start_parameter_services=False,
        )
        self._subscriptions: tuple[Any, ...] = ()
        self._wake = self.node.create_guard_condition(lambda: None)
        self._running = True
        self._thread = threading.Thread(target=self._spin, name="sensor inputs", daemon=True)
        self._thread.start()

    def subscribe(self, msg_type: Any, topic: str, callback: Any, qos: Any) -> None:
        subscription = self.node.create_subscription(
            msg_type,
            self._owner.resolve_topic_name(topic),
            callback,
            qos,
            event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False),
        )
        self._subscriptions = (*self._subscriptions, subscription)  # the loop reads a tuple
        self._wake.trigger()

    def _spin(self) -> None:
        context = self.node.context
        while self._running and context.ok():
            try:
                self._wait_and_take(context)
            except Exception as exc:  # a callback's bug: the inputs go stale, which stops motion
                if self._running and context.ok():
                    self._log_error(f"sensor input callback raised: {exc!r}")

    def _wait_and_take(self, context: Any) -> None:
        subscriptions = self._subscriptions
        with contextlib.ExitStack() as handles:  # none is destroyed while it is waited on
            for entity in (*subscriptions, self._wake):
                handles.enter_context(entity.handle)
            handles.enter_context(context.handle)
            wait_set = _rclpy.WaitSet(len(subscriptions), 1, 0, 0, 0, 0, context.handle)
            wait_set.clear_entities()
            for subscription in subscriptions:
                wait_set.add_subscription(subscription.handle)
            wait_set.add_guard_condition(self._wake.handle)
            wait_set.wait(_WAIT_NS)
            ready = wait_set.get_ready_entities("subscription")
            for subscription in subscriptions:
                if subscription.handle.pointer in ready:
                    taken = subscription.handle.take_message(subscription.msg_type, False)
                    if taken is not None:
                        subscription.callback(taken[0])

    def destroy(self) -> None:
        self._running = False
        self._wake.trigger()
        self._thread.join(timeout=_STOP_TIMEOUT_S)
        self.node.destroy_node()
