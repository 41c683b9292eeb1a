"""The chunk gate, ``run(validate_chunk=...)``: a whole chunk is checked on a worker before
any of its steps plays, within ``chunk_validator_timeout_s``; a refusal ends the run with
reason ``validate`` and one hold, and the caller's own exceptions propagate after it.

Against the real simulator over HTTP; the engine-level tests tick on an injected clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from support import TEST_KEY
from support.sim_robot import Robot

from sequence_ai_core import ChunkRefused, RunConfig
from sequence_ai_core.errors import Unavailable
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.engine_config import InvalidSetting
from sequence_ai_core.playback.episode import Episode
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import ActionChunk, FloatArray, Observation
from sequence_ai_sim import GatewaySimulator, SimulatedArm

MODEL = "lingbot-vla-v2-6b"  # 30 Hz, 15-step chunks: short runs
HANG_GUARD_S = 10.0
GATE_THREAD = "sequence-ai-chunk-check"


@pytest.fixture
def policy(sim: GatewaySimulator) -> Iterator[Policy]:
    with connect(MODEL, api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as p:
        yield p


class Check:
    """A chunk check that records what it was given, on which thread, and answers
    ``answer(n)`` for the n-th chunk (1-based)."""

    def __init__(self, answer: Callable[[int], Any] = lambda n: True) -> None:
        self.answer = answer
        self.chunks: list[ActionChunk] = []
        self.observations: list[Observation] = []
        self.threads: set[int] = set()

    def __call__(self, chunk: ActionChunk, observation: Observation) -> Any:
        self.chunks.append(chunk)
        self.observations.append(observation)
        self.threads.add(threading.get_ident())
        return self.answer(len(self.chunks))


def run(policy: Policy, robot: Robot, check: Check | None, **kwargs: Any) -> RunOutcome:
    kwargs.setdefault("max_actions", 60)
    return policy.run(
        robot.observe,
        robot.act,
        hold=robot.hold,
        validate=lambda action: True,
        validate_chunk=check,
        **kwargs,
    )


def gate_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == GATE_THREAD}


def wait_gone(before: set[threading.Thread]) -> set[threading.Thread]:
    """The gate threads started since ``before`` that are still alive after a short wait
    (a gate's thread ends right after its engine closes, on its own)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while gate_threads() - before and time.monotonic() < deadline:
        time.sleep(0.01)
    return gate_threads() - before


def rows(chunk: ActionChunk) -> list[FloatArray]:
    return list(np.asarray(chunk.steps, dtype=np.float64))


def is_row_of(action: FloatArray, chunks: list[ActionChunk]) -> bool:
    return any(np.array_equal(action, row) for chunk in chunks for row in rows(chunk))


# ---------------------------------------------------------------- accepting


@pytest.mark.timing
@pytest.mark.parametrize("verdict", [True, np.bool_(True)], ids=["bool", "numpy.bool_"])
def test_an_accepting_check_completes_off_the_calling_thread(
    policy: Policy, verdict: object
) -> None:
    before = gate_threads()
    robot, check = Robot(MODEL), Check(lambda n: verdict)
    outcome = run(policy, robot, check)
    assert (outcome.reason, outcome.stopped_early, robot.holds) == ("completed", False, 0)
    assert len(robot.acted) == outcome.actions == 60 and outcome.error is None
    # every chunk answered was checked, each with the observation its request was made from
    assert 0 < outcome.chunks <= len(check.chunks) <= outcome.requests
    assert all(any(o is sent for sent in robot.observed) for o in check.observations)
    assert outcome.requests <= outcome.chunks + EngineConfig().max_in_flight
    assert threading.get_ident() not in check.threads and len(check.threads) == 1
    assert wait_gone(before) == set()


def play(engine: PlaybackEngine, observe: Callable[[], Observation], ticks: int) -> None:
    """Ticks one period apart on the engine's clock; every request answered before the next
    tick, so both engines below see the same refill latency, whatever the machine does."""
    period = 1 / 30
    for k in range(ticks):
        if engine.tick(k * period, observe).action is not None:
            engine.commit()
        if engine.in_flight:
            assert engine.wait_idle(HANG_GUARD_S)


def test_an_accepting_check_plays_the_same_plan_for_the_same_requests(policy: Policy) -> None:
    arm = SimulatedArm(MODEL, image_size=(32, 32))
    outcomes = []
    for check in (None, Check()):
        with PlaybackEngine(policy, EngineConfig(), validate_chunk=check) as engine:
            play(engine, arm.observe, 120)
            outcomes.append(engine.outcome(reason="completed", stopped_early=False))
    without, checked = outcomes
    assert checked.duty_cycle == without.duty_cycle == 1.0
    assert (checked.actions, checked.chunks, checked.requests, checked.underruns) == (
        without.actions,
        without.chunks,
        without.requests,
        without.underruns,
    )


# ---------------------------------------------------------------- refusing


@pytest.mark.timing
def test_a_refused_chunk_never_plays_a_step_and_the_run_holds_once(policy: Policy) -> None:
    robot, check = Robot(MODEL), Check(lambda n: n < 3)
    outcome = run(policy, robot, check, max_actions=200, config=RunConfig(handover="none"))
    assert (outcome.reason, outcome.stopped_early, robot.holds) == ("validate", True, 1)
    assert isinstance(outcome.error, ChunkRefused)
    assert "validate: validate_chunk returned False" in repr(outcome)
    assert len(check.chunks) == 3 and outcome.chunks == 2
    assert outcome.actions == len(robot.acted) > 0
    # with no hand-over every command is a row of a chunk played: of the first two only
    assert all(is_row_of(action, check.chunks[:2]) for action in robot.acted)
    assert not any(is_row_of(action, check.chunks[2:]) for action in robot.acted)


def test_a_refusal_with_a_reason_says_it(policy: Policy) -> None:
    def refuse(n: int) -> bool:
        raise ChunkRefused("fixture")

    robot = Robot(MODEL)
    outcome = run(policy, robot, Check(refuse))
    assert (outcome.reason, robot.holds, robot.acted) == ("validate", 1, [])
    assert repr(outcome).endswith("validate: fixture)")


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ((False, "why"), "tuple"),
        ("False", "str"),
        (None, "NoneType"),
        (1, "int"),
        (np.array([True]), "ndarray"),
    ],
)
def test_an_answer_other_than_a_boolean_refuses(policy: Policy, answer: object, named: str) -> None:
    robot = Robot(MODEL)
    outcome = run(policy, robot, Check(lambda n: answer))
    assert (outcome.reason, robot.holds, robot.acted) == ("validate", 1, [])
    assert isinstance(outcome.error, ChunkRefused)
    assert f"validate_chunk returned {answer!r:.60} {named}, not True or False" in str(
        outcome.error
    )


