"""``Policy.run()``: bounded, paced, validated, and holding on every early stop."""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
from support import TEST_KEY
from support.sim_robot import Robot

from sequence_ai_core.errors import InvalidRequest, OutOfCredit, SequencesError
from sequence_ai_core.playback import runner
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import FloatArray, Observation, Prediction, Proprioception
from sequence_ai_sim import Fault, GatewaySimulator

MODEL = "lingbot-vla-v2-6b"  # 30 Hz: short runs


@pytest.fixture
def policy(sim: GatewaySimulator) -> Iterator[Policy]:
    with connect(MODEL, api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as p:
        yield p


def run(policy: Policy, robot: Robot, **kwargs: object) -> RunOutcome:
    kwargs.setdefault("validate", lambda a: True)
    observe = kwargs.pop("observe", robot.observe)
    return policy.run(observe, robot.act, hold=robot.hold, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def refill_threads() -> Callable[[], set[threading.Thread]]:
    """Refill workers started during the test and still alive (other tests' excluded)."""
    before = set(threading.enumerate())

    def alive() -> set[threading.Thread]:
        return {
            t
            for t in set(threading.enumerate()) - before
            if t.name.startswith("sequence-ai-refill")
        }

    return alive


def test_run_plays_exactly_max_actions_and_never_holds_on_completion(
    policy: Policy, refill_threads: Callable[[], set[threading.Thread]]
) -> None:
    robot = Robot(MODEL)
    outcome = run(policy, robot, max_actions=40)
    assert len(robot.acted) == 40 and outcome.actions == 40
    assert (outcome.reason, outcome.stopped_early, robot.holds) == ("completed", False, 0)
    assert outcome.error is None and outcome.action_space == "joint_velocity"
    assert outcome.chunks >= 3 and outcome.requests >= outcome.chunks
    assert all(a.shape == (7,) and np.all(np.isfinite(a)) for a in robot.acted)
    assert repr(outcome).startswith("RunOutcome(40 actions over ")
    assert repr(outcome).endswith(", completed)")
    assert refill_threads() == set()  # the engine is closed at the end


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, None])
def test_max_actions_must_be_a_positive_int(policy: Policy, bad: object) -> None:
    with pytest.raises(ValueError):
        run(policy, Robot(MODEL), max_actions=bad)


def test_max_actions_is_keyword_only_and_required(policy: Policy) -> None:
    robot = Robot(MODEL)
    with pytest.raises(TypeError):
        policy.run(robot.observe, robot.act)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        runner.run_policy(policy, robot.observe, robot.act, 5)  # type: ignore[call-arg]


def test_a_refused_action_stops_holds_once_and_is_never_acted(policy: Policy) -> None:
    robot = Robot(MODEL)
    seen: list[FloatArray] = []

    def validate(action: FloatArray) -> bool:
        seen.append(action)
        return len(seen) < 10

    outcome = run(policy, robot, max_actions=100, validate=validate)
    assert (outcome.reason, outcome.stopped_early, robot.holds) == ("validate", True, 1)
    assert len(robot.acted) == 9 and outcome.actions == 9
    np.testing.assert_array_equal(robot.acted[-1], seen[8])


class Boom(Exception):
    pass


def raiser(after: int) -> Callable[..., None]:
    calls = [0]

    def call(*args: object) -> None:
        calls[0] += 1
        if calls[0] > after:
            raise Boom()

    return call


@pytest.mark.parametrize("where", ["observe", "act", "validate", "on_chunk"])
def test_exceptions_from_caller_code_hold_once_then_propagate(
    policy: Policy, where: str, refill_threads: Callable[[], set[threading.Thread]]
) -> None:
    robot = Robot(MODEL)
    boom = raiser(after=2)
    kwargs: dict[str, object] = {"max_actions": 100}
    if where == "observe":

        def observe() -> Observation:
            boom()
            return robot.observe()

        kwargs["observe"] = observe
    elif where == "act":

        def act(action: FloatArray) -> None:
            boom()
            robot.act(action)

        kwargs["act"] = act
    elif where == "validate":

        def validate(action: FloatArray) -> bool:
            boom()
            return True

        kwargs["validate"] = validate
    else:
        kwargs["on_chunk"] = boom
    chosen: dict[str, Any] = {
        "observe": kwargs.pop("observe", robot.observe),
        "act": kwargs.pop("act", robot.act),
    }
    kwargs.setdefault("validate", lambda a: True)
    with pytest.raises(Boom):
        policy.run(chosen["observe"], chosen["act"], hold=robot.hold, **kwargs)  # type: ignore[arg-type]
    assert robot.holds == 1
    assert refill_threads() == set()


