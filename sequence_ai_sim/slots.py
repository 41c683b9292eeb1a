"""Model slots, served first come, first served.

A gateway queues the requests beyond its model slots and serves them in arrival order. A
semaphore does not: a freed slot goes to whichever thread asks next, and a waiter that
wakes to check for shutdown joins the back again. With 8 robots on 2 slots a request
waited 13 s while later ones were served in 1 s, so an older request of one robot was
answered after its newer one and thrown away: waste that a real queue does not cause
(``test/sim/test_sim_slots.py``).
"""

from __future__ import annotations

import threading
from collections import deque


class FifoSlots:
    """``workers`` slots; ``take`` waits in arrival order, ``give_back`` hands the slot on."""

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self._lock = threading.Lock()
        self._free = workers
        self._waiting: deque[threading.Event] = deque()
        #: The most requests that waited at once.
        self.max_waiting = 0

    def take(self, stopping: threading.Event, poll_s: float) -> bool:
        """Wait for a slot; False if ``stopping`` was set first (no slot is held then)."""
        with self._lock:
            if self._free > 0 and not self._waiting:
                self._free -= 1
                return True
            turn = threading.Event()
            self._waiting.append(turn)
            self.max_waiting = max(self.max_waiting, len(self._waiting))
        while not turn.wait(poll_s):
            if stopping.is_set():
                with self._lock:
                    if not turn.is_set():  # still queued: leave the queue
                        self._waiting.remove(turn)
                        return False
                self.give_back()  # handed a slot just as it stopped: pass it on
                return False
        return True

    def give_back(self) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().set()  # the slot passes straight to the oldest waiter
            else:
                self._free += 1

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        with self._lock:
            return len(self._waiting)
