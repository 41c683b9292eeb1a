"""A late tick never makes a step go out twice.

A tick that runs late plays the step due at its time; the next tick, back on the driver's
grid, can land less than a period later, in the slot of the step just sent. It sends nothing
and holds nothing (``Tick.kind == "early"``), and is counted (``early_ticks``). Under CPU load
this turned a 15-step chunk into 16 actions (the step sent again), so the count of actions
exceeded the steps the model sent.

Every run is on a fake clock (``seam_rig.Scripted``): the counts are exact.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest
from support.engine_clock import Clock, NoHttp
from support.seam_rig import HZ, STEPS, Scripted

from sequence_ai_core.errors import Stalled
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.types import FloatArray, Observation, Proprioception

PERIOD = 1 / HZ
ARRIVES_AT_TICK = 3  # the one answer lands before this tick (latency 0.29 s)
SPACES = ["joint_absolute", "joint_velocity", "joint_delta"]


def _steps(n: int, observed_at: float) -> FloatArray:
    """Step i's value is i, so what went out names the step."""
    return np.repeat(np.arange(STEPS, dtype=np.float64)[:, None], 2, axis=1)


def _engine(space: str) -> tuple[PlaybackEngine, Scripted]:
    """One answer, then silence (the gateway of the failing run)."""
    clock = Clock()
    gateway = Scripted(clock, _steps, space, latency=lambda n: 0.29 if n == 0 else 1e9)
    config = EngineConfig(expected_covers_s=STEPS / HZ, expected_control_hz=HZ)
    return PlaybackEngine(NoHttp(), config, clock=clock, executor=gateway), gateway


def _observe(clock: Clock) -> Observation:
    return Observation(proprioception=Proprioception(joint_positions=[clock.now]))


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("late", [0.3, 0.8, 0.95])
def test_each_step_goes_out_once_when_the_chunk_lands_on_a_late_tick(
    space: str, late: float
) -> None:
    """The chunk starts on the late tick (anchored there); the next tick, on the grid, is
    early: every step goes out once, in order, and nothing runs out before the last."""
    sent, kinds, outcome = _ticks(space, ARRIVES_AT_TICK, late)
    assert sent == list(range(STEPS)) and outcome.actions == STEPS
    # order-played (delta) spaces play the next step on each tick: none is early there
    assert kinds.count("early") == (0 if space == "joint_delta" else 1) == outcome.early_ticks
    last = len(kinds) - 1 - kinds[::-1].index("action")
    assert "underrun" not in kinds[:last]  # the plan ran out only after its last step


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("late", [0.8, 0.95])
def test_a_tick_late_past_the_tolerance_mid_chunk_skips_a_step_and_repeats_none(
    space: str, late: float
) -> None:
    """A tick more than 3/4 period late plays the next step's slot (step 3's passed, as
    any late tick skips); the on-grid tick after it is early rather than sending it again."""
    sent, kinds, outcome = _ticks(space, ARRIVES_AT_TICK + 3, late)
    skipping = space != "joint_delta"
    assert sent == [i for i in range(STEPS) if not (skipping and i == 3)]
    assert outcome.actions == len(sent) and outcome.skipped_late == int(skipping)
    assert kinds.count("early") == int(skipping) == outcome.early_ticks


@pytest.mark.parametrize("space", SPACES)
def test_ticks_on_time_are_never_early(space: str) -> None:
    sent, kinds, outcome = _ticks(space, -1, 0.0)
    assert sent == list(range(STEPS)) and outcome.actions == STEPS
    assert "early" not in kinds and outcome.early_ticks == 0


@pytest.mark.parametrize("space", SPACES)
def test_ticks_at_twice_the_plan_s_rate_are_counted_early_and_send_nothing_more(
    space: str,
) -> None:
    """A loop ticking every half period (a clock running fast): each step's slot gets two
    ticks, and the second is early, in the outcome and in the live numbers. Order-played
    (delta) spaces play the next step on every tick: none is early there."""
    sent, kinds, outcome, live = _run(space, (k * PERIOD / 2 for k in range(6 * STEPS)))
    assert sent == list(range(STEPS)) and outcome.actions == STEPS
    early = 0 if space == "joint_delta" else STEPS  # the last step's second tick too
    assert kinds.count("early") == early == outcome.early_ticks == live
    assert outcome.skipped_late == 0


def _run(space: str, times: Iterable[float]) -> tuple[list[int], list[str], RunOutcome, int]:
    """Ticks at ``times``: the steps sent, each tick's kind, the outcome, and the live
    snapshot's count of early ticks at the end."""
    engine, gateway = _engine(space)
    sent: list[int] = []
    kinds: list[str] = []
    with engine:
        for now in times:
            gateway.advance(now)
            tick = engine.tick(now, lambda: _observe(gateway.clock))
            kinds.append(tick.kind)
            if tick.action is not None:
                engine.commit()
                sent.append(int(tick.action[0]))
        live = engine.snapshot()["early_ticks"]
        outcome = engine.outcome(reason="completed", stopped_early=False)
    return sent, kinds, outcome, live


def _ticks(space: str, late_tick: int, late: float) -> tuple[list[int], list[str], RunOutcome]:
    """Ticks on the period grid but ``late_tick``, ``late`` periods behind it."""
    times = ((k + (late if k == late_tick else 0.0)) * PERIOD for k in range(3 * STEPS))
    sent, kinds, outcome, _ = _run(space, times)
    return sent, kinds, outcome


def test_a_run_whose_chunk_lands_on_a_late_tick_plays_it_once_then_holds_and_stalls() -> None:
    """``drive`` end to end: the pacer's sleep overshoots by 0.8 period on the tick the only
    answer lands on, then the gateway is silent. Before: 11 actions from a 10-step chunk."""
    engine, gateway = _engine("joint_velocity")
    clock = gateway.clock
    events: list[str] = []
    sleeps = 0

    def sleep(seconds: float) -> None:
        nonlocal sleeps
        sleeps += 1
        overshoot = 0.8 * PERIOD if sleeps == ARRIVES_AT_TICK else 0.0
        gateway.advance(clock.now + seconds + overshoot)

    with engine:
        outcome = drive(
            engine,
            lambda: _observe(clock),
            lambda action: events.append(f"act {int(action[0])}"),
            max_actions=1_000,
            hold=lambda: events.append("hold"),
            clock=clock,
            sleep=sleep,
            stall_timeout_s=0.5,
        )
    assert isinstance(outcome.error, Stalled), outcome.summary()
    assert events == [f"act {i}" for i in range(STEPS)] + ["hold"]
    assert outcome.actions == STEPS
