"""The prefix the engine hands a real-time-chunking source with each request
(``playback.prefix``), on the fake clock of ``rtc_clock``: what it holds, where it stops,
and that it is what the engine then plays; and that other sources are called as before."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from support.rtc_clock import DIM, HZ, PERIOD_S, Run, drive, profile

import sequence_ai_core as sai
from sequence_ai_core.playback.source import DriverGuard, PlannedPrefix
from sequence_ai_sim.rtc_peer import RtcTrajectoryPolicy

STAMP = ("observation/timestamp",)


def ideal(horizon: int) -> RtcTrajectoryPolicy:
    return RtcTrajectoryPolicy(action_dim=DIM, control_hz=HZ, horizon=horizon, timestamp_key=STAMP)


def check_prefixes_play(run: Run) -> list[tuple[int, int, int]]:
    """Every request's prefix is what the engine played from its observation's tick on;
    returns (tick, prefix steps, delay) per request."""
    seen = []
    for tick, prefix, delay in run.requests():
        assert prefix.dtype == np.float32 and prefix.shape[1:] == (DIM,)
        assert isinstance(delay, int) and 0 <= len(prefix) <= delay
        assert delay == round(run.lags[tick] / PERIOD_S)  # the lag the plan anchors with
        for j, step in enumerate(prefix):
            played = run.actions[tick + j]
            assert played is not None
            np.testing.assert_allclose(step, played, rtol=0, atol=1e-6)
        seen.append((tick, len(prefix), delay))
    return seen


def test_nothing_planned_is_an_empty_prefix_and_no_delay() -> None:
    run = drive(ideal(20), profile(), latency_s=0.3, seconds=1.0)
    tick, prefix, delay = run.requests()[0]
    assert tick == 0 and prefix.shape == (0, DIM) and prefix.dtype == np.float32
    assert delay == 0  # the chunk plays from its first step when it lands; the arm is still


def test_one_request_out_the_prefix_is_the_whole_delay_and_is_what_plays() -> None:
    """0.8 s chunks, 0.3 s round trip: each refill starts when the chunk playing has a round
    trip left, so the prefix runs to where the new chunk starts (8 steps at 25 Hz)."""
    run = drive(ideal(20), profile(), latency_s=0.3, seconds=12.0)
    seen = check_prefixes_play(run)
    assert len(seen) >= 10
    for tick, steps, delay in seen[1:]:
        assert run.in_flight[tick] == 1  # this request alone
        assert steps == delay == 8
        # the new chunk took over right where the prefix ended
        assert run.new_chunk[tick + delay]


def test_several_out_the_prefix_stops_where_the_chunk_in_flight_starts() -> None:
    """0.48 s chunks, 0.79 s round trip: two requests are out at once. Each prefix holds the
    steps of the chunks received, up to where the chunk of the request before it is due to
    start; the delay still counts to this request's own chunk (20 steps at 25 Hz)."""
    run = drive(ideal(12), profile(), latency_s=0.79, seconds=12.0, expected_covers_s=12 / HZ)
    seen = check_prefixes_play(run)
    cut = 0
    for tick, steps, delay in seen:
        if steps == 0:
            continue  # the startup requests: nothing planned yet
        assert delay == 20 and steps < delay
        # the step after the prefix came from a chunk not received when it was sent
        assert run.new_chunk[tick + steps] or run.actions[tick + steps] is None
        cut += run.in_flight[tick] == 2
    assert cut >= 10


def test_a_source_without_the_keyword_is_called_as_before() -> None:
    """A source written for ``fetch(observation, options)``, and one that has ``planned`` but
    does not want it, are called with the two arguments only."""
    calls: list[tuple[Any, ...]] = []

    class Plain:
        control_hz = None

        def __init__(self, **extra: Any) -> None:
            self.guard = DriverGuard("plain")
            self.__dict__.update(extra)

        def fetch(self, observation: sai.Observation, options: Mapping[str, Any]) -> Any:
            calls.append((observation, options))
            return _prediction()

    class Declining(Plain):
        def fetch(  # type: ignore[override]
            self, observation: Any, options: Any, *, planned: PlannedPrefix | None = None
        ) -> Any:
            assert planned is None
            return super().fetch(observation, options)

    for source in (Plain(), Declining(wants_planned=False), Plain(wants_planned="yes")):
        calls.clear()
        with sai.PlaybackEngine(source, sai.EngineConfig()) as engine:  # type: ignore[arg-type]
            assert engine.tick(0.0, _observation).kind == "waiting"
            assert engine.wait_idle(5.0)
            engine.tick(0.01, _observation)
        assert len(calls) >= 1 and calls[0][1] == {}


def test_the_gateway_is_never_handed_the_prefix(sim: Any) -> None:
    from support import TEST_KEY

    observation = sai.Observation(
        proprioception=sai.Proprioception(joint_positions=[0.0] * 7, gripper=0.5),
        images=[],
    )
    planned = PlannedPrefix(np.zeros((3, 8)), 5)
    with sai.connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy:
        assert policy.wants_planned is False
        policy.fetch(observation, {}, planned=planned)
        policy.fetch(observation, {})
    with_prefix, without = sim.received
    assert with_prefix["options"] == without["options"] == {}
    assert with_prefix["observation"].keys() == without["observation"].keys()


def _observation() -> sai.Observation:
    return sai.Observation(proprioception=sai.Proprioception(joint_positions=[0.0, 0.0]))


def _prediction() -> sai.Prediction:
    chunk = sai.ActionChunk(np.zeros((5, 2)), "r", "joint_absolute", 2, 10.0, 0.5)
    return sai.Prediction(id="p", model="m", action_chunk=chunk)


@pytest.mark.parametrize("space", ["joint_velocity", "joint_delta"])
def test_velocity_and_delta_spaces_play_their_prefix_too(space: str) -> None:
    run = drive(ideal(20), _space(profile(), space), latency_s=0.3, seconds=6.0)
    assert len(check_prefixes_play(run)) >= 5


def _space(chosen: Any, space: str) -> Any:
    import dataclasses

    return dataclasses.replace(chosen, action_space=space)
