"""Episode bookkeeping: one bounded episode at a time, an e-stop latch, one hold per stop.

Plain state with no ROS and no I/O, so the rules are testable on their own:
- an episode starts only when the node is active, none is running and the e-stop is released;
- the e-stop latches: while it is latched nothing starts, and releasing it does not resume;
- every episode ends exactly once, and only that first end asks for a hold.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EpisodeEnd:
    number: int
    # completed | validate | estop | stale_input | stopped | deactivated | raised:<Class>
    reason: str
    actions: int
    early: bool
    detail: str = ""


class Episodes:
    def __init__(self) -> None:
        self.number = 0
        self.running = False
        self.actions = 0
        self.max_actions = 0
        self.estop_latched = False
        self.last_end: EpisodeEnd | None = None

    def start(self, *, active: bool, max_actions: int) -> str | None:
        """Begin an episode; None on success, else why it cannot start."""
        if not active:
            return "node is not active"
        if self.estop_latched:
            return "e-stop is latched; release it first"
        if self.running:
            return f"episode {self.number} is already running"
        self.number += 1
        self.running = True
        self.actions = 0
        self.max_actions = max_actions
        return None

    def count_action(self) -> bool:
        """Record one published action; True when the episode has reached max_actions."""
        self.actions += 1
        return self.actions >= self.max_actions

    def set_estop(self, engaged: bool) -> bool:
        """Apply an e-stop message; True if a running episode must stop now."""
        if not engaged:
            self.estop_latched = False
            return False
        self.estop_latched = True
        return self.running

    def end(self, reason: str, detail: str = "") -> EpisodeEnd | None:
        """Finish the running episode; None if none was running (no second hold)."""
        if not self.running:
            return None
        self.running = False
        early = reason != "completed"
        self.last_end = EpisodeEnd(self.number, reason, self.actions, early, detail)
        return self.last_end
