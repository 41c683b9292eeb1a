"""One episode model for both drivers: ``run()`` and the node count, stop and hold alike.

The node drives ``Episode`` exactly as below (``PolicyNode.on_tick``): tick, then offer the
safety checks' verdict, commit what was published, ``empty_tick`` on a tick with nothing.
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Iterator

import pytest
from support import TEST_KEY
from support.engine_clock import Clock, ClockGateway, robot

from sequence_ai_core.errors import Stalled
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.engine_config import DEFAULT_STALL_TIMEOUT_S, RunConfig
from sequence_ai_core.playback.episode import Episode
from sequence_ai_core.playback.journal import Unrecorded
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import FloatArray
from sequence_ai_sim import GatewaySimulator, SimulatedArm

MODEL = "lingbot-vla-v2-6b"  # 30 Hz


@pytest.fixture
def policy(sim: GatewaySimulator) -> Iterator[Policy]:
    with connect(MODEL, api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as p:
        yield p


def node_style_episode(
    policy: Policy, arm: SimulatedArm, refuse_at: int, holds: list[str]
) -> Episode:
    """Drive an episode the way the node does, refusing the ``refuse_at``-th action."""
    engine = PlaybackEngine(policy, EngineConfig())
    episode = Episode(engine, max_actions=20, hold=lambda: holds.append("stop"))
    offered = 0
    deadline = time.monotonic() + 30.0
    try:
        while not episode.ended and time.monotonic() < deadline:
            tick = engine.tick(time.monotonic(), arm.observe)
            if tick.action is None:
                episode.empty_tick(tick.kind, time.monotonic())
                engine.wait_any(0.02)
                continue
            offered += 1
            verdict = "step change 1 > max_step 0.1 at index 0" if offered == refuse_at else None
            if episode.offer(verdict) and episode.commit():
                episode.stop("completed")
            time.sleep(1 / 30)
    finally:
        engine.close()
    return episode


@pytest.mark.parametrize("refuse_at", [1, 4])
def test_run_and_the_episode_count_the_same_when_an_action_is_refused(
    policy: Policy, refuse_at: int
) -> None:
    arm = SimulatedArm(MODEL, image_size=(32, 32))
    acted: list[FloatArray] = []
    run_holds: list[str] = []
    verdicts = iter([True] * (refuse_at - 1) + [False])
    outcome = policy.run(
        arm.observe,
        acted.append,
        max_actions=20,
        validate=lambda a: next(verdicts),
        hold=lambda: run_holds.append("stop"),
    )
    node_holds: list[str] = []
    episode = node_style_episode(policy, arm, refuse_at, node_holds)
    # the refused action went nowhere and is counted nowhere
    assert (outcome.reason, outcome.actions, len(acted)) == (
        "validate",
        refuse_at - 1,
        refuse_at - 1,
    )
    assert episode.outcome.reason == "validate" and episode.detail.startswith("step change")
    assert episode.actions == episode.outcome.actions == outcome.actions
    assert run_holds == node_holds == ["stop"]


def test_the_engine_counts_only_committed_actions() -> None:
    gateway = ClockGateway(Clock())
    one = robot(gateway, 15.0, 15)
    handed = 0
    with one.engine as engine:
        for k in range(60):
            now = k / 15.0
            gateway.advance(now)
            tick = engine.tick(now, one.observe)
            if tick.action is not None:
                handed += 1
                if handed <= 5:
                    engine.commit()
                if handed == 1:
                    with pytest.raises(RuntimeError, match="commit"):
                        engine.commit()  # one action counts once
        outcome = engine.outcome(reason="stopped", stopped_early=True)
    assert handed > 5 and outcome.actions == 5


def test_the_phase_is_the_engines_own() -> None:
    gateway = ClockGateway(Clock())
    one = robot(gateway, 15.0, 15, prefetch=False)  # closed loop: an underrun per chunk
    phases = []
    for k in range(60):
        now = k / 15.0
        gateway.advance(now)
        tick = one.engine.tick(now, one.observe)
        if tick.action is not None:
            one.engine.commit()
        phases.append(one.engine.phase)
        assert one.engine.snapshot()["state"] == one.engine.phase
    one.engine.close()
    seen = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] != p]
    assert seen[:4] == ["waiting", "playing", "underrun", "playing"]
    assert one.engine.phase == "closed"


def test_a_plan_that_stays_empty_ends_the_episode_stalled_with_one_hold() -> None:
    gateway = ClockGateway(Clock(), service=lambda n: 0.79 if n == 0 else 100.0)
    one = robot(gateway, 15.0, 15)
    holds: list[str] = []
    episode = Episode(
        one.engine,
        max_actions=1000,
        hold=lambda: holds.append("stop"),
        hold_underrun=lambda: holds.append("underrun"),  # the node's
        stall_timeout_s=RunConfig().stall_timeout_s,
    )
    stalled = None
    for k in range(200):
        now = k / 15.0
        gateway.advance(now)
        tick = one.engine.tick(now, one.observe)
        if tick.action is not None:
            assert episode.offer(None) and not episode.commit()
        else:
            stalled = episode.empty_tick(tick.kind, now)
            if stalled is not None:
                break
    assert isinstance(stalled, Stalled)
    outcome = episode.stop(error=stalled)
    assert outcome is not None and outcome.reason == "raised:Stalled"
    assert outcome.actions == episode.actions == 15
    assert episode.stop("estop") is None  # ended once
    assert holds == ["underrun", "stop"]  # one underrun hold per spell, one hold at the end
    one.engine.close()


def test_run_takes_one_run_config_and_its_keywords_win(
    sim: GatewaySimulator, policy: Policy
) -> None:
    arm = SimulatedArm(MODEL, image_size=(32, 32))
    config = RunConfig(options={"seed": 3}, stall_timeout_s=5.0)

    def run(**settings: object) -> str:
        outcome = policy.run(
            arm.observe, arm.act, max_actions=3, validate=lambda a: True, config=config, **settings
        )
        return outcome.reason

    assert run() == "completed" and sim.received[-1]["options"] == {"seed": 3}
    assert run(options={"seed": 4}) == "completed" and sim.received[-1]["options"] == {"seed": 4}
    with pytest.raises(ValueError, match="stall_timeout_s"):
        run(stall_timeout_s=0)
    with pytest.raises(TypeError):
        run(options=[("seed", 1)])


def test_episode_drive_run_and_the_node_share_one_stall_bound() -> None:
    """One default for every driver: a bounded one (an arm held on an empty plan forever is
    no safe default), the ``RunConfig`` field's; and one rule for a bound given."""
    from sequence_ai_ros.parameters import PARAMETERS

    default = RunConfig().stall_timeout_s
    node = next(spec.default for spec in PARAMETERS if spec.name == "stall_timeout_s")
    assert default == DEFAULT_STALL_TIMEOUT_S == node
    for call in (Episode, drive):
        assert inspect.signature(call).parameters["stall_timeout_s"].default == default
    engine = robot(ClockGateway(Clock()), 15.0, 15).engine
    for bound in (0, -1.0, math.inf, math.nan, None):
        with pytest.raises(ValueError) as episode:
            Episode(engine, max_actions=1, stall_timeout_s=bound)  # type: ignore[arg-type]
        with pytest.raises(ValueError) as config:
            RunConfig(stall_timeout_s=bound)  # type: ignore[arg-type]
        assert str(episode.value) == str(config.value)
    engine.close()


