"""A gateway on a fake clock for engine tests: exact, instant, deterministic.

``ClockGateway`` stands in for the engine's worker pool (the engine calls ``submit`` exactly as
it calls a ``ThreadPoolExecutor``'s). Requests are served first come, first served by
``workers`` model slots, each holding a slot for ``service(n)`` seconds; a request that finds
every slot busy waits, and the answer says how long, as the simulator's ``perf`` does. So
several engines sharing one ``ClockGateway`` queue behind each other the way robots on a
shared gateway do. Each chunk's values are the time its step stands for (observation time +
i/hz), so ``now - value`` is how far behind the plan plays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sequence_ai_core.errors import SequencesError
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.source import DriverGuard
from sequence_ai_core.types import ActionChunk, Observation, Prediction, Proprioception

LATENCY_S = 0.79


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ClockGateway(Executor):
    clock: Clock
    workers: int = 64
    service: Callable[[int], float] = lambda n: LATENCY_S
    #: Extra wait before a slot at a given time (other users' load), seconds.
    extra_wait: Callable[[float], float] = lambda t: 0.0
    #: An error to answer the n-th request with, or None.
    fail: Callable[[int], SequencesError | None] = lambda n: None
    requests: int = 0
    _slots: list[float] = field(default_factory=list)
    _queued: list[tuple[float, Future[Any], Any]] = field(default_factory=list)

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Like ``ThreadPoolExecutor.submit(fn, observation)``: ``fn`` (the engine's worker
        task) runs when the answer is due, and its policy is handed the answer to return."""
        (observation,) = args
        n, now = self.requests, self.clock.now
        self.requests += 1
        future: Future[Any] = Future()
        error = self.fail(n)
        if error is not None:
            self._queued.append((now + 0.05, future, error))
            return future
        if not self._slots:
            self._slots = [0.0] * self.workers
        slot = min(range(self.workers), key=lambda k: self._slots[k])
        start = max(now + self.extra_wait(now), self._slots[slot])
        service = self.service(n)
        self._slots[slot] = start + service
        meta = observation.proprioception
        hz, steps, space = meta.joint_velocities or (15.0, 15.0, 0.0)
        prediction = answer(
            observation,
            hz=hz,
            steps=int(steps),
            space=SPACES[int(space)],
            perf={"inference_ms": service * 1000, "queue_ms": (start - now) * 1000},
        )
        self._queued.append((start + service, future, (fn, observation, prediction)))
        return future

    def advance(self, now: float) -> None:
        self.clock.now = now
        for item in [q for q in self._queued if q[0] <= now + 1e-9]:
            self._queued.remove(item)
            if item[1].cancelled():
                continue
            if isinstance(item[2], SequencesError):
                item[1].set_exception(item[2])
                continue
            fn, observation, prediction = item[2]
            ANSWERS[id(observation)] = prediction
            try:
                item[1].set_result(fn(observation))
            except SequencesError as exc:
                item[1].set_exception(exc)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Drops what the closing engine left in flight; other engines' requests stay."""


SPACES = ("joint_absolute", "joint_velocity", "joint_delta")


def answer(
    observation: Observation, *, hz: float, steps: int, space: str, perf: Mapping[str, Any]
) -> Prediction:
    observed_at = observation.proprioception.joint_positions[0]
    values = observed_at + np.arange(steps, dtype=np.float64) / hz
    chunk = ActionChunk(np.repeat(values[:, None], 2, axis=1), "r", space, 2, hz, steps / hz)
    return Prediction(id="p", model="m", action_chunk=chunk, perf=dict(perf))


#: The answer ``ClockGateway`` made for an observation, until its policy returns it.
ANSWERS: dict[int, Prediction] = {}


class NoHttp:
    """The engine's policy: returns what ``ClockGateway`` answered (no HTTP)."""

    control_hz: float | None = None

    def __init__(self) -> None:
        self.guard = DriverGuard("NoHttp")

    def fetch(self, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        return ANSWERS.pop(id(observation))


@dataclass
class Robot:
    """One engine on the shared clock, with what it played."""

    engine: PlaybackEngine
    hz: float
    steps: int
    space: str
    clock: Clock
    lags: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    behind: list[float] = field(default_factory=list)
    staleness: list[float] = field(default_factory=list)
    in_flight: list[int] = field(default_factory=list)
    limits: list[int] = field(default_factory=list)
    ticks: list[float] = field(default_factory=list)

    def observe(self) -> Observation:
        meta = [self.hz, float(self.steps), float(SPACES.index(self.space))]
        return Observation(
            proprioception=Proprioception(joint_positions=[self.clock.now], joint_velocities=meta)
        )

    def tick(self, now: float) -> None:
        result = self.engine.tick(now, self.observe)
        if result.action is not None:
            self.engine.commit()  # it went out
            self.values.append(float(result.action[0]))
            self.behind.append(now - float(result.action[0]))
            self.staleness.append(result.staleness_s)
            self.lags.append(self.engine.lag_s)
            self.ticks.append(now)
        self.in_flight.append(self.engine.in_flight)
        self.limits.append(self.engine.in_flight_limit)

    def outcome(self) -> RunOutcome:
        return self.engine.outcome(reason="completed", stopped_early=False)


def robot(
    gateway: ClockGateway, hz: float, steps: int, space: str = "joint_absolute", **config: Any
) -> Robot:
    engine = PlaybackEngine(
        NoHttp(),
        EngineConfig(expected_covers_s=steps / hz, **config),
        clock=gateway.clock,
        executor=gateway,
    )
    return Robot(engine, hz, steps, space, gateway.clock)


def run_for(gateway: ClockGateway, robots: list[Robot], seconds: float) -> None:
    """Tick every robot at its own rate on the shared clock for ``seconds``."""
    ticks = sorted({(round(k / r.hz, 9), i) for i, r in enumerate(robots)
                    for k in range(int(seconds * r.hz))})  # fmt: skip
    for now, index in ticks:
        gateway.advance(now)
        robots[index].tick(now)


def drive(
    hz: float, steps: int, *, seconds: float, space: str = "joint_absolute", **config: Any
) -> Robot:
    """One robot alone on an unloaded gateway with a fixed 0.79 s refill."""
    gateway = ClockGateway(Clock())
    one = robot(gateway, hz, steps, space, **config)
    with one.engine:
        run_for(gateway, [one], seconds)
    return one
