"""The high-rate sensor subscriptions (cameras, ``joint_states``) on a node of their own:
``joint_states`` taken on a thread by a wait loop of their own, the cameras only when a request
needs a frame (``OnDemand``).

An rclpy executor rebuilds its wait set from every entity of its nodes on each wake and wraps
each callback in a task, which cost more CPU than the control tick itself, at every camera
frame and joint state (docs/performance.md, "Measured on real rclpy"). Here a wake is one
``rcl_wait`` on these subscriptions and a take, and the control executor wakes for its timer,
the e-stop and the services only. The callbacks only store into
``InputStore``, which the control thread reads: each store is one reference assignment.

Taking a camera's frame converts and copies the whole image under the GIL, and a request uses
one frame of each camera about twice a second (docs/performance.md, "Measured on real rclpy").
So a camera's subscription keeps only its newest frame (depth 1) and stays out of the loop; a
request takes it, dated by the middleware's reception stamp, so that its age is the same as if
it had been taken on arrival. That holds on Fast DDS, Humble's and Jazzy's default
(``DATED_ON_ARRIVAL``); on another middleware the cameras are taken on arrival as well.

The loop uses rclpy's wait set binding, as its executors do (the same calls in Humble's rclpy
3.3 and Jazzy's 7.1); subscriptions get no event handlers, which nothing here would wait on.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import rclpy
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.utilities import get_rmw_implementation_identifier

try:  # Jazzy (rclpy 7.1); importing rclpy.qos_event there warns that it is deprecated
    from rclpy.event_handler import SubscriptionEventCallbacks
except ImportError:  # Humble (rclpy 3.3)
    from rclpy.qos_event import SubscriptionEventCallbacks

#: A wait's bound, so that a shut-down context ends the loop without anything waking it.
_WAIT_NS = 500_000_000
#: How long destroy() waits for the thread.
_STOP_TIMEOUT_S = 2.0
#: Middlewares whose reception stamp is when a message arrived (rmw_fastrtps_shared_cpp's take:
#: Fast DDS's reception time, Humble to Jazzy). rmw_cyclonedds_cpp gives 0 (Humble) or the
#: time of the take (Jazzy), by which a frame taken late would pass for a fresh one.
DATED_ON_ARRIVAL = frozenset({"rmw_fastrtps_cpp", "rmw_fastrtps_dynamic_cpp"})


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
        """Every message taken on the loop's thread as it arrives, to ``callback(msg)``."""
        self.adopt(self._create(msg_type, topic, callback, qos))

    def on_demand(
        self, msg_type: Any, topic: str, deliver: Callable[[Any, float | None], None], qos: Any
    ) -> OnDemand:
        """A subscription taken only by ``OnDemand.pull``: ``deliver(msg, arrived)``; on a
        middleware not in ``DATED_ON_ARRIVAL``, taken on the loop as it arrives."""
        subscription = self._create(msg_type, topic, lambda msg: deliver(msg, None), qos)
        frames = OnDemand(self, subscription, deliver)
        if get_rmw_implementation_identifier() not in DATED_ON_ARRIVAL:
            frames.take_on_arrival()
        return frames

    def adopt(self, subscription: Any) -> None:
        """Into the wait loop, from any thread: the loop reads the tuple afresh each wait."""
        self._subscriptions = (*self._subscriptions, subscription)
        self._wake.trigger()

    def _create(self, msg_type: Any, topic: str, callback: Any, qos: Any) -> Any:
        return self.node.create_subscription(
            msg_type,
            self._owner.resolve_topic_name(topic),
            callback,
            qos,
            event_callbacks=SubscriptionEventCallbacks(use_default_callbacks=False),
        )

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


def _arrived(received_ns: int) -> float:
    """A reception stamp (system clock, ns) on the monotonic clock; never in the future."""
    return time.monotonic() - max(0.0, time.time() - received_ns * 1e-9)


class OnDemand:
    """A subscription outside the wait loop. ``pull`` takes what arrived since the last pull
    and hands the newest message to ``deliver`` with its arrival (monotonic). Where the
    reception stamp cannot date a message taken late (a middleware not known to stamp
    arrivals, or a stamp of 0, which then drops that message), the subscription joins the
    loop, whose callback dates each one as it is taken (``deliver(msg, None)``)."""

    def __init__(
        self, sensors: SensorInputs, subscription: Any, deliver: Callable[[Any, float | None], None]
    ) -> None:
        self._sensors = sensors
        self._subscription = subscription
        self._deliver = deliver
        #: Taken on the loop, as every message arrives (no reception stamps).
        self.on_arrival = False

    def pull(self) -> None:
        if self.on_arrival:
            return
        newest = None
        subscription = self._subscription
        with subscription.handle:
            while taken := subscription.handle.take_message(subscription.msg_type, False):
                newest = taken
        if newest is None:
            return
        message, info = newest
        received_ns = info.get("received_timestamp", 0) if isinstance(info, dict) else 0
        if not received_ns:
            self.take_on_arrival()
            return
        self._deliver(message, _arrived(received_ns))

    def take_on_arrival(self) -> None:
        """From now on every message is taken on the loop as it arrives; ``pull`` does nothing."""
        if not self.on_arrival:
            self.on_arrival = True
            self._sensors.adopt(self._subscription)