def test_a_check_that_never_answers_refuses_within_its_bound(policy: Policy) -> None:
    before = gate_threads()
    release = threading.Event()
    robot = Robot(MODEL)
    started = time.monotonic()
    try:
        # the stall bound is far away: only the check's bound can end this run
        outcome = run(
            policy,
            robot,
            Check(lambda n: release.wait()),
            chunk_validator_timeout_s=0.2,
            stall_timeout_s=30.0,
        )
        took = time.monotonic() - started
    finally:
        release.set()
    assert (outcome.reason, robot.holds, robot.acted) == ("validate", 1, [])
    assert "chunk check did not answer within 0.2 s" in repr(outcome)
    assert took < HANG_GUARD_S  # a hang guard, not a measurement
    assert wait_gone(before) == set()


def test_a_refusal_while_a_chunk_plays_ends_the_episode_on_the_next_tick(
    policy: Policy,
) -> None:
    """The steady ticks skip the harvest unless a request completed: a refused one counts."""
    arm, holds = SimulatedArm(MODEL, image_size=(32, 32)), []
    check = Check(lambda n: n < 2)
    engine = PlaybackEngine(policy, EngineConfig(), validate_chunk=check)
    episode = Episode(engine, max_actions=100, hold=lambda: holds.append(1))
    period = 1 / 30
    try:
        assert engine.tick(0.0, arm.observe).kind == "waiting"
        assert engine.wait_idle(HANG_GUARD_S)
        k = 1
        while engine.requests_started < 2:  # play chunk 1 until its refill starts
            tick = engine.tick(k * period, arm.observe)
            assert tick.kind == "action" and tick.chunk_seq == 1
            episode.commit()
            k += 1
        assert engine.wait_idle(HANG_GUARD_S)  # the refill answered and was refused
        with pytest.raises(ChunkRefused) as refused:
            engine.tick(k * period, arm.observe)
        assert engine.current_chunk is not None
        chunk, anchor = engine.current_chunk
        assert k * period < anchor + len(chunk) * period  # chunk 1 had steps left
        outcome = episode.stop(error=refused.value)
    finally:
        engine.close()
    assert outcome is not None and outcome.reason == "validate" and holds == [1]
    assert outcome.error is refused.value and outcome.chunks == 1


# ---------------------------------------------------------------- the caller's bugs


class Boom(Exception):
    pass


@pytest.mark.parametrize("error", [Boom, ValueError], ids=["Boom", "ValueError"])
def test_an_exception_from_the_check_propagates_after_one_hold(
    policy: Policy, error: type[Exception]
) -> None:
    """A ValueError too: a refill's ValueError otherwise means an observation not sent."""

    def fail(n: int) -> bool:
        if n == 2:
            raise error("the caller's bug")
        return True

    robot = Robot(MODEL)
    with pytest.raises(error, match="the caller's bug"):
        run(policy, robot, Check(fail), max_actions=200)
    assert robot.holds == 1 and len(robot.acted) > 0


def test_a_typed_error_from_the_check_is_not_retried(policy: Policy) -> None:
    """A transient error the check raises is its own, not the gateway's: never retried."""

    def fail(n: int) -> bool:
        raise Unavailable("the check's own")

    robot = Robot(MODEL)
    outcome = run(policy, robot, Check(fail))
    assert (outcome.reason, outcome.retries, robot.holds) == ("raised:Unavailable", 0, 1)


# ---------------------------------------------------------------- the setting and the episode


@pytest.mark.parametrize("bound", [0.0, -1.0, float("nan"), float("inf"), True, "1"])
def test_the_bound_is_positive_and_finite(bound: object) -> None:
    with pytest.raises(InvalidSetting) as info:
        RunConfig(chunk_validator_timeout_s=bound)  # type: ignore[arg-type]
    assert info.value.setting == "chunk_validator_timeout_s"
    assert EngineConfig().chunk_validator_timeout_s == 0.5


def test_the_episode_ends_a_refused_chunk_as_validate_for_both_drivers(policy: Policy) -> None:
    """``Episode.stop`` maps it, so the node, which stops its episode with the error the
    tick raised, ends on ``validate`` too."""
    holds: list[int] = []
    error = ChunkRefused("no")
    with PlaybackEngine(policy) as engine:
        episode = Episode(engine, max_actions=5, hold=lambda: holds.append(1))
        outcome = episode.stop(error=error)
        assert episode.stop(error=error) is None
    assert outcome is not None and (outcome.reason, outcome.error, holds) == (
        "validate",
        error,
        [1],
    )
