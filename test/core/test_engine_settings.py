"""Each run setting has one owner and one rule: the control rate, the control period, the
connection pool. The same rule holds for ``connect()``, ``run()`` and a ``PlaybackEngine``
built by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from support import TEST_KEY
from support.engine_clock import Clock, ClockGateway, NoHttp, Robot

from sequence_ai_core.playback.engine import PlaybackEngine
from sequence_ai_core.playback.engine_config import (
    DEFAULT_MAX_IN_FLIGHT,
    EngineConfig,
    InvalidSetting,
    RunConfig,
    connections_for,
)
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import Observation, Proprioception
from sequence_ai_sim import GatewaySimulator, SimulatedArm


@pytest.mark.parametrize("hz", [0.5, 0.0, -15.0, 1000.5, 2000.0, math.nan, math.inf])
def test_a_control_rate_outside_1_to_1000_hz_is_refused_alike_everywhere(
    sim: GatewaySimulator, hz: float
) -> None:
    refusals = []
    for build in (
        lambda: EngineConfig(control_hz=hz),
        lambda: RunConfig(control_hz=hz),
        lambda: connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=hz),
    ):
        with pytest.raises(InvalidSetting) as info:
            build()
        assert info.value.setting == "control_hz"
        refusals.append(str(info.value))
    assert refusals == [f"control_hz must be in [1, 1000] Hz, got {hz!r}"] * 3
    assert sim.stats()["requests"] == 0


@pytest.mark.parametrize("hz", [1.0, 15, 1000.0])
def test_the_bounds_of_the_control_rate_are_taken(sim: GatewaySimulator, hz: float) -> None:
    assert EngineConfig(control_hz=hz).control_hz == hz
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=hz) as policy:
        assert policy.control_hz == hz


def _observation() -> Observation:
    return Observation(proprioception=Proprioception(joint_positions=[0.0] * 7, gripper=0.5))


def _first_chunk(engine: PlaybackEngine, at: float) -> None:
    """The first request at t=0, answered (the simulator takes ~20 ms); it plays from ``at``."""
    assert engine.tick(0.0, _observation).kind == "waiting"
    assert engine.wait_idle(10.0)
    played = engine.tick(at, _observation)
    assert (played.kind, played.step_index) == ("action", 0)
    engine.commit()


def test_a_handles_rate_is_the_rate_a_hand_built_engine_plays_at(sim: GatewaySimulator) -> None:
    """``connect(control_hz=20)``: a ``PlaybackEngine`` on that handle plays pi05-droid's
    15 Hz chunks at 20 Hz, as ``run()`` on it does: step 2 is due 0.1 s after step 0."""
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=20.0) as policy,
        PlaybackEngine(policy, clock=lambda: 0.0) as engine,
    ):
        _first_chunk(engine, at=0.2)
        later = engine.tick(0.3, _observation)
        assert later.step_index == 2  # at the chunk's own 15 Hz it would be step 1
        assert engine.period_s == pytest.approx(1 / 20) and engine.config.control_hz == 20.0


def test_the_handles_rate_wins_over_the_configs(sim: GatewaySimulator) -> None:
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=20.0) as policy,
        PlaybackEngine(policy, EngineConfig(control_hz=30.0)) as engine,
    ):
        assert engine.config.control_hz == 20.0
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy,
        PlaybackEngine(policy, EngineConfig(control_hz=30.0)) as engine,
    ):
        assert engine.config.control_hz == 30.0


def test_the_engine_owns_the_period_from_the_catalogue_until_the_chunks_say_theirs(
    sim: GatewaySimulator,
) -> None:
    """Before the first chunk the period is the catalogue's (here a wrong 10 Hz, to tell
    them apart); from the first chunk on, the chunk's own 15 Hz."""
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy,
        PlaybackEngine(policy, EngineConfig(expected_control_hz=10.0)) as engine,
    ):
        assert engine.period_s == pytest.approx(0.1)
        _first_chunk(engine, at=0.2)
        assert engine.period_s == pytest.approx(1 / 15)


@pytest.mark.parametrize(
    ("config", "period"),
    [
        (EngineConfig(), None),  # no rate known: the first chunk will tell
        (EngineConfig(expected_control_hz=15.0), 1 / 15),
        (EngineConfig(control_hz=20.0, expected_control_hz=15.0), 1 / 20),
        (RunConfig(control_hz=20.0), 1 / 20),
    ],
)
def test_the_period_a_run_starts_at(config: EngineConfig, period: float | None) -> None:
    assert config.period_s == (pytest.approx(period) if period else None)


