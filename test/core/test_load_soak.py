"""Load: many Policies on one queueing gateway never mix their chunks. Soak (``make soak``):
tens of thousands of chunks with flat memory and thread count.
"""

from __future__ import annotations

import gc
import statistics
import threading
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from support import TEST_KEY
from support.faultkit import camera_frames, wait_until

from sequence_ai_core.playback.engine_config import RunConfig
from sequence_ai_core.playback.stats import SampleWindow
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray, Observation, Prediction, Proprioception
from sequence_ai_sim import CATALOGUE, GatewaySimulator
from sequence_ai_sim.responses import chunk_values

MODEL = "lingbot-vla-v2-6b"
SIM_MODEL = CATALOGUE[MODEL]
ROBOTS = 8
NOISE = 0.05  # per-seed noise makes every robot's chunks tell-apart from the others'
#: 5-step chunks (0.17 s) at 30 Hz from 8 robots ask ~48 requests/s of two 50 ms workers
#: (~40/s): requests queue, each robot keeps several in flight, answers come back late.
HORIZON = 5
ACTIONS = 30


@dataclass
class Robot:
    """One control loop: its own Policy, seed and instruction; records what it saw."""

    index: int
    predictions: list[Prediction] = field(default_factory=list)
    actions: list[FloatArray] = field(default_factory=list)
    holds: int = 0
    outcome: Any = None
    error: BaseException | None = None

    @property
    def instruction(self) -> str:
        return f"robot-{self.index}"

    def observe(self) -> Observation:
        return Observation(
            Proprioception([0.1 * self.index] * 7),
            images=camera_frames(MODEL),
            instruction=self.instruction,
        )

    def drive(self, url: str, start: threading.Barrier, max_actions: int) -> None:
        try:
            with connect(MODEL, api_key=TEST_KEY, base_url=url) as policy:
                start.wait(timeout=10)
                self.outcome = policy.run(
                    self.observe,
                    lambda action: self.actions.append(action.copy()),
                    max_actions=max_actions,
                    validate=lambda action: True,
                    hold=self.hold,
                    on_chunk=self.predictions.append,
                    options={"seed": 1000 + self.index, "action_horizon": HORIZON},
                    # which chunk each action came from is what this checks, and the noisy
                    # chunks disagree: a hand-over's blend would be a step of no chunk at all
                    config=RunConfig(handover="none"),
                )
        except BaseException as error:  # surfaced by the test thread
            self.error = error

    def hold(self) -> None:
        self.holds += 1


def chunk_sequence(robot: Robot, received: dict[str, Any]) -> list[tuple[float, int]]:
    """(arrival of the chunk's request at the gateway, step) of every played action, looked
    up in this robot's own chunks only."""
    played = []
    for action in robot.actions:
        matches = [
            (float(received[prediction.request_id]["t"]), int(s))
            for prediction in robot.predictions
            for s in np.flatnonzero(np.all(prediction.action_chunk.steps == action, axis=1))
        ]
        assert matches, f"{robot.instruction} played an action from no chunk of its own"
        played.append(matches[0])
    return played


def test_eight_policies_on_two_workers_never_mix_chunks(clean_env: Any) -> None:
    threads_before = set(threading.enumerate())
    robots = [Robot(i) for i in range(ROBOTS)]
    sim = GatewaySimulator(
        api_key=TEST_KEY, latency_s=0.05, jitter=0.3, workers=2, action_noise=NOISE
    )
    with sim:
        start = threading.Barrier(ROBOTS)
        loops = [
            threading.Thread(target=r.drive, args=(sim.url, start, ACTIONS), name=f"load-{r.index}")
            for r in robots
        ]
        for loop in loops:
            loop.start()
        for loop in loops:
            loop.join(timeout=60)
        received = {record["request_id"]: record for record in sim.received}
        stats = sim.stats()
        assert wait_until(lambda: sim.stats()["open_connections"] == 0)
    for robot in robots:
        assert robot.error is None, repr(robot.error)
        assert robot.outcome.reason == "completed"
        assert robot.holds == robot.outcome.stalls  # one hold per underrun spell
        assert len(robot.actions) == robot.outcome.actions == ACTIONS
        for prediction in robot.predictions:
            record = received[prediction.request_id]
            assert record["observation"]["instruction"] == robot.instruction
            assert record["options"] == {"seed": 1000 + robot.index, "action_horizon": HORIZON}
            expected = chunk_values(
                SIM_MODEL,
                record["anchor_wall"],
                len(prediction.action_chunk),
                noise=NOISE,
                seed=1000 + robot.index,
            )
            assert np.array_equal(prediction.action_chunk.steps, expected)
        sequence = chunk_sequence(robot, received)
        # Never back to an older chunk or an earlier step. The same step may repeat: a tick
        # that lands in the slot already played (a late tick followed by an on-time one)
        # sends the current command again, which is what holding the slot means.
        assert sequence == sorted(sequence), "actions went back to an older chunk or step"
    connections = [
        {received[p.request_id]["connection"] for p in robot.predictions} for robot in robots
    ]
    for i, mine in enumerate(connections):
        for theirs in connections[i + 1 :]:
            assert not mine & theirs, "two Policies shared a connection"
    assert stats["act_requests"] >= ROBOTS * 3
    print(
        f"\nload: {ROBOTS} policies, {stats['act_requests']} requests on 2 workers, "
        f"up to {stats['max_queued']} queued, {sum(len(r.predictions) for r in robots)} chunks"
    )
    assert wait_until(lambda: set(threading.enumerate()) <= threads_before)


