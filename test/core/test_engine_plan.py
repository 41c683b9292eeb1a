"""The engine's time-indexed plan, driven with an injected clock against the real simulator.

Ticks pass explicit times; only HTTP runs in real time (the simulator answers in ~20 ms and
each test waits for it), so the step indices below are exact.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import TEST_KEY

from sequence_ai_core.errors import InvalidResponse
from sequence_ai_core.playback.blends import rows_from
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.playback.plan import EARLY, ChunkPlan, PlannedStep
from sequence_ai_core.playback.ready import prepare
from sequence_ai_core.playback.source import DriverGuard
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import ActionChunk, FloatArray, Observation, Prediction, Proprioception
from sequence_ai_sim import Fault, GatewaySimulator, SimModel

HANG_GUARD_S = 10.0
DELTA_MODEL = SimModel(
    short_id="delta-arm",
    architecture="test",
    robot="piper",
    action_space="joint_delta",
    action_dim=7,
    control_hz=15.0,
    action_horizon=32,
    camera_views=("front",),
)


def observation() -> Observation:
    return Observation(proprioception=Proprioception(joint_positions=[0.0] * 7, gripper=0.5))


@contextmanager
def engine_on(
    sim: GatewaySimulator, model: str, config: EngineConfig | None = None
) -> Iterator[tuple[PlaybackEngine, list[Prediction]]]:
    chunks: list[Prediction] = []
    with connect(model, api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as policy:
        engine = PlaybackEngine(
            policy, config or EngineConfig(), clock=lambda: 0.0, on_chunk=chunks.append
        )
        try:
            yield engine, chunks
        finally:
            engine.close()


def tick(engine: PlaybackEngine, now: float) -> Tick:
    """A driver's tick: the action it hands out goes out (is committed)."""
    result = engine.tick(now, observation)
    if result.action is not None:
        engine.commit()
    return result


def start(engine: PlaybackEngine, first_at: float = 0.2) -> Tick:
    """First request at t=0, answered; the first chunk lands at ``first_at`` (lag = first_at)."""
    assert tick(engine, 0.0).kind == "waiting"
    assert engine.wait_idle(HANG_GUARD_S)
    return tick(engine, first_at)


@pytest.fixture
def delta_sim(clean_env: object) -> Iterator[GatewaySimulator]:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.02, models=[DELTA_MODEL]) as server:
        yield server


def test_the_first_chunk_plays_from_its_first_step_when_it_arrives(sim: GatewaySimulator) -> None:
    with engine_on(sim, "pi05-droid") as (engine, chunks):
        first = start(engine, first_at=0.2)
        assert (first.kind, first.step_index, first.new_chunk) == ("action", 0, True)
        assert first.action is not None
        np.testing.assert_array_equal(first.action, chunks[0].action_chunk.steps[0])
        assert first.staleness_s == pytest.approx(0.2)
        assert engine.lag_s == pytest.approx(0.2)
        assert engine.current_chunk is not None and engine.current_chunk[1] == 0.2


def test_a_tick_plays_the_step_due_at_its_time_and_missed_ticks_do_not_shift_the_plan(
    sim: GatewaySimulator,
) -> None:
    with engine_on(sim, "cosmos3-edge-policy-droid", EngineConfig(prefetch=False)) as (
        engine,
        chunks,
    ):
        start(engine, first_at=1.0)
        period = 1 / 15
        steps = chunks[0].action_chunk.steps
        # 3.5 periods in: step 3 (floor); a quarter period early counts as due; late ticks jump
        # to the step due, they do not replay the ones missed, nor the one sent: a second tick
        # in step 13's slot (13.7) sends nothing.
        for offset, expected in [(3.5, 3), (4.0, 4), (13.0, 13), (13.7, None), (31.0, 31)]:
            result = tick(engine, 1.0 + offset * period)
            if expected is None:
                assert result.kind == "early" and result.action is None
                continue
            assert result.step_index == expected
            assert result.action is not None
            np.testing.assert_array_equal(result.action, steps[expected])
        assert tick(engine, 1.0 + 32.0 * period).kind == "underrun"
        assert engine.snapshot()["skipped_late"] == 2 + 8 + 17


def test_waiting_ticks_before_the_first_action_are_not_underruns(sim: GatewaySimulator) -> None:
    sim.set_latency(0.3)
    with engine_on(sim, "pi05-droid") as (engine, _):
        kinds = [tick(engine, t).kind for t in (0.0, 0.1, 0.2)]
        assert kinds == ["waiting"] * 3
        assert engine.snapshot()["underruns"] == 0
        assert engine.in_flight == 1  # one request at a time until something is measured


