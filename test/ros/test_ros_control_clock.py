"""The node's control clock (control_clock.py) on real threads: it ticks under the node's
lock, a stop is final even while the thread waits for that lock, an error goes to the node
and the pace goes on, and one thread ticks at a time."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from sequence_ai_ros.control_clock import ControlClock

PERIOD_S = 0.005


def _wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _clock_threads() -> int:
    return sum(t.name == "control tick" and t.is_alive() for t in threading.enumerate())


class Counted:
    """A re-entrant lock that knows how deep it is held (the node's is a plain RLock)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.depth = 0

    def __enter__(self) -> None:
        self._lock.acquire()
        self.depth += 1

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        self._lock.release()


class Ticks:
    def __init__(self, lead_s: float = 0.0) -> None:
        self.lock = Counted()
        self.count = 0
        self.errors: list[Exception] = []
        self.during: list[bool] = []  # whether each tick held the lock
        self.dues: list[float] = []
        self.entered: list[float] = []  # monotonic, at each tick's start
        self.then: Callable[[int], None] = lambda count: None
        self.clock = ControlClock(self.tick, self.lock, self.errors.append, lead_s)

    def tick(self, due: float) -> None:
        self.entered.append(time.monotonic())
        self.dues.append(due)
        self.during.append(self.lock.depth > 0)
        self.count += 1
        self.then(self.count)


@pytest.fixture
def ticks() -> Iterator[Ticks]:
    made = Ticks()
    yield made
    made.clock.stop()
    _wait_for(lambda: _clock_threads() == 0)


def test_it_ticks_under_the_lock_until_stopped(ticks: Ticks) -> None:
    started = time.monotonic()
    ticks.clock.start(PERIOD_S)
    _wait_for(lambda: ticks.count >= 5)
    assert time.monotonic() - started >= 5 * PERIOD_S  # the first tick one period on, not at once
    with ticks.lock:
        ticks.clock.stop()
        stopped_at = ticks.count
    time.sleep(10 * PERIOD_S)
    assert ticks.count == stopped_at
    assert all(ticks.during) and not ticks.clock.running and ticks.clock.period_s == 0.0


def test_a_stop_under_the_lock_is_final_for_a_thread_waiting_for_it(ticks: Ticks) -> None:
    """A callback holds the lock (an e-stop) while the tick is due: stop() returns without
    waiting for the thread, and the tick that was waiting never runs."""
    with ticks.lock:  # taken before the start, so no tick can come first on a slow machine
        ticks.clock.start(PERIOD_S)
        time.sleep(5 * PERIOD_S)  # the thread is now waiting for the lock
        ticks.clock.stop()  # a join here would never return: the thread waits for our lock
        assert _clock_threads() == 1  # still alive, and stopped
    _wait_for(lambda: _clock_threads() == 0)
    assert ticks.count == 0


def test_a_tick_may_stop_its_own_clock(ticks: Ticks) -> None:
    ticks.then = lambda count: ticks.clock.stop() if count == 3 else None
    ticks.clock.start(PERIOD_S)
    _wait_for(lambda: _clock_threads() == 0)
    assert ticks.count == 3


def test_an_error_goes_to_the_node_and_the_clock_keeps_its_pace(ticks: Ticks) -> None:
    def fail(count: int) -> None:
        if count == 2:
            raise ValueError("a bug in a tick")

    ticks.then = fail
    ticks.clock.start(PERIOD_S)
    _wait_for(lambda: ticks.count >= 5)
    assert [str(e) for e in ticks.errors] == ["a bug in a tick"]


def test_an_error_in_reporting_an_error_does_not_stop_the_ticks(
    ticks: Ticks, capsys: pytest.CaptureFixture[str]
) -> None:
    def report(exc: Exception) -> None:
        raise RuntimeError("the log is gone")

    def fail(count: int) -> None:
        if count == 2:
            raise ValueError("a bug in a tick")

    clock = ControlClock(ticks.tick, ticks.lock, report)
    ticks.then = fail
    clock.start(PERIOD_S)
    _wait_for(lambda: ticks.count >= 5)
    clock.stop()
    assert "the log is gone" in capsys.readouterr().err


def test_a_period_set_in_a_tick_paces_the_next(ticks: Ticks) -> None:
    def slow_down(count: int) -> None:
        ticks.clock.period_s = 60.0

    ticks.then = slow_down
    ticks.clock.start(PERIOD_S)
    _wait_for(lambda: ticks.count >= 1)
    time.sleep(20 * PERIOD_S)
    assert ticks.count == 1 and ticks.clock.period_s == 60.0


def test_a_restart_leaves_one_thread_ticking(ticks: Ticks) -> None:
    for _ in range(5):
        ticks.clock.start(PERIOD_S)
    _wait_for(lambda: _clock_threads() == 1)
    _wait_for(lambda: ticks.count >= 3)
    assert ticks.clock.running and ticks.clock.period_s == PERIOD_S


def test_with_a_lead_a_tick_starts_early_and_is_told_its_deadline() -> None:
    """The node builds a command before its deadline and publishes it then: a tick starts at
    most ``lead_s`` before the deadline it is given, and never after it is due."""
    lead = 10 * PERIOD_S / 4
    early = Ticks(lead_s=lead)
    early.clock.start(10 * PERIOD_S)
    try:
        _wait_for(lambda: early.count >= 8)
    finally:
        early.clock.stop()
    _wait_for(lambda: _clock_threads() == 0)
    ahead = [due - entered for due, entered in zip(early.dues, early.entered, strict=True)]
    assert any(a > 0 for a in ahead)  # without the lead no tick starts before it is due
    assert max(ahead) <= lead + 1e-3
    assert all(b > a for a, b in itertools.pairwise(early.dues))
