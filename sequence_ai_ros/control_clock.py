"""The control tick on a thread of its own, paced to deadlines on the steady clock.

An rclpy timer runs its callback only after the executor woke, rebuilt its wait set from
every entity of the lifecycle node (services, the action server, the e-stop twins, event
handlers) and scanned it, on every tick: that wake made the node's command stream less
regular than a bare node's and cost most of its CPU beyond the bare node's at 50 Hz
(docs/performance.md, "Measured on real rclpy"). Here a tick is a sleep to its deadline and
one call; the executor serves everything else. A tick runs under the node's lock, which its
callbacks take too, so an e-stop or a service call lands wholly before or after a tick.

The grid is ``sequence_ai_core``'s ``Pacer``, as ``run()``'s: a late tick does not shift the
ones after it, and ticks missed by more than a period are dropped. The steady clock, not ROS
time: the engine indexes its plan by ``time.monotonic()``. A tick may start ``lead_s`` before
its deadline, which it is given: the node builds its command by then and publishes it at the
deadline, so the command leaves on the grid however long building it took.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager

from sequence_ai_core.node_api import Pacer


class ControlClock:
    """``start(period)`` runs ``tick(due)`` every period from one period on, on a new thread,
    ``lead_s`` before ``due`` (its deadline, past when it is late; its start when it polls);
    ``stop`` ends it. ``period_s`` may change from inside a tick: the next deadline is one new
    period after that tick's start. An exception out of ``tick`` goes to ``on_error`` (which
    stops the episode) and the clock keeps its pace, even if ``on_error`` raises too: a dead
    clock would leave an episode running with nothing to hold it."""

    def __init__(
        self,
        tick: Callable[[float], None],
        lock: AbstractContextManager[object],
        on_error: Callable[[Exception], None],
        lead_s: float = 0.0,
    ) -> None:
        self._tick = tick
        self._lead_s = lead_s
        self._lock = lock
        self._on_error = on_error
        self._stop: threading.Event | None = None
        self.period_s = 0.0  # 0 while stopped

    @property
    def running(self) -> bool:
        return self._stop is not None

    def start(self, period_s: float) -> None:
        """Start ticking (a running clock is stopped first: one thread ticks at a time)."""
        self.stop()
        self.period_s = period_s
        self._stop = stop = threading.Event()
        threading.Thread(target=self._run, args=(stop,), name="control tick", daemon=True).start()

    def stop(self) -> None:
        """No tick starts after this returns. Called under the lock (from a callback or a
        tick), it does not wait for the thread, which may be waiting for that lock: the
        thread sees its own stop once it has the lock, and ends."""
        if self._stop is not None:
            self._stop.set()
            self._stop = None
        self.period_s = 0.0

    def _report(self, exc: Exception) -> None:
        try:
            self._on_error(exc)
        except Exception:  # the node's log itself failed: stderr, and the next tick still runs
            traceback.print_exc()

    def _run(self, stop: threading.Event) -> None:
        pacer = Pacer(time.monotonic, stop.wait, self._lead_s)  # a stop cuts the sleep short
        pacer.wait(time.monotonic(), self.period_s)
        while not stop.is_set():
            started = time.monotonic()
            due = pacer.deadline or started
            with self._lock:
                if stop.is_set():
                    return
                try:
                    self._tick(due)
                except Exception as exc:
                    self._report(exc)
                period = self.period_s
            pacer.wait(started, period or None)
