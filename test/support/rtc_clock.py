"""The openpi request path with real-time chunking on a fake clock: exact and deterministic.

The engine, a ``Policy`` over the real ``OpenpiBackend`` (profile encoding, msgpack-numpy
frame, answer checks) and the simulator's ideal RTC policy (``sequence_ai_sim.rtc_peer``);
only the websocket is replaced, by a direct call that decodes the frame and encodes the
answer with openpi's own ``msgpack_numpy``, and the worker pool by a queue answered a
fixed latency after each request starts. At 25 Hz every tick is a whole millisecond, so
the observation's image stamp (what the policy reads as its time) is the tick's time.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from openpi_client import msgpack_numpy

import sequence_ai_core as sai
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.openpi import Profile, profile_from_mapping
from sequence_ai_core.openpi.backend import OpenpiBackend
from sequence_ai_core.openpi.codec import unpackb
from sequence_ai_sim.rtc_peer import RtcTrajectoryPolicy

HZ = 25.0
PERIOD_S = 1.0 / HZ
DIM = 3
STAMP = "observation/timestamp"


def profile(*, rtc: Any = True, horizon: int | None = None) -> Profile:
    """A small user profile: one 8x8 camera, two joints, the observation's time, and the
    RTC keys when ``rtc`` is set."""
    return profile_from_mapping(
        {
            "name": "clock_arm",
            "control_hz": HZ,
            "action_space": "joint_absolute",
            "action_dim": DIM,
            "action_horizon": horizon,
            "images": [{"key": "cam", "view": "cam", "size": [8, 8]}],
            "state": [{"key": "state", "from": ["joint_positions"], "size": 2}],
            "timestamp_key": STAMP,
            "rtc": rtc,
        }
    )


class InProcessClient:
    """``OpenpiClient.exchange`` without the socket: openpi's ``msgpack_numpy`` decodes the
    frame for the policy, as ``WebsocketPolicyServer`` does, and encodes its answer."""

    base_url = "ws://in-process"
    closed = False

    def __init__(self, policy: RtcTrajectoryPolicy) -> None:
        self.policy = policy
        self.requests_sent = 0

    def exchange(self, frame: bytes) -> tuple[Any, str, float]:
        self.requests_sent += 1
        answer = self.policy.infer(msgpack_numpy.unpackb(frame))
        return unpackb(msgpack_numpy.packb(answer)), f"r-{self.requests_sent:08x}", 0.0

    def cancel_in_flight(self) -> int:
        return 0

    def close(self) -> None:
        pass


@dataclass
class LatencyPool(Executor):
    """The engine's worker pool: each task runs ``latency(n)`` seconds after the n-th request
    started (0-based), when ``advance`` reaches that time."""

    latency: Callable[[int], float]
    now: float = 0.0
    started: int = 0
    _queued: list[tuple[float, Future[Any], Any, Any]] = field(default_factory=list)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        (observation,) = args
        future: Future[Any] = Future()
        self._queued.append((self.now + self.latency(self.started), future, fn, observation))
        self.started += 1
        return future

    def advance(self, now: float) -> None:
        self.now = now
        for item in [q for q in self._queued if q[0] <= now + 1e-9]:
            self._queued.remove(item)
            _, future, fn, observation = item
            if future.cancelled():
                continue
            try:
                future.set_result(fn(observation))
            except sai.SequencesError as exc:
                future.set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        pass


@dataclass
class Run:
    """What one engine played, tick by tick, and what the policy was sent."""

    policy: RtcTrajectoryPolicy
    times: list[float] = field(default_factory=list)
    actions: list[np.ndarray[Any, Any] | None] = field(default_factory=list)
    new_chunk: list[bool] = field(default_factory=list)
    lags: list[float] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)

    def tick_of(self, time_s: float) -> int:
        return round(time_s / PERIOD_S)

    def seams(self) -> tuple[list[float], list[float]]:
        """(seam jumps, in-chunk steps): the largest per-dimension change from a chunk's last
        command to the next chunk's first (also across ticks without one, the arm held in
        between), and between consecutive commands of one chunk."""
        seams: list[float] = []
        steps: list[float] = []
        last = None
        for n, action in enumerate(self.actions):
            if action is None:
                continue
            if last is not None:
                jump = float(np.max(np.abs(action - last)))
                if self.new_chunk[n]:
                    seams.append(jump)
                elif self.actions[n - 1] is not None:
                    steps.append(jump)
            last = action
        return seams, steps

    def requests(self) -> list[tuple[int, np.ndarray[Any, Any], int]]:
        """(observation tick, prefix, delay) of each request, in the order sent."""
        return [
            (self.tick_of(float(obs[STAMP])), obs["prev_chunk_left_over"], obs["inference_delay"])
            for obs in self.policy.received
        ]


def drive(
    policy: RtcTrajectoryPolicy,
    chosen: Profile,
    *,
    latency_s: float | Callable[[int], float],
    seconds: float,
    **config: Any,
) -> Run:
    """Tick an engine at 25 Hz for ``seconds`` against ``policy`` behind ``chosen``."""
    latency = latency_s if callable(latency_s) else (lambda n: float(latency_s))
    pool = LatencyPool(latency)
    backend = OpenpiBackend(InProcessClient(policy), chosen)  # type: ignore[arg-type]
    run = Run(policy)
    pixels = np.zeros((8, 8, 3), np.uint8)

    def observe() -> sai.Observation:
        stamp = round(pool.now * 1000)
        return sai.Observation(
            proprioception=sai.Proprioception(joint_positions=[0.0, 0.0]),
            images=[RawFrame("cam", pixels, timestamp_ms=stamp)],
        )

    with sai.Policy(backend.model_name, backend) as source:  # type: ignore[arg-type]
        engine = sai.PlaybackEngine(
            source, sai.EngineConfig(**config), clock=lambda: pool.now, executor=pool
        )
        with engine:
            for n in range(round(seconds * HZ)):
                now = n * PERIOD_S
                pool.advance(now)
                tick = engine.tick(now, observe)
                if tick.action is not None:
                    engine.commit()
                run.times.append(now)
                run.actions.append(tick.action)
                run.new_chunk.append(tick.new_chunk)
                run.lags.append(engine.lag_s)
                run.in_flight.append(engine.in_flight)
    return run