def test_an_exception_from_on_underrun_holds_once(sim: GatewaySimulator, policy: Policy) -> None:
    robot = Robot(MODEL)
    chunks: list[Prediction] = []
    with pytest.raises(Boom):
        run(
            policy, robot, max_actions=100, prefetch=False, on_underrun=raiser(after=0),
            on_chunk=chunks.append,
        )  # fmt: skip
    assert robot.holds == 1
    # one chunk, then the first underrun tick raised: its steps in order, each once, to the
    # last (a loaded machine's late tick may pass one over)
    (chunk,) = chunks
    assert _played_once_in_order(robot.acted, chunk.action_chunk.steps)


def test_a_typed_error_ends_the_run_with_its_outcome_and_holds_once(clean_env: object) -> None:
    robot = Robot(MODEL)
    with (
        GatewaySimulator(api_key=TEST_KEY, latency_s=0.02, credit=2) as sim,
        connect(MODEL, api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as policy,
    ):
        outcome = run(policy, robot, max_actions=500)
    assert outcome.reason == "raised:OutOfCredit" and outcome.stopped_early
    assert isinstance(outcome.error, OutOfCredit)
    # one hold for the end; a refill late on a loaded machine adds one per stall, never two
    # in a row (a run that ends inside a stall is already held)
    assert robot.holds >= 1 and outcome.stalls <= robot.holds <= outcome.stalls + 1
    assert outcome.actions == len(robot.acted) > 0
    assert "raised:OutOfCredit" in repr(outcome)


def test_mid_run_warming_stops_the_run(sim: GatewaySimulator, policy: Policy) -> None:
    robot = Robot(MODEL)
    chunks = [0]

    def on_chunk(prediction: object) -> None:
        chunks[0] += 1
        if chunks[0] == 1:
            sim.inject(Fault.warming(), times=10)

    outcome = run(policy, robot, max_actions=500, on_chunk=on_chunk, startup_timeout_s=30.0)
    assert outcome.reason == "raised:Unavailable"
    assert robot.holds >= 1 and outcome.stalls <= robot.holds <= outcome.stalls + 1
    assert 0 < outcome.actions < 500


def refused_while_running(
    policy: Policy, robot: Robot, second: Callable[[], object]
) -> tuple[RunOutcome, list[SequencesError]]:
    """Run ``policy.run`` and, while it is inside ``act``, ``second()`` on another thread;
    (the run's outcome, the ``SequencesError`` the second driver got, if any)."""
    inside, release = threading.Event(), threading.Event()
    refused: list[SequencesError] = []

    def act(action: FloatArray) -> None:
        inside.set()
        release.wait(10)

    def on_another_thread() -> None:
        inside.wait(10)
        try:
            second()
        except SequencesError as exc:
            refused.append(exc)
        finally:
            release.set()

    other = threading.Thread(target=on_another_thread)
    other.start()
    outcome = policy.run(robot.observe, act, max_actions=3, validate=lambda a: True)
    other.join(10)
    return outcome, refused


def test_a_second_thread_driving_the_same_policy_is_refused_at_once(policy: Policy) -> None:
    robot = Robot(MODEL)
    outcome, refused = refused_while_running(
        policy,
        robot,
        lambda: policy.run(robot.observe, robot.act, max_actions=5, validate=lambda a: True),
    )
    assert len(refused) == 1 and "another thread" in str(refused[0])
    assert outcome.reason == "completed" and robot.acted == []


def test_a_public_engine_and_a_run_on_one_policy_refuse_each_other(policy: Policy) -> None:
    """One buffer, two loops: the 0.1.0 client let both play and report success."""
    robot = Robot(MODEL)
    outcome, refused = refused_while_running(
        policy, robot, lambda: PlaybackEngine(policy, EngineConfig())
    )
    assert outcome.reason == "completed"
    assert len(refused) == 1 and "already driven" in str(refused[0])

    engine = PlaybackEngine(policy, EngineConfig())  # the run let go: the engine drives now
    try:
        with pytest.raises(SequencesError, match="already driven"):
            policy.run(robot.observe, robot.act, max_actions=3, validate=lambda a: True)
        with pytest.raises(SequencesError, match="already driven"):
            policy.next_action(robot.observe())
        assert robot.acted == []
    finally:
        engine.close()
    assert len(policy.predict(robot.observe()).action_chunk) > 0  # free once it closed


def test_closed_loop_requests_only_when_the_plan_is_empty(policy: Policy) -> None:
    robot = Robot(MODEL)
    outcome = run(policy, robot, max_actions=45, prefetch=False)
    # 15-step chunks, one request each: 3 of them, and one more for each 15 steps late ticks
    # passed over on a loaded machine (a step is played once or passed over, never replayed)
    played = outcome.actions + outcome.skipped_late
    assert outcome.requests == outcome.chunks == math.ceil(played / 15)
    assert outcome.underruns > 0 and outcome.stalls == outcome.chunks - 1
    assert outcome.skipped_stale == 0  # every closed-loop chunk starts from its first step


def test_running_without_validate_warns_once_per_process(
    policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "_warned_unvalidated", False)
    robot = Robot(MODEL)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy.run(robot.observe, robot.act, max_actions=2)
        policy.run(robot.observe, robot.act, max_actions=2)
    assert [str(w.message).startswith("run() without validate=") for w in caught] == [True]


def test_options_pass_through_to_the_gateway(sim: GatewaySimulator, policy: Policy) -> None:
    robot = Robot(MODEL)
    outcome = run(policy, robot, max_actions=12, options={"action_horizon": 6, "seed": 7})
    assert sim.received[0]["options"] == {"action_horizon": 6, "seed": 7}
    assert outcome.chunks >= 2  # 6-step chunks


@pytest.mark.timing
def test_a_cold_start_is_waited_out_only_with_a_startup_timeout(clean_env: object) -> None:
    for timeout_s, expected in [(0.0, "raised:Unavailable"), (10.0, "completed")]:
        robot = Robot(MODEL)
        with (
            GatewaySimulator(api_key=TEST_KEY, latency_s=0.02, cold_start_s=0.3) as sim,
            connect(MODEL, api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as p,
        ):
            outcome = run(p, robot, max_actions=20, startup_timeout_s=timeout_s)
        assert outcome.reason == expected
        # one hold per stop: the early end, or each underrun spell of a completed run
        assert robot.holds == (1 if expected != "completed" else outcome.stalls)
        if expected == "completed":
            assert outcome.retries >= 1 and len(robot.acted) == 20
        else:
            assert robot.acted == [] and outcome.error is not None


def test_an_interrupt_inside_act_holds_once_and_propagates(
    policy: Policy, refill_threads: Callable[[], set[threading.Thread]]
) -> None:
    robot = Robot(MODEL)

    def act(action: FloatArray) -> None:
        if len(robot.acted) == 5:
            raise KeyboardInterrupt
        robot.act(action)

    with pytest.raises(KeyboardInterrupt):
        policy.run(robot.observe, act, max_actions=50, hold=robot.hold, validate=lambda a: True)
    assert robot.holds == 1 and len(robot.acted) == 5
    assert refill_threads() == set()


def test_an_observation_the_client_refuses_ends_the_run_typed(policy: Policy) -> None:
    robot = Robot(MODEL)
    calls = [0]

    def observe() -> Observation:
        calls[0] += 1
        obs = robot.arm.observe()
        if calls[0] < 3:
            return obs
        joints = list(obs.proprioception.joint_positions)
        joints[2] = math.nan  # a glitching joint sensor
        return Observation(proprioception=Proprioception(joint_positions=joints))

    outcome = run(policy, robot, max_actions=500, observe=observe)
    # one hold for the refusal, and one for each underrun spell a loaded machine may add
    # before it (an action played since releases that hold, so the stop holds again)
    assert outcome.reason == "raised:InvalidRequest" and robot.holds == 1 + outcome.stalls
    assert isinstance(outcome.error, InvalidRequest)
    assert all(np.all(np.isfinite(a)) for a in robot.acted)


def _played_once_in_order(acted: list[FloatArray], steps: FloatArray) -> bool:
    """Each action is a step of ``steps``, in order, none twice, the last step last."""
    position = 0
    for action in acted:
        while position < len(steps) and not np.array_equal(action, steps[position]):
            position += 1
        if position == len(steps):
            return False
        position += 1
    return position == len(steps)
