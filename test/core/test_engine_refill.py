"""Refills: prefetch, pipelining, underruns, warming and retries, worker cleanup.

Ticks use an injected clock; the simulator answers over real HTTP on loopback.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from support import TEST_KEY

from sequence_ai_core.errors import InvalidResponse, OutOfCredit, Unavailable
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import Observation, Proprioception
from sequence_ai_sim import Fault, GatewaySimulator, SimModel

HANG_GUARD_S = 10.0
#: 50 Hz x 5 steps = 0.1 s chunks: shorter than any round trip below.
TINY = SimModel(
    short_id="tiny",
    architecture="test",
    robot="ur5e",
    action_space="joint_velocity",
    action_dim=7,
    control_hz=50.0,
    action_horizon=5,
    camera_views=("front",),
)


class Observer:
    """observe(): a fresh observation each call, numbered through the first joint."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Observation:
        self.calls += 1
        joints = [float(self.calls)] + [0.0] * 6
        return Observation(proprioception=Proprioception(joint_positions=joints))


@pytest.fixture
def policy(sim: GatewaySimulator) -> Iterator[Policy]:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as p:
        yield p


def sent(engine: PlaybackEngine, now: float, observe: Callable[[], Observation | None]) -> Tick:
    """A driver's tick: the action it hands out goes out (is committed)."""
    result = engine.tick(now, observe)
    if result.action is not None:
        engine.commit()
    return result


def first_chunk(engine: PlaybackEngine, observe: Observer, at: float = 0.2) -> Tick:
    sent(engine, 0.0, observe)
    assert engine.wait_idle(HANG_GUARD_S)
    result = sent(engine, at, observe)
    assert result.kind == "action"
    return result


def wait_received(sim: GatewaySimulator, count: int) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while len(sim.received) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(sim.received) >= count


