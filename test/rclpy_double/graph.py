"""An in-process ROS graph: topics deliver synchronously, services answer synchronously, and
timers fire from ``spin_for`` on the real monotonic clock, skipping missed periods like rcl."""

from __future__ import annotations

import copy
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any


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

    def deliver(self, topic: str, msg: Any) -> None:
        self.published.append((topic, msg))
        for subscription in list(self.subscriptions.get(topic, ())):
            if not subscription.destroyed:
                subscription.callback(copy.deepcopy(msg))

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
