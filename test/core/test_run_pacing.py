"""The paced loop (``runner.drive``) with an injected clock: absolute deadlines, no drift."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest

from sequence_ai_core.playback.engine import Tick
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.pacing import Pacer
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.playback.stats import ActionRecord, PlaybackStats
from sequence_ai_core.types import FloatArray, Observation

PERIOD = 0.1


class FakeTime:
    def __init__(self) -> None:
        self.now = 100.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


class ScriptedPlayer:
    """Waits ``waiting`` ticks, then plays; records when it was ticked."""

    def __init__(self, waiting: int, period_s: float | None = None) -> None:
        self.waiting = waiting
        self.ticks: list[float] = []
        self.period_s = period_s  # known before the first action (the catalogue's), or not
        self.stats = PlaybackStats()

    def play(self, now: float) -> Tick:
        self.ticks.append(now)
        if len(self.ticks) <= self.waiting:
            return Tick(None, "waiting", 0, -1, False, math.nan)
        self.period_s = PERIOD
        return Tick(np.zeros(2), "action", 1, len(self.ticks), False, 0.0)

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        """Nothing to request."""

    def commit(self) -> None:
        self.stats.commit(
            ActionRecord(self.ticks[-1], np.zeros(2), 0.0, PERIOD, new_chunk=False, steady=False)
        )

    def wait_any(self, timeout_s: float) -> bool:
        return False

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        return self.stats.outcome(
            reason=reason,
            stopped_early=stopped_early,
            elapsed_s=0.0,
            action_space=None,
            retries=0,
            requests=0,
            error=None,
        )


def run_scripted(
    fake: FakeTime, player: ScriptedPlayer, act: Callable[[FloatArray], None], **kw: object
) -> RunOutcome:
    return drive(
        player,
        lambda: None,
        act,
        max_actions=10,
        clock=fake.clock,
        sleep=fake.sleep,
        **kw,  # type: ignore[arg-type]
    )


def test_ticks_keep_absolute_deadlines_whatever_act_costs() -> None:
    fake = FakeTime()
    costs = iter([0.03, 0.07, 0.0, 0.09, 0.01, 0.05, 0.02, 0.0, 0.04, 0.0])

    def act(action: FloatArray) -> None:
        fake.now += next(costs)

    player = ScriptedPlayer(waiting=0)
    outcome = run_scripted(fake, player, act)
    assert outcome.actions == 10
    offsets = [round((t - 100.0) / PERIOD, 9) for t in player.ticks]
    assert offsets == [float(n) for n in range(10)]


def test_a_late_act_drops_the_missed_deadlines_instead_of_bursting() -> None:
    fake = FakeTime()
    calls = [0]

    def act(action: FloatArray) -> None:
        calls[0] += 1
        if calls[0] == 3:
            fake.now += 0.35  # 3.5 periods lost

    player = ScriptedPlayer(waiting=0)
    run_scripted(fake, player, act)
    offsets = [(t - 100.0) / PERIOD for t in player.ticks]
    gaps = np.diff(offsets)
    assert all(g == pytest.approx(1.0) for g in gaps[:2])
    assert gaps[2] == pytest.approx(3.5)  # the late tick runs at once...
    assert offsets[4] == pytest.approx(6.0)  # ...then back on the grid, no catch-up burst
    assert all(g == pytest.approx(1.0) for g in gaps[4:])


def test_with_a_period_before_the_first_action_waiting_ticks_share_the_plan_grid() -> None:
    fake = FakeTime()
    player = ScriptedPlayer(waiting=4, period_s=PERIOD)
    run_scripted(fake, player, lambda action: None)
    offsets = [round((t - 100.0) / PERIOD, 9) for t in player.ticks]
    assert offsets == [float(n) for n in range(14)]


def test_without_a_period_waiting_ticks_poll_then_pace_from_the_first_action() -> None:
    fake = FakeTime()
    player = ScriptedPlayer(waiting=4)
    run_scripted(fake, player, lambda action: None)
    waits = np.diff(player.ticks[:5])
    assert all(w < PERIOD for w in waits)  # polled, not paced
    first = player.ticks[4]
    assert [round((t - first) / PERIOD, 9) for t in player.ticks[4:]] == [
        float(n) for n in range(10)
    ]


def test_a_pacer_with_a_lead_wakes_that_long_before_each_deadline_and_names_it() -> None:
    fake = FakeTime()
    pacer = Pacer(fake.clock, fake.sleep, lead_s=0.01)
    pacer.wait(fake.now, PERIOD)
    assert (pacer.deadline, fake.now) == (pytest.approx(100.1), pytest.approx(100.09))
    pacer.wait(fake.now, PERIOD)  # the grid stays the deadlines', not the early wakes'
    assert (pacer.deadline, fake.now) == (pytest.approx(100.2), pytest.approx(100.19))
    fake.now += 0.35  # a tick ran long: missed deadlines are dropped, the next is due at once
    pacer.wait(fake.now, PERIOD)
    assert pacer.deadline == fake.now == pytest.approx(100.54)
    pacer.wait(fake.now, PERIOD)
    assert (pacer.deadline, fake.now) == (pytest.approx(100.6), pytest.approx(100.59))
    pacer.wait(fake.now, None)  # a poll has no deadline
    assert pacer.deadline is None