def test_pipelined_refills_are_staggered_each_with_a_fresh_observation(clean_env: object) -> None:
    observe = Observer()
    with (
        GatewaySimulator(api_key=TEST_KEY, latency_s=0.5, models=[TINY]) as sim,
        connect("tiny", api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as policy,
        PlaybackEngine(policy, EngineConfig(max_in_flight=3)) as engine,
    ):
        first_chunk(engine, observe, at=0.3)  # lag 0.3 s, chunk 0.1 s: pipelining needed
        assert engine.in_flight == 1  # the refill started with the first action
        starts = [0.3]
        for k in range(1, 16):
            now = 0.3 + k * 0.02
            before = engine.in_flight
            sent(engine, now, observe)
            if engine.in_flight > before:
                starts.append(round(now, 3))
        assert engine.in_flight == 3
        wait_received(sim, 4)
        # one request per tick at most, spaced by about a chunk (0.1 s) minus a period
        assert starts == [0.3, 0.38, 0.46]
        assert observe.calls == 4
        firsts = [r["observation"]["proprioception"]["joint_positions"][0] for r in sim.received]
        assert sorted(firsts) == [1.0, 2.0, 3.0, 4.0]  # fake ticks are instants: any order
        # concurrent requests each hold their own kept-alive connection
        assert len({r["connection"] for r in sim.received[1:]}) == 3


def test_prefetch_starts_one_lead_before_the_plan_ends(policy: Policy) -> None:
    observe = Observer()
    with PlaybackEngine(policy) as engine:
        first_chunk(engine, observe, at=0.2)  # plan ends at 1.2; lead = 0.2 + 1/15
        period = 1 / 15
        for k in range(1, 15):
            sent(engine, 0.2 + k * period, observe)
            if engine.in_flight:
                break
        assert 1.2 - (0.2 + k * period) < engine.lead_s() <= 1.2 - (0.2 + (k - 1) * period)
        assert observe.calls == 2


def test_underruns_are_counted_timed_and_reported(sim: GatewaySimulator, policy: Policy) -> None:
    gaps: list[float] = []
    observe = Observer()
    period = 1 / 15
    config = EngineConfig(prefetch=False)
    with PlaybackEngine(policy, config, on_underrun=gaps.append) as engine:
        first_chunk(engine, observe, at=0.2)
        for k in range(1, 15):
            assert sent(engine, 0.2 + k * period, observe).kind == "action"
        sim.set_latency(0.5)  # the closed-loop refill starts at the first empty tick
        kinds = [sent(engine, 0.2 + k * period, observe).kind for k in (15, 16, 17)]
        assert kinds == ["underrun"] * 3
        assert engine.wait_idle(HANG_GUARD_S)
        resumed = sent(engine, 0.2 + 18 * period, observe)
        assert (resumed.kind, resumed.step_index, resumed.new_chunk) == ("action", 0, True)
        outcome = engine.outcome(reason="completed", stopped_early=False)
    assert gaps == pytest.approx([period, 2 * period, 3 * period])
    assert outcome.underruns == 3 and outcome.stalls == 1
    assert outcome.underrun_s == pytest.approx(3 * period)
    assert outcome.max_gap_s == pytest.approx(4 * period)
    assert outcome.actions == 16 and outcome.chunks == 2
    assert outcome.duty_cycle == pytest.approx(16 / 19)
    assert outcome.requests == 2


def test_warming_before_the_first_action_is_waited_out_re_observing(
    sim: GatewaySimulator, policy: Policy
) -> None:
    observe = Observer()
    sim.inject(Fault.warming(retry_after_s=0.5), times=2)
    with PlaybackEngine(policy, EngineConfig(startup_timeout_s=5.0)) as engine:
        now = 0.0
        kinds = []
        warming = []
        while now < 3.0:
            kinds.append(sent(engine, now, observe).kind)
            engine.wait_idle(HANG_GUARD_S)
            warming.append(engine.snapshot()["warming"])
            now += 0.1
        outcome = engine.outcome(reason="completed", stopped_early=False)
    assert kinds[:11] == ["waiting"] * 11  # retries wait out Retry-After: at 0.5 and 1.0 s
    assert 1 in warming[:11] and warming[-1] == 0  # diagnostics see the wait, then its end
    assert "action" in kinds and "underrun" not in kinds[: kinds.index("action")]
    assert outcome.retries == 2
    assert observe.calls >= 3
    # the simulator records the requests that got an answer: the third try, re-observed
    first_joints = [r["observation"]["proprioception"]["joint_positions"][0] for r in sim.received]
    assert first_joints[0] == 3.0


def test_warming_past_the_startup_deadline_raises(sim: GatewaySimulator, policy: Policy) -> None:
    observe = Observer()
    sim.inject(Fault.warming(retry_after_s=100.0), times=5)
    with PlaybackEngine(policy, EngineConfig(startup_timeout_s=1.0)) as engine:
        sent(engine, 0.0, observe)
        engine.wait_idle(HANG_GUARD_S)
        sent(engine, 0.5, observe)  # warming: retry at the deadline (t=1.0), not in 100 s
        assert engine.in_flight == 0
        sent(engine, 0.9, observe)
        assert engine.in_flight == 0
        sent(engine, 1.0, observe)
        assert engine.in_flight == 1
        engine.wait_idle(HANG_GUARD_S)
        with pytest.raises(Unavailable) as raised:
            sent(engine, 1.1, observe)
        assert raised.value.warming
        assert engine.outcome(reason="x", stopped_early=True).retries == 1


def test_warming_without_a_startup_timeout_raises_at_once(
    sim: GatewaySimulator, policy: Policy
) -> None:
    sim.inject(Fault.warming())
    with PlaybackEngine(policy) as engine:
        sent(engine, 0.0, Observer())
        engine.wait_idle(HANG_GUARD_S)
        with pytest.raises(Unavailable):
            sent(engine, 0.1, Observer())


def mid_run_failure(
    sim: GatewaySimulator, policy: Policy, fault: Fault, times: int = 1
) -> tuple[PlaybackEngine, Observer]:
    """First chunk at 0.2 (plan to 1.2); the prefetch at 0.2 + 14/15 meets ``fault``."""
    observe = Observer()
    engine = PlaybackEngine(policy, EngineConfig(startup_timeout_s=5.0))
    first_chunk(engine, observe, at=0.2)
    sim.inject(fault, times=times)
    sent(engine, 0.2 + 14 / 15, observe)
    assert engine.in_flight == 1
    assert engine.wait_idle(HANG_GUARD_S)
    return engine, observe


def test_warming_after_the_first_action_raises_even_with_plan_left(
    sim: GatewaySimulator, policy: Policy
) -> None:
    engine, observe = mid_run_failure(sim, policy, Fault.warming(retry_after_s=1.0))
    with engine, pytest.raises(Unavailable):
        sent(engine, 0.2 + 14.2 / 15, observe)


@pytest.mark.parametrize(
    ("fault", "error"),
    [(Fault.status(402), OutOfCredit), (Fault.nan(), InvalidResponse)],
)
def test_fatal_errors_raise_at_once(
    sim: GatewaySimulator, policy: Policy, fault: Fault, error: type[Exception]
) -> None:
    engine, observe = mid_run_failure(sim, policy, fault)
    with engine, pytest.raises(error):
        sent(engine, 0.2 + 14.2 / 15, observe)


def test_transient_errors_are_retried_while_the_plan_covers_then_surface(
    sim: GatewaySimulator, policy: Policy
) -> None:
    engine, observe = mid_run_failure(sim, policy, Fault.status(503), times=2)
    with engine:
        retry_at = 0.2 + 14.2 / 15  # plan runs to 1.2: a retry fits
        # step 14 went out at 14/15 and this tick is in its slot: nothing to send, no underrun
        assert sent(engine, retry_at, observe).kind == "early"
        assert engine.in_flight == 1 and observe.calls == 3
        assert engine.wait_idle(HANG_GUARD_S)
        with pytest.raises(Unavailable) as raised:
            sent(engine, 1.25, observe)  # the retry failed too, and the plan has run out
        assert not raised.value.warming
        assert engine.outcome(reason="x", stopped_early=True).retries == 1


def test_a_retry_after_longer_than_the_plan_surfaces_the_error(
    sim: GatewaySimulator, policy: Policy
) -> None:
    engine, observe = mid_run_failure(sim, policy, Fault.status(429, headers={"Retry-After": "5"}))
    with engine, pytest.raises(Unavailable):
        sent(engine, 0.2 + 14.2 / 15, observe)


def refill_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("sequence-ai-refill")]


