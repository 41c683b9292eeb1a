"""An in-process ROS graph: topics deliver synchronously, services answer synchronously, and
timers fire from ``spin_for`` on the real monotonic clock, skipping missed periods like rcl.

QoS as DDS matches it (request/offer): a subscription receives from a publisher only if the
offered reliability and durability are at least those requested (RELIABLE > BEST_EFFORT,
TRANSIENT_LOCAL > VOLATILE); a transient-local publisher keeps its last ``depth`` messages
for transient-local subscriptions that join later.
"""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

_RANK = {"BEST_EFFORT": 0, "VOLATILE": 0, "RELIABLE": 1, "TRANSIENT_LOCAL": 1}
_DEFAULTS = {"reliability": "RELIABLE", "durability": "VOLATILE"}  # rmw qos_profile_default


def _policy(qos: Any, kind: str) -> str:
    """A profile's policy name; an int QoS is a depth with the default profile."""
    value = getattr(qos, kind, None)
    name = getattr(value, "name", "SYSTEM_DEFAULT")
    return _DEFAULTS[kind] if name == "SYSTEM_DEFAULT" else str(name)


def compatible(offered: Any, requested: Any) -> bool:
    return all(
        _RANK[_policy(offered, kind)] >= _RANK[_policy(requested, kind)]
        for kind in ("reliability", "durability")
    )


def _depth(qos: Any) -> int:
    return qos if isinstance(qos, int) else int(getattr(qos, "depth", 10))


def resolve(name: str, node_name: str, namespace: str) -> str:
    """Topic/service name expansion as rcl does it for the cases the nodes use."""
    ns = namespace.rstrip("/")
    if name.startswith("~/"):
        return f"{ns}/{node_name}/{name[2:]}"
    if name.startswith("/"):
        return name
    return f"{ns}/{name}"


class Graph:
    def __init__(self) -> None:
        self.subscriptions: dict[str, list[Any]] = defaultdict(list)
        self.services: dict[str, Any] = {}
        self.nodes: list[Any] = []
        #: (topic, message) for every message that left a publisher, in order.
        self.published: list[tuple[str, Any]] = []
        self.shutdown = False
        self.signal_handler_options: Any = None  # as rclpy.init() last got them
        self.saved_signal_handlers: dict[int, Any] = {}
        # publisher -> (its QoS, its last messages) for transient-local publishers
        self._history: dict[int, tuple[str, Any, list[Any]]] = {}

    def deliver(self, topic: str, msg: Any, qos: Any = 10, source: Any = None) -> None:
        self.published.append((topic, msg))
        if source is not None and _policy(qos, "durability") == "TRANSIENT_LOCAL":
            kept = self._history.setdefault(id(source), (topic, qos, []))[2]
            kept.append(copy.deepcopy(msg))
            del kept[: -_depth(qos)]
        for subscription in list(self.subscriptions.get(topic, ())):
            if not subscription.destroyed and compatible(qos, subscription.qos):
                subscription.callback(copy.deepcopy(msg))

    def subscribe(self, subscription: Any) -> None:
        """Add a subscription; a transient-local one gets the history of matching publishers
        (synchronously here; rclpy would hand it over on the next spin)."""
        self.subscriptions[subscription.topic_name].append(subscription)
        if _policy(subscription.qos, "durability") != "TRANSIENT_LOCAL":
            return
        for topic, qos, kept in list(self._history.values()):
            if topic == subscription.topic_name and compatible(qos, subscription.qos):
                for msg in kept[-_depth(subscription.qos) :]:
                    subscription.callback(copy.deepcopy(msg))

    def forget(self, publisher: Any) -> None:
        self._history.pop(id(publisher), None)

    def messages(self, topic: str) -> list[Any]:
        return [msg for name, msg in self.published if name == topic]

    def timers(self) -> list[Any]:
        return [t for node in self.nodes for t in node.timers if not t.destroyed]

    def spin_for(self, seconds: float, until: Callable[[], bool] | None = None) -> bool:
        """Fire due timers until ``seconds`` pass or ``until()`` holds; returns until()'s value."""
        deadline = time.monotonic() + seconds
        while True:
            if until is not None and until():
                return True
            now = time.monotonic()
            if now >= deadline:
                return until() if until is not None else False
            due = [t for t in self.timers() if not t.canceled and t.next_due <= now]
            for timer in sorted(due, key=lambda t: t.next_due):
                if not timer.destroyed and not timer.canceled:
                    timer.fire(now)
            upcoming = [t.next_due for t in self.timers() if not t.canceled]
            wake = min([deadline, *upcoming])
            time.sleep(min(0.01, max(0.0, wake - time.monotonic())))