def pipelined_pair(
    sim: GatewaySimulator, engine: PlaybackEngine, slow_s: float, *, wait_both: bool = False
) -> None:
    """Two startup requests (t=0 and t=0.2), the second made ``slow_s`` slower in real time;
    the first lands at t=0.4 (lag 0.4), so the second is anchored at 0.2 + 0.4 = 0.6."""
    tick(engine, 0.0)
    _wait_received(sim, 1)
    sim.inject(Fault.timeout(slow_s))
    tick(engine, 0.2)  # staggered startup refill (expected_covers_s=0.2)
    assert engine.in_flight == 2
    # ``wait_both``: the second may overtake the first on the workers' threads; waiting for
    # both makes the first land first (they are collected in the order they started)
    assert engine.wait_idle(HANG_GUARD_S) if wait_both else engine.wait_any(HANG_GUARD_S)
    first = tick(engine, 0.4)
    assert (first.step_index, first.new_chunk) == (0, True)


def _wait_received(sim: GatewaySimulator, count: int) -> None:
    import time

    deadline = time.monotonic() + HANG_GUARD_S
    while len(sim.received) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(sim.received) >= count


#: The fresh lag: these tests follow its moves toward the smallest sustainable lag, on the
#: plan's own steps (the hand-over between chunks is test_engine_handover's).
STAGGERED = EngineConfig(expected_covers_s=0.2, freshness="fresh", handover="none")


@pytest.mark.parametrize(
    ("model", "expect_index"),
    [("cosmos3-edge-policy-droid", 7), ("lingbot-va-5b", 7)],
)
def test_steps_that_passed_in_flight_are_skipped_for_velocity_and_absolute(
    sim: GatewaySimulator, model: str, expect_index: int
) -> None:
    with engine_on(sim, model, STAGGERED) as (engine, chunks):
        pipelined_pair(sim, engine, slow_s=0.3)
        assert engine.wait_idle(HANG_GUARD_S)
        # arrives at t=1.0 and moves the lag (0.4 s) toward its target: one period down for
        # the 2.13 s chunk (due since 0.2 + 0.333: 7 steps at 15 Hz skipped), a sixth of the
        # way up for the 0.64 s one, whose target the two refills' 0.4 s spread widens
        # (three periods: due since 0.2 + 0.52, 7 steps at 25 Hz skipped)
        late = tick(engine, 1.0)
        assert (late.new_chunk, late.step_index, late.chunk_seq) == (True, expect_index, 2)
        assert late.action is not None
        np.testing.assert_array_equal(late.action, chunks[1].action_chunk.steps[expect_index])
        assert engine.outcome(reason="x", stopped_early=False).skipped_stale == expect_index


def test_delta_spaces_play_every_step_of_a_late_chunk(delta_sim: GatewaySimulator) -> None:
    with engine_on(delta_sim, "delta-arm", STAGGERED) as (engine, chunks):
        pipelined_pair(delta_sim, engine, slow_s=0.3)
        assert engine.wait_idle(HANG_GUARD_S)
        played = [tick(engine, 1.0 + k / 15) for k in range(3)]
        assert [(t.chunk_seq, t.step_index) for t in played] == [(2, 0), (2, 1), (2, 2)]
        for t in played:
            assert t.action is not None
            np.testing.assert_array_equal(t.action, chunks[1].action_chunk.steps[t.step_index])
        assert engine.outcome(reason="x", stopped_early=False).skipped_stale == 0


def test_a_newer_chunk_takes_over_at_its_anchor_not_on_arrival(sim: GatewaySimulator) -> None:
    with engine_on(sim, "cosmos3-edge-policy-droid", STAGGERED) as (engine, _):
        pipelined_pair(sim, engine, slow_s=0.2)
        assert engine.wait_idle(HANG_GUARD_S)
        # the second chunk arrived by 0.5 and took the lag one period toward its target
        # (a 2.13 s chunk needs almost none): due from 0.2 + 0.4 - 1/15
        anchor = 0.6 - 1 / 15
        before = tick(engine, 0.5)
        assert (before.chunk_seq, before.step_index) == (1, 1)
        after = tick(engine, anchor)
        assert (after.chunk_seq, after.step_index, after.new_chunk) == (2, 0, True)
        # the older chunk's remainder is gone for good
        assert tick(engine, anchor + 1 / 15).chunk_seq == 2


def test_seam_is_measured_before_blending_and_a_fade_starts_from_the_old_plan(
    sim: GatewaySimulator,
) -> None:
    config = EngineConfig(expected_covers_s=0.2, handover="fade", smooth_seam=4)
    with engine_on(sim, "lingbot-va-5b", config) as (engine, chunks):
        pipelined_pair(sim, engine, slow_s=0.2)
        assert engine.wait_idle(HANG_GUARD_S)
        first_steps = chunks[0].action_chunk.steps
        ticks = [tick(engine, 0.4 + k * 0.04) for k in range(1, 11)]
    # the first chunk is never blended
    assert ticks[0].chunk_seq == 1 and ticks[0].action is not None
    np.testing.assert_array_equal(ticks[0].action, first_steps[1])
    swap = next(i for i, t in enumerate(ticks) if t.new_chunk)
    last_sent = ticks[swap - 1].action
    second = chunks[1].action_chunk.steps
    raw_first = second[ticks[swap].step_index]
    assert last_sent is not None
    seam = float(np.max(np.abs(raw_first - last_sent)))
    assert seam > 0  # the fake clock puts chunks at unrelated wall times: a real seam
    # measured on the planned values, before any blending
    assert engine.outcome(reason="x", stopped_early=False).max_seam_jump == pytest.approx(seam)
    # the offset: the old chunk's next step (past its end: extrapolated), not the last sent
    old_next = rows_from(list(first_steps), ticks[swap - 1].step_index + 1, 1)[0]
    offset = old_next - raw_first
    for k in range(4):
        t = ticks[swap + k]
        assert t.action is not None
        expected = second[t.step_index] + offset * (1 - (k + 1) / 5)
        np.testing.assert_allclose(t.action, expected)
    after = ticks[swap + 4]
    assert after.action is not None
    np.testing.assert_array_equal(after.action, second[after.step_index])