def test_sample_windows_are_bounded() -> None:
    window = SampleWindow(50)
    for i in range(10_000):
        window.add(float(i))
    assert len(window) == 50
    assert window.quantile(0.5) == pytest.approx(9974.5)


# ------------------------------------------------------------------ soak

SOAK_ACTIONS = 40_000
SOAK_HZ = 1000.0  # 2-step chunks at 1 kHz: a new chunk every 2 ms, ~400 chunks/s measured
SAMPLE_EVERY = 1000


@dataclass
class SoakProbe:
    sim: GatewaySimulator
    chunks: int = 0
    acted: int = 0
    samples: list[tuple[int, int, int]] = field(default_factory=list)  # (chunks, bytes, threads)

    def on_chunk(self, prediction: Prediction) -> None:
        self.chunks += 1

    def act(self, action: FloatArray) -> None:
        self.acted += 1
        if self.acted % SAMPLE_EVERY == 0:
            self.sim.clear_received()  # the simulator's request log is not the client's memory
            gc.collect()  # count what is still referenced, not garbage awaiting collection
            current, _ = tracemalloc.get_traced_memory()
            self.samples.append((self.chunks, current, threading.active_count()))


@pytest.mark.soak
def test_soak_memory_and_threads_stay_flat(clean_env: Any) -> None:
    observation = Observation(Proprioception([0.0] * 7), images=camera_frames(MODEL))
    threads_before = set(threading.enumerate())
    gc.collect()
    tracemalloc.start()
    started = time.monotonic()
    try:
        with GatewaySimulator(api_key=TEST_KEY, latency_s=0.0005) as sim:
            probe = SoakProbe(sim)
            with connect(MODEL, api_key=TEST_KEY, base_url=sim.url, control_hz=SOAK_HZ) as policy:
                outcome = policy.run(
                    lambda: observation,
                    probe.act,
                    max_actions=SOAK_ACTIONS,
                    validate=lambda action: bool(np.all(np.isfinite(action))),
                    on_chunk=probe.on_chunk,
                    options={"action_horizon": 2},
                )
            requests = sim.stats()["act_requests"]
    finally:
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    assert outcome.reason == "completed" and outcome.actions == SOAK_ACTIONS
    assert outcome.chunks >= 10_000
    # Past the 10,000-sample statistics windows, memory must not grow with chunks.
    settled = [s for s in probe.samples if s[0] >= 10_500]
    assert len(settled) >= 10
    # Medians of five samples each end: a 64 kB socket receive buffer in flight at one
    # sample would otherwise dominate the difference.
    early = statistics.median(s[1] for s in settled[:5])
    late = statistics.median(s[1] for s in settled[-5:])
    growth = late - early
    threads = {s[2] for s in probe.samples}
    first = probe.samples[0]
    print(
        f"\nsoak: {outcome.chunks} chunks played ({probe.chunks} received, {requests} "
        f"requests), {outcome.actions} actions in {elapsed:.0f}s; traced memory "
        f"{first[1] / 1e6:.2f} MB at {first[0]} chunks received, {early / 1e6:.2f} MB "
        f"around {settled[2][0]}, {late / 1e6:.2f} MB around {settled[-3][0]} (growth after "
        f"the 10,000-sample windows filled: {growth / 1e3:+.0f} kB); "
        f"threads {min(threads)}..{max(threads)}"
    )
    assert growth < 200_000, (
        f"memory grew {growth} bytes over {settled[-1][0] - settled[0][0]} chunks"
    )
    assert max(threads) - min(threads) <= 2
    assert wait_until(lambda: set(threading.enumerate()) <= threads_before)