@pytest.mark.parametrize(
    ("config", "covers"),
    [
        (EngineConfig(), None),
        (EngineConfig(expected_covers_s=0.5), 0.5),  # no rate to compare with
        (EngineConfig(expected_covers_s=0.5, expected_control_hz=30.0), 0.5),
        (EngineConfig(expected_covers_s=0.5, expected_control_hz=30.0, control_hz=50.0), 0.3),
        (EngineConfig(expected_covers_s=0.5, expected_control_hz=30.0, control_hz=15.0), 1.0),
    ],
)
def test_a_chunk_covers_its_steps_at_the_rate_they_play(
    config: EngineConfig, covers: float | None
) -> None:
    assert config.played_covers_s == (pytest.approx(covers) if covers else None)


def test_chunks_played_faster_than_their_rate_join_up_from_the_first_action() -> None:
    """30 Hz chunks of 15 steps played at 50 Hz cover 0.3 s, less than the 0.32 s round trip:
    the startup refills are staggered by that, not by the catalogue's 0.5 s, which left the
    first chunk's successor one tick late (an underrun at every episode's start)."""
    gateway = ClockGateway(Clock(), service=lambda n: 0.32)
    config = EngineConfig(expected_covers_s=0.5, expected_control_hz=30.0, control_hz=50.0)
    robot = Robot(
        PlaybackEngine(NoHttp(), config, clock=gateway.clock, executor=gateway),
        30.0, 15, "joint_velocity", gateway.clock,
    )  # fmt: skip
    with robot.engine:
        for k in range(150):  # 3 s at 50 Hz
            gateway.advance(k / 50)
            robot.tick(k / 50)
        outcome = robot.outcome()
    assert robot.ticks[0] == pytest.approx(0.32)
    assert outcome.underruns == 0 and outcome.duty_cycle == 1.0
    assert len(robot.ticks) == 150 - 16  # every tick from the first action on played one


def test_the_catalogue_fills_what_a_config_leaves_open(sim: GatewaySimulator) -> None:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy:
        entry = policy.describe()
    filled = RunConfig(stall_timeout_s=5.0).with_catalogue(entry)
    assert isinstance(filled, RunConfig) and filled.stall_timeout_s == 5.0
    assert (filled.expected_control_hz, filled.expected_covers_s) == (15.0, 1.0)
    given = EngineConfig(expected_control_hz=30.0, expected_covers_s=0.5).with_catalogue(entry)
    assert (given.expected_control_hz, given.expected_covers_s) == (30.0, 0.5)
    no_rate = replace(entry, control_hz=0.0, action_horizon=0)
    assert EngineConfig().with_catalogue(no_rate) == EngineConfig()
    assert EngineConfig().with_catalogue(None) == EngineConfig()


def _run(policy: Policy, **settings: object) -> str:
    arm = SimulatedArm("pi05-droid", image_size=(32, 32))
    outcome = policy.run(
        arm.observe,
        arm.act,
        max_actions=3,
        validate=lambda a: True,
        **settings,  # type: ignore[arg-type]
    )
    return outcome.reason


@pytest.mark.parametrize("max_in_flight", [8, 9])
def test_run_refuses_more_refills_than_the_handles_pool_serves(
    sim: GatewaySimulator, max_in_flight: int
) -> None:
    """Each refill needs its own connection, and the catalogue one more: with 8
    connections a ninth refill, or an eighth beside the catalogue, would wait for one."""
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, max_connections=8) as policy,
        pytest.raises(InvalidSetting) as info,
    ):
        _run(policy, max_in_flight=max_in_flight)
    assert info.value.setting == "max_in_flight"
    message = str(info.value)
    assert f"is {max_in_flight}, which needs {max_in_flight + 1} connections" in message
    assert "max_connections=8" in message and "max_in_flight <= 7" in message
    assert sim.stats()["requests"] == 0  # refused before anything was sent


def test_run_takes_as_many_refills_as_the_pool_serves(sim: GatewaySimulator) -> None:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, max_connections=8) as policy:
        assert connections_for(7) == 8 == policy.max_connections
        assert _run(policy, max_in_flight=7) == "completed"
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy:
        assert connections_for(DEFAULT_MAX_IN_FLIGHT) <= policy.max_connections
        assert _run(policy) == "completed"  # the defaults agree


def test_a_sources_rate_meets_the_same_rule_and_a_refusal_leaves_it_free() -> None:
    """Any ``ChunkSource`` may state a rate; the engine checks it by the one rule before it
    claims the source, so a refused engine does not keep it."""
    source = NoHttp()
    source.control_hz = 2000.0
    with pytest.raises(InvalidSetting, match=r"control_hz must be in \[1, 1000\] Hz"):
        PlaybackEngine(source)
    source.control_hz = 50.0
    with PlaybackEngine(source) as engine:  # not "already driven"
        assert engine.config.control_hz == 50.0 and engine.period_s == pytest.approx(0.02)