class _BypassingPolicy:
    """A policy whose answers skip the wire checks, to prove the engine's own."""

    control_hz: float | None = None

    def __init__(self, chunks: list[ActionChunk]) -> None:
        self._chunks = chunks
        self.guard = DriverGuard("bypassing")

    def fetch(self, observation: Observation, options: object) -> Prediction:
        return Prediction(id="p", model="m", action_chunk=self._chunks.pop(0))


def _chunk(steps: FloatArray, space: str = "joint_velocity") -> ActionChunk:
    return ActionChunk(steps, "r", space, steps.shape[1], 15.0, len(steps) / 15)


@pytest.mark.parametrize(
    "bad",
    [
        np.full((4, 3), np.nan),
        np.array([[0.0, 1.0, np.inf]] * 4),
        np.zeros((0, 3)),
        np.zeros((4,)),
    ],
)
def test_non_finite_or_malformed_chunks_never_play(bad: FloatArray) -> None:
    chunk = ActionChunk(bad, "r", "joint_velocity", 3, 15.0, 1.0)
    with PlaybackEngine(_BypassingPolicy([chunk]), clock=lambda: 0.0) as engine:
        tick(engine, 0.0)
        assert engine.wait_idle(HANG_GUARD_S)
        with pytest.raises(InvalidResponse):
            tick(engine, 0.1)
        with pytest.raises(InvalidResponse):  # the episode stays failed
            tick(engine, 0.2)


@pytest.mark.parametrize(
    "second",
    [_chunk(np.zeros((15, 4))), _chunk(np.zeros((15, 3)), space="joint_absolute")],
)
def test_every_chunk_of_a_run_shares_size_and_action_space(second: ActionChunk) -> None:
    chunks = [_chunk(np.zeros((15, 3))), second]
    with PlaybackEngine(_BypassingPolicy(chunks), clock=lambda: 0.0) as engine:
        tick(engine, 0.0)
        assert engine.wait_idle(HANG_GUARD_S)
        assert tick(engine, 0.1).kind == "action"
        now = 0.1
        with pytest.raises(InvalidResponse, match="earlier chunks"):
            for _ in range(40):
                now += 1 / 15
                tick(engine, now)
                engine.wait_idle(HANG_GUARD_S)


def test_policy_type_is_accepted(sim: GatewaySimulator) -> None:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as p:
        assert isinstance(p, Policy)
        with PlaybackEngine(p) as engine:
            assert engine.snapshot()["state"] == "waiting"


@settings(max_examples=60, deadline=None)
@given(
    space=st.sampled_from(["joint_velocity", "joint_absolute", "joint_delta"]),
    gaps=st.lists(st.floats(min_value=0.001, max_value=0.3), min_size=1, max_size=60),
)
def test_played_steps_never_go_back_and_delta_never_skips(space: str, gaps: list[float]) -> None:
    """Whatever the tick timing: each step goes out at most once, in order (a tick in the
    slot of a step sent is ``EARLY``); delta spaces play 0, 1, 2, ..."""
    steps = np.arange(20 * 3, dtype=np.float64).reshape(20, 3)
    prediction = Prediction(id="p", model="m", action_chunk=_chunk(steps, space=space))
    plan = ChunkPlan()
    arrival = prepare(prediction)
    assert plan.add(arrival, seq=1, observed_at=0.0, period_s=0.05, now=0.0, holding=True)
    now, played = 0.0, []
    for gap in gaps:
        step = plan.take(now)
        due = math.floor(now / 0.05 + 0.25)
        if space != "joint_delta":  # the step due now, once; nothing once the chunk is over
            sent = bool(played) and due == played[-1]
            expected = EARLY if sent else (due if due < 20 else None)
            assert (step.index if isinstance(step, PlannedStep) else step) == expected
        if isinstance(step, PlannedStep):
            played.append(step.index)
            np.testing.assert_array_equal(step.action, steps[step.index])
        now += gap
    assert played == sorted(set(played))
    if space == "joint_delta":
        assert played == list(range(min(len(gaps), 20)))
