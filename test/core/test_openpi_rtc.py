"""Real-time-chunking requests against openpi's real ``WebsocketPolicyServer`` (PyPI
openpi-server) serving the simulator's ideal RTC policy (``sequence_ai_sim.rtc_peer``): the
keys reach the policy as sent, the prefix is what the engine then plays, answers that start
at the observation are cut, and without the setting nothing changes on the wire."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import pytest

import sequence_ai_core as sai
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.openpi import BUILTIN, load_profile, profile_from_mapping
from sequence_ai_core.playback.source import PlannedPrefix
from sequence_ai_sim.openpi_peer import PeerServer, TrajectoryPolicy, reference
from sequence_ai_sim.rtc_peer import RtcTrajectoryPolicy

pytestmark = pytest.mark.timeout(120)

HZ = 15.0
PERIOD_S = 1.0 / HZ
STAMP = ("observation/timestamp",)
DROID = dataclasses.replace(BUILTIN["droid"], timestamp_key=STAMP)
DROID_RTC = dataclasses.replace(load_profile("droid+rtc"), timestamp_key=STAMP)
OLD_KEYS = [
    "observation/exterior_image_1_left",
    "observation/gripper_position",
    "observation/joint_position",
    "observation/timestamp",
    "observation/wrist_image_left",
    "prompt",
]


def observation(stamp_ms: int | None = None) -> sai.Observation:
    stamp = round(time.time() * 1000) if stamp_ms is None else stamp_ms
    pixels = np.zeros((240, 320, 3), np.uint8)
    return sai.Observation(
        proprioception=sai.Proprioception(joint_positions=[0.1] * 7, gripper=0.25),
        images=[
            RawFrame("exterior_1", pixels, timestamp_ms=stamp),
            RawFrame("wrist_left", pixels, timestamp_ms=stamp),
        ],
        instruction="put the cup in the sink",
    )


def ideal(**settings: Any) -> RtcTrajectoryPolicy:
    return RtcTrajectoryPolicy(action_dim=8, control_hz=HZ, timestamp_key=STAMP, **settings)


def test_the_server_hands_the_policy_exactly_the_arrays_sent() -> None:
    nested = profile_from_mapping(
        {
            "name": "nested",
            "control_hz": HZ,
            "action_space": "joint_velocity",
            "action_dim": 8,
            "images": [],
            "state": [{"key": "state", "from": ["joint_positions", "gripper"], "size": 8}],
            "rtc": {"prefix_key": ["rtc", "prefix"], "delay_key": ["rtc", "delay"]},
        }
    )
    steps = np.random.default_rng(3).normal(size=(5, 8))
    peer = ideal(prefix_key=("rtc", "prefix"), delay_key=("rtc", "delay"))
    with PeerServer(peer) as server:
        with sai.connect(server.url, profile=DROID_RTC) as policy:
            policy.fetch(observation(), {}, planned=PlannedPrefix(steps, 7))
            policy.predict(observation())  # no engine: nothing planned
        with sai.connect(server.url, profile=nested) as policy:
            bare = dataclasses.replace(observation(), images=[])
            policy.fetch(bare, {}, planned=PlannedPrefix(steps[:2], 2))
    first, second, third = peer.received
    assert sorted(first) == sorted([*OLD_KEYS, "prev_chunk_left_over", "inference_delay"])
    prefix = first["prev_chunk_left_over"]
    assert type(prefix) is np.ndarray and prefix.dtype == np.float32 and prefix.shape == (5, 8)
    np.testing.assert_array_equal(prefix, steps.astype(np.float32))
    assert first["inference_delay"] == 7 and type(first["inference_delay"]) is int
    assert second["prev_chunk_left_over"].shape == (0, 8)
    assert second["prev_chunk_left_over"].dtype == np.float32
    assert second["inference_delay"] == 0
    assert sorted(third) == ["prompt", "rtc", "state"] and sorted(third["rtc"]) == [
        "delay",
        "prefix",
    ]
    np.testing.assert_array_equal(third["rtc"]["prefix"], steps[:2].astype(np.float32))
    assert third["rtc"]["delay"] == 2


def test_without_the_setting_the_server_sees_the_old_keys_only() -> None:
    peer = TrajectoryPolicy(action_dim=8, control_hz=HZ, timestamp_key=STAMP)
    planned = PlannedPrefix(np.ones((3, 8)), 4)
    with PeerServer(peer) as server, sai.connect(server.url, profile=DROID) as policy:
        assert policy.wants_planned is False
        policy.fetch(observation(), {}, planned=planned)
        policy.predict(observation())
    assert [sorted(obs) for obs in peer.received] == [OLD_KEYS, OLD_KEYS]


def test_the_ideal_policy_starts_where_the_prefix_ends_and_is_todays_peer_without_it() -> None:
    stamp_ms = 1_700_000_000_000
    t_obs = stamp_ms / 1000
    steps = reference(t_obs + np.arange(4) / HZ, 8) + 0.2  # a plan 0.2 off the reference
    peer = ideal(horizon=10)
    with PeerServer(peer) as server:
        with sai.connect(server.url, profile=DROID_RTC) as policy:
            carried = policy.fetch(observation(stamp_ms), {}, planned=PlannedPrefix(steps, 6))
        with sai.connect(server.url, profile=DROID) as policy:
            plain = policy.predict(observation(stamp_ms))
    ref = reference(t_obs + np.arange(16) / HZ, 8)
    # step i is due 6 + i periods after the observation: the plan's 0.2 carried along
    want = steps[-1] + ref[6:16] - ref[3]
    np.testing.assert_allclose(carried.action_chunk.steps, want, rtol=0, atol=1e-6)
    np.testing.assert_allclose(plain.action_chunk.steps, ref[:10], rtol=0, atol=1e-6)


def test_an_answer_from_the_observation_is_played_from_the_delay_on() -> None:
    chosen = dataclasses.replace(
        DROID_RTC, rtc=dataclasses.replace(DROID_RTC.rtc, answer_from="observation")
    )
    peer = ideal(horizon=10)
    ramp = np.repeat(np.arange(10, dtype=np.float32)[:, None], 8, axis=1)
    peer.answers[1] = lambda: {"actions": ramp}
    peer.answers[2] = lambda: {"actions": ramp[:3]}
    with PeerServer(peer) as server, sai.connect(server.url, profile=chosen) as policy:
        cut = policy.fetch(observation(), {}, planned=PlannedPrefix(np.zeros((3, 8)), 3))
        with pytest.raises(sai.InvalidResponse, match="3 steps, none after the 3-step delay"):
            policy.fetch(observation(), {}, planned=PlannedPrefix(np.zeros((3, 8)), 3))
    np.testing.assert_array_equal(cut.action_chunk.steps[:, 0], np.arange(3, 10))
    assert cut.action_chunk.covers_seconds == pytest.approx(7 / HZ)


def test_each_prefix_is_what_the_engine_then_plays() -> None:
    """The engine on openpi's real server (0.17 s inference, 10-step chunks at 15 Hz),
    ticked on a clock that advances one period per tick (slept in real time), so no tick is
    ever late: each prefix must be exactly the actions handed out from its observation's
    tick on. Checked where the lag (what anchors chunks) held still meanwhile."""
    peer = ideal(horizon=10, latency_s=0.17)
    ticks: dict[int, int] = {}  # observation stamp -> tick
    handed: list[np.ndarray[Any, Any] | None] = []
    lags: list[float] = []
    clock = {"now": 0.0}
    with PeerServer(peer) as server, sai.connect(server.url, profile=DROID_RTC) as policy:
        policy.predict(observation())  # the connection is open before the clock starts
        peer.received.clear()

        def observe() -> sai.Observation:
            stamp = round(time.time() * 1000)
            ticks[stamp] = len(handed)
            return observation(stamp)

        started = time.monotonic()
        with sai.PlaybackEngine(policy, sai.EngineConfig(), clock=lambda: clock["now"]) as engine:
            for n in range(150):
                clock["now"] = n * PERIOD_S
                time.sleep(max(0.0, started + n * PERIOD_S - time.monotonic()))
                tick = engine.tick(clock["now"], observe)
                if tick.action is not None:
                    engine.commit()
                handed.append(tick.action)
                lags.append(engine.lag_s)
    compared = 0
    for sent in peer.received:
        tick = ticks[round(float(sent["observation/timestamp"]) * 1000)]
        prefix, delay = sent["prev_chunk_left_over"], sent["inference_delay"]
        assert delay == round(lags[tick] / PERIOD_S) and len(prefix) <= delay
        window = range(tick, min(tick + len(prefix), len(handed)))
        if len(prefix) == 0 or any(lags[n] != lags[tick] for n in window):
            continue
        for j, n in enumerate(window):
            assert handed[n] is not None
            np.testing.assert_allclose(prefix[j], handed[n], rtol=0, atol=1e-6)
        compared += 1
    assert compared >= 5, (compared, len(peer.received))