def test_an_episode_given_no_bound_ends_stalled_at_the_default() -> None:
    gateway = ClockGateway(Clock(), service=lambda n: 0.79 if n == 0 else 100.0)
    one = robot(gateway, 15.0, 15)
    episode = Episode(one.engine, max_actions=1000)
    stalled, last_action = None, 0.0
    for k in range(200):
        now = k / 15.0
        gateway.advance(now)
        tick = one.engine.tick(now, one.observe)
        if tick.action is not None:
            assert episode.offer(None) and not episode.commit()
            last_action = now
        else:
            stalled = episode.empty_tick(tick.kind, now)
            if stalled is not None:
                break
    one.engine.close()
    assert isinstance(stalled, Stalled) and episode.actions == 15
    assert DEFAULT_STALL_TIMEOUT_S < now - last_action <= DEFAULT_STALL_TIMEOUT_S + 2 / 15


class _BrokenJournal(Unrecorded):
    """A journal whose hold fails, noting what it was told and when."""

    def __init__(self, told: list[str]) -> None:
        self.told = told

    def hold(self, reason: str) -> None:
        self.told.append(f"journal:{reason}")
        raise RuntimeError("the journal failed")

    def outcome(self, outcome: RunOutcome) -> None:
        self.told.append(f"outcome:{outcome.reason}")


def test_a_failing_journal_never_comes_between_a_stop_and_its_one_hold(
    policy: Policy,
) -> None:
    """The hold goes out first, once; the journal is told after, and the outcome still."""
    told: list[str] = []
    with PlaybackEngine(policy, EngineConfig()) as engine:
        episode = Episode(
            engine, max_actions=5, hold=lambda: told.append("hold"), journal=_BrokenJournal(told)
        )
        with pytest.raises(RuntimeError, match="the journal failed"):
            episode.stop("estop")
        assert episode.stop("stopped") is None  # ended once: no second hold
    assert told == ["hold", "journal:estop", "outcome:estop"]
    assert episode.outcome.reason == "estop"
