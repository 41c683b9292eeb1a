"""Where ``run()``'s control-thread CPU goes at one rate (``bench/overhead.py``).

Two views, side by side with the bare loop: the driver alone (``runner.drive`` and its
``Episode`` around a player that hands out a copy of a row, no engine), and the engine's own
ticks and commits inside a run like ``run()``'s, timed one by one and sorted by what the tick
did. A tick is put under the first of these that applies: a chunk arrived, a request started,
a chunk started (its seam's hand-over begins), a step went out with a hand-over's
correction, as planned, or nothing went out.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import numpy as np

from bench._common import BENCH_KEY, counted, us
from bench._common import table as markdown_table
from sequence_ai_core.playback.engine import PlaybackEngine, Tick
from sequence_ai_core.playback.engine_config import RunConfig
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.playback.stats import PlaybackStats
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray, Observation, Prediction
from sequence_ai_sim import SimModel

KINDS = ("arrival", "request", "seam", "hand-over step", "planned step", "nothing sent")


class RowPlayer:
    """A player that hands out a copy of the next row each tick: ``drive`` with no engine."""

    def __init__(self, rows: FloatArray, hz: float) -> None:
        self.period_s: float | None = 1.0 / hz
        self._rows = list(rows)
        self._next = 0

    def play(self, now: float) -> Tick:
        row, self._next = self._rows[self._next], self._next + 1
        return Tick(row.copy(), "action", 1, self._next, False, 0.0, now)

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        """Nothing to request."""

    def commit(self) -> None:
        """Nothing to count: the episode counts the actions."""

    def wait_any(self, timeout_s: float) -> bool:
        return False

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        return PlaybackStats().outcome(
            reason=reason, stopped_early=stopped_early, elapsed_s=0.0, action_space=None,
            retries=0, requests=0, error=None,
        )  # fmt: skip


class KindTimer:
    """The engine as ``drive`` ticks it, each tick's and commit's CPU recorded by kind."""

    def __init__(self) -> None:
        self.engine: PlaybackEngine | None = None
        self.cpu: dict[str, list[float]] = defaultdict(list)
        self._arrived = False
        self._tick = Tick(None, "waiting", 0, -1, False, 0.0)  # the last play's, and its CPU
        self._cpu = 0.0

    def chunk_arrived(self, prediction: Prediction) -> None:
        self._arrived = True  # the engine's on_chunk: called inside the tick that takes it in

    @property
    def period_s(self) -> float | None:
        return self._engine.period_s

    @property
    def _engine(self) -> PlaybackEngine:
        if self.engine is None:
            raise RuntimeError("no engine yet")
        return self.engine

    def play(self, now: float) -> Tick:
        self._arrived = False
        cpu = time.thread_time()
        self._tick = self._engine.play(now)
        self._cpu = time.thread_time() - cpu
        return self._tick

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        """Timed with the tick's ``play`` as one tick, and filed under its kind."""
        engine, started = self._engine, self._engine.requests_started
        cpu = time.thread_time()
        engine.refill(now, observe)
        cpu = self._cpu + time.thread_time() - cpu
        self.cpu[self._kind(self._tick, engine.requests_started > started)].append(cpu)

    def _kind(self, tick: Tick, requested: bool) -> str:
        if self._arrived:
            return "arrival"
        if requested:
            return "request"
        if tick.action is None or tick.chunk is None:
            return "nothing sent"
        if tick.new_chunk:
            return "seam"
        planned = np.asarray(tick.chunk.steps)[tick.step_index]
        return "planned step" if np.array_equal(tick.action, planned) else "hand-over step"

    def commit(self) -> None:
        cpu = time.thread_time()
        self._engine.commit()
        self.cpu["commit"].append(time.thread_time() - cpu)

    def wait_any(self, timeout_s: float) -> bool:
        return self._engine.wait_any(timeout_s)

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        return self._engine.outcome(reason=reason, stopped_early=stopped_early)


def engine_ticks(
    url: str, model: SimModel, observation: Observation, actions: int, hz: float
) -> tuple[KindTimer, RunOutcome]:
    """A run like ``run()``'s (its config, its checks, its driver) with each tick timed."""
    timer = KindTimer()
    with connect(model.short_id, api_key=BENCH_KEY, base_url=url, control_hz=hz) as policy:
        config = RunConfig().with_catalogue(policy.describe())
        with PlaybackEngine(policy, config, on_chunk=timer.chunk_arrived) as engine:
            timer.engine = engine

            def observe() -> Observation:
                policy.check_observation(observation)
                return observation

            outcome = drive(
                timer, observe, lambda action: None, max_actions=actions,
                validate=lambda action: True, stop_event=policy.closed_event,
            )  # fmt: skip
    return timer, outcome


def render_breakdown(
    loops: dict[str, float], floor: float, timer: KindTimer, outcome: RunOutcome, hz: float
) -> str:
    """The loops' CPU per action (``floor``: the bare loop's), then the engine's ticks and
    commits by kind."""
    rows = [[name, "1", "-", us(cpu), f"{cpu / floor:.2f}x"] for name, cpu in loops.items()]
    actions = outcome.actions
    for kind in (*KINDS, "commit"):
        samples = timer.cpu.get(kind, [])
        if samples:
            rows.append(
                [
                    f"engine: {kind}" if kind != "commit" else "engine: `commit` (counts it)",
                    f"{len(samples) / actions:.3f}",
                    us(float(np.median(samples))),
                    us(sum(samples) / actions),
                    f"{sum(samples) / actions / floor:.2f}x",
                ]
            )  # fmt: skip
    note = (
        f"{hz:g} Hz, {counted(actions, 'action')} ({outcome.chunks} chunks, "
        f"{outcome.requests} requests, {outcome.blended_seams} seams handed over)"
    )
    return note + "\n\n" + markdown_table(
        ["loop, or part of run()'s", "per action", "CPU µs each (p50)", "CPU µs per action",
         "vs floor"],
        rows,
    )  # fmt: skip