def test_close_joins_every_worker_and_is_idempotent(sim: GatewaySimulator, policy: Policy) -> None:
    others = set(refill_threads())  # left by other tests, if any
    sim.set_latency(0.2)
    engine = PlaybackEngine(policy, EngineConfig(expected_covers_s=0.05))
    observe = Observer()
    for k in range(3):
        sent(engine, k * 0.05, observe)
    # before anything was measured, at most two start (a saturated gateway would queue more)
    assert engine.in_flight == 2 and len(set(refill_threads()) - others) == 2
    engine.close()
    engine.close()
    assert set(refill_threads()) - others == set()
    assert engine.snapshot()["state"] == "closed"
    with pytest.raises(RuntimeError):
        sent(engine, 1.0, observe)


def test_observe_returning_none_sends_nothing_that_tick(
    sim: GatewaySimulator, policy: Policy
) -> None:
    ready = [False]
    inner = Observer()

    def observe() -> Observation | None:
        return inner() if ready[0] else None

    with PlaybackEngine(policy) as engine:
        for k in range(3):
            assert sent(engine, k * 0.1, observe).kind == "waiting"
        assert engine.in_flight == 0 and engine.snapshot()["requests"] == 0
        ready[0] = True
        sent(engine, 0.3, observe)
        assert engine.in_flight == 1 and inner.calls == 1


def test_close_without_waiting_returns_at_once_and_the_worker_still_ends(
    sim: GatewaySimulator, policy: Policy
) -> None:
    others = set(refill_threads())
    sim.set_latency(1.0)
    engine = PlaybackEngine(policy)
    sent(engine, 0.0, Observer())
    wait_received(sim, 1)
    engine.close(wait=False)
    assert len(set(refill_threads()) - others) == 1  # its exchange is still under way
    deadline = time.monotonic() + HANG_GUARD_S
    while set(refill_threads()) - others and time.monotonic() < deadline:
        time.sleep(0.02)
    assert set(refill_threads()) - others == set()
