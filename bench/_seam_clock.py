"""The simulator's chunks on an exact clock, for ``bench/seams.py``.

``SimClockGateway`` stands in for the engine's worker pool (the engine submits to it as to a
``ThreadPoolExecutor``) and answers each request, one refill latency later on a fake clock,
with the chunk the gateway simulator would send: the same reference trajectory, anchored at
the observation's time, plus the same seeded disagreement draw
(``sequence_ai_sim.disagreement``), drawn in request order as the simulator draws without a
request seed. Everything else is the real engine. So the figures are the hand-over's and the
engine's arithmetic, not the machine's load (on 2 shared cores, late ticks move seams by a
step: bench/results/continuity.md); ``bench/seams.py`` checks them against the HTTP
simulator in real time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.source import DriverGuard
from sequence_ai_core.types import ActionChunk, FloatArray, Observation, Prediction, Proprioception
from sequence_ai_sim.catalogue import SimModel
from sequence_ai_sim.disagreement import draw, draw_key, resolve
from sequence_ai_sim.responses import chunk_values

#: Wall time of the fake clock's zero (any time: the reference is smooth everywhere).
WALL_ZERO = 1_700_000_100.0
LATENCY_S = 0.79


class _Answers:
    """The engine's source: hands back what the gateway computed for an observation."""

    control_hz: float | None = None

    def __init__(self) -> None:
        self.guard = DriverGuard("bench")
        self.ready: dict[int, Prediction] = {}

    def fetch(self, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        return self.ready.pop(id(observation))


@dataclass
class SimClockGateway(Executor):
    model: SimModel
    level: str
    seed: int
    latency: Callable[[int], float] = lambda n: LATENCY_S
    now: float = 0.0
    requests: int = 0
    source: _Answers = field(default_factory=_Answers)
    _queued: list[tuple[float, Future[Any], Any, Observation]] = field(default_factory=list)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        (observation,) = args
        n, self.requests = self.requests, self.requests + 1
        future: Future[Any] = Future()
        due = self.now + self.latency(n)
        self._queued.append((due, future, fn, observation))
        self.source.ready[id(observation)] = self._answer(n)
        return future

    def _answer(self, n: int) -> Prediction:
        model, anchor = self.model, WALL_ZERO + self.now
        steps = model.action_horizon
        disagreement = resolve(self.level)
        added = None
        if not disagreement.off:
            added = draw(disagreement, model, draw_key(self.seed, None, anchor, n)).added(
                model, anchor, steps
            )
        values = chunk_values(model, anchor, steps, noise=0.0, seed=None, disagreement=added)
        chunk = ActionChunk(
            values, model.robot, model.action_space, model.action_dim, model.control_hz,
            steps / model.control_hz,
        )  # fmt: skip
        return Prediction(id=f"c{n}", model=model.id, action_chunk=chunk)

    def advance(self, now: float) -> None:
        self.now = now
        for item in [q for q in self._queued if q[0] <= now + 1e-9]:
            self._queued.remove(item)
            _, future, fn, observation = item
            if not future.cancelled():
                future.set_result(fn(observation))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._queued.clear()


@dataclass
class Record:
    """One episode: every command and the plan's value behind it, tick by tick."""

    model: SimModel
    times: list[float] = field(default_factory=list)
    sent: list[FloatArray] = field(default_factory=list)
    raw: list[FloatArray] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    new_chunk: list[bool] = field(default_factory=list)
    chunks: list[FloatArray] = field(default_factory=list)
    outcome: RunOutcome | None = None
    requests: int = 0


def episode(
    model: SimModel,
    level: str,
    seed: int,
    seconds: float,
    config: EngineConfig,
    engine_type: type[PlaybackEngine] = PlaybackEngine,
) -> Record:
    """``seconds`` of motion of ``model`` at disagreement ``level``, one tick per period."""
    gateway = SimClockGateway(model, level, seed)
    record = Record(model)
    settings = replace(
        config, expected_covers_s=model.covers_seconds, expected_control_hz=model.control_hz
    )
    engine = engine_type(
        gateway.source,
        settings,
        clock=lambda: gateway.now,
        on_chunk=lambda p: record.chunks.append(np.asarray(p.action_chunk.steps)),
        executor=gateway,
    )

    def observe() -> Observation:
        return Observation(proprioception=Proprioception(joint_positions=[0.0] * model.joint_count))

    with engine:
        for k in range(int(seconds * model.control_hz) + int(2 * model.control_hz)):
            now = k / model.control_hz
            gateway.advance(now)
            tick = engine.tick(now, observe)
            if tick.action is None:
                continue
            engine.commit()
            record.times.append(now)
            record.sent.append(tick.action)
            record.raw.append(record.chunks[tick.chunk_seq - 1][tick.step_index])
            record.seq.append(tick.chunk_seq)
            record.index.append(tick.step_index)
            record.new_chunk.append(tick.new_chunk)
            if len(record.sent) >= seconds * model.control_hz:
                break
        record.outcome = engine.outcome(reason="completed", stopped_early=False)
        record.requests = gateway.requests
    return record
