"""run()'s sleep between ticks: plain ``time.sleep`` for a control period, cut short by
``Policy.close()`` only when it is long (the loop checks the event before every tick)."""

from __future__ import annotations

import threading

import pytest

from sequence_ai_core.playback import stops


def test_a_long_sleep_ends_when_the_event_is_set() -> None:
    event = threading.Event()
    sleeper = threading.Thread(target=stops.interruptible(event), args=(600.0,))
    sleeper.start()
    event.set()
    sleeper.join(timeout=30)
    assert not sleeper.is_alive()


def test_a_control_period_sleeps_without_the_events_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    waited: list[float | None] = []

    class Recording(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waited.append(timeout)
            return False

    monkeypatch.setattr(stops.time, "sleep", slept.append)
    sleep = stops.interruptible(Recording())
    sleep(0.005)  # 200 Hz
    sleep(stops.PLAIN_SLEEP_S)
    sleep(1.0)  # 1 Hz: long enough that a close() must cut it short
    assert slept == [0.005, stops.PLAIN_SLEEP_S]
    assert waited == [1.0]
