"""Chunks that disagree, on the exact fake clock of ``engine_clock``, for hand-over tests.

``Scripted`` stands in for the engine's worker pool like ``engine_clock.ClockGateway`` does,
but answers request *n* with rows a test writes (``chunk(n, observed_at)``), so every seam's
offset is known exactly. ``play`` ticks one engine at its rate and keeps every tick.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.types import ActionChunk, FloatArray, Observation, Prediction, Proprioception
from support.engine_clock import ANSWERS, LATENCY_S, Clock, NoHttp

HZ = 10.0
STEPS = 10


@dataclass
class Scripted(Executor):
    clock: Clock
    chunk: Callable[[int, float], FloatArray]
    space: str = "joint_absolute"
    latency: Callable[[int], float] = lambda n: LATENCY_S
    requests: int = 0
    _queued: list[tuple[float, Future[Any], Any, Observation, Prediction]] = field(
        default_factory=list
    )

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        (observation,) = args
        n, self.requests = self.requests, self.requests + 1
        rows = np.asarray(self.chunk(n, self.clock.now), dtype=np.float64)
        chunk = ActionChunk(rows, "r", self.space, rows.shape[1], HZ, len(rows) / HZ)
        prediction = Prediction(id=f"p{n}", model="m", action_chunk=chunk)
        future: Future[Any] = Future()
        future.set_running_or_notify_cancel()  # a free worker takes it at once
        due = self.clock.now + self.latency(n)
        self._queued.append((due, future, fn, observation, prediction))
        return future

    def advance(self, now: float) -> None:
        self.clock.now = now
        for item in [q for q in self._queued if q[0] <= now + 1e-9]:
            self._queued.remove(item)
            _, future, fn, observation, prediction = item
            ANSWERS[id(observation)] = prediction
            future.set_result(fn(observation))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Requests still queued stay unanswered."""


@dataclass
class Played:
    ticks: list[tuple[float, Tick]]
    chunks: list[FloatArray]
    outcome: RunOutcome

    @property
    def actions(self) -> list[tuple[float, Tick]]:
        return [(now, t) for now, t in self.ticks if t.action is not None]

    def sent(self) -> FloatArray:
        return np.array([t.action for _, t in self.actions])

    def raw(self) -> FloatArray:
        return np.array([self.chunks[t.chunk_seq - 1][t.step_index] for _, t in self.actions])

    def seams(self) -> list[int]:
        """Positions in ``actions`` of each chunk's first command after another's."""
        return [k for k, (_, t) in enumerate(self.actions) if t.new_chunk and k > 0]


def play(
    gateway: Scripted,
    config: EngineConfig,
    seconds: float,
    probe: Callable[[PlaybackEngine, Tick], None] = lambda engine, tick: None,
) -> Played:
    """``seconds`` of ticks; ``probe`` sees the engine after each tick that played."""
    ticks: list[tuple[float, Tick]] = []
    chunks: list[FloatArray] = []
    settings = replace(config, expected_covers_s=STEPS / HZ, expected_control_hz=HZ)
    engine = PlaybackEngine(
        NoHttp(),
        settings,
        clock=gateway.clock,
        on_chunk=lambda p: chunks.append(np.asarray(p.action_chunk.steps)),
        executor=gateway,
    )

    def observe() -> Observation:
        return Observation(proprioception=Proprioception(joint_positions=[gateway.clock.now]))

    with engine:
        for k in range(round(seconds * HZ)):
            now = k / HZ
            gateway.advance(now)
            result = engine.tick(now, observe)
            if result.action is not None:
                engine.commit()
                probe(engine, result)
            ticks.append((now, result))
        outcome = engine.outcome(reason="completed", stopped_early=False)
    return Played(ticks, chunks, outcome)


def ramp(offsets: Callable[[int], FloatArray], gripper: Callable[[int], float] = lambda n: 0.5):
    """Chunk n: each arm dimension at ``observed_at + i/HZ`` (the same timeline for every
    chunk) plus ``offsets(n)``, then a gripper column at ``gripper(n)``."""

    def chunk(n: int, observed_at: float) -> FloatArray:
        arm = offsets(n)
        times = observed_at + np.arange(STEPS) / HZ
        rows = times[:, None] + arm[None, :]
        return np.hstack([rows, np.full((STEPS, 1), gripper(n))])

    return chunk
