"""How late a tick's command reaches ``act`` when that tick also starts a request: the
drivers' order (``play``, the command, then ``refill``: ``observe``, its check and the
hand-off to a worker) against the order before it (the whole ``tick``, request included,
then the command), side by side on the same simulator and cameras (``overhead.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from bench._common import BENCH_KEY, ms, quantile, ratio, table
from bench._tapped import Tapped
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray, Observation
from sequence_ai_sim import SimModel

ORDERS = {"request first (the whole tick, then the command)": True,
          "command first (play, the command, refill)": False}  # fmt: skip


class CommandTiming(Tapped):
    """The engine as ``drive`` ticks it, in one order or the other, with how long after the
    tick began each command reached ``act`` and whether that tick started a request."""

    def __init__(
        self, engine: PlaybackEngine, observe: Callable[[], Observation | None], first: bool
    ) -> None:
        super().__init__(engine)
        self._observe, self.request_first = observe, first
        self.delays: list[tuple[float, bool]] = []  # (seconds to act, started a request)
        self._began, self._started = 0.0, 0
        self._acted: float | None = None

    def play(self, now: float) -> Tick:
        self._started, self._acted = self.engine.requests_started, None
        self._began = time.perf_counter()
        if self.request_first:
            return self.engine.tick(now, self._observe)
        return self.engine.play(now)

    def act(self, action: FloatArray) -> None:
        self._acted = time.perf_counter() - self._began

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        if not self.request_first:
            self.engine.refill(now, observe)
        if self._acted is not None:
            self.delays.append((self._acted, self.engine.requests_started > self._started))


def command_delays(
    url: str, model: SimModel, observe: Callable[[], Observation | None], actions: int,
    hz: float, repeats: int = 2,
) -> dict[str, list[tuple[float, bool]]]:  # fmt: skip
    """Each order ``repeats`` times, in turn; the delays of each order pooled."""
    out: dict[str, list[tuple[float, bool]]] = {name: [] for name in ORDERS}
    for _ in range(repeats):
        for name, first in ORDERS.items():
            with connect(model.short_id, api_key=BENCH_KEY, base_url=url, control_hz=hz) as p:
                config = EngineConfig(control_hz=hz, expected_covers_s=model.covers_seconds)
                with PlaybackEngine(p, config) as engine:
                    player = CommandTiming(engine, observe, first)
                    drive(
                        player, observe, player.act, max_actions=actions,
                        validate=lambda action: True,
                    )  # fmt: skip
            out[name] += player.delays
    return out


def render(delays: dict[str, list[tuple[float, bool]]]) -> str:
    rows, base = [], None
    for name, pairs in delays.items():
        requesting = [d for d, started in pairs if started]
        others = [d for d, started in pairs if not started]
        p99 = quantile(requesting, 0.99)
        base = p99 if base is None else base
        rows.append(
            [name, len(requesting), ms(quantile(requesting, 0.5), 2), ms(p99, 2),
             ms(float(np.max(requesting)), 2), ratio(p99, base), ms(quantile(others, 0.5), 2),
             ms(quantile(others, 0.99), 2)]
        )  # fmt: skip
    return table(
        ["order", "ticks starting a request", "to act p50 ms", "p99 ms", "max ms",
         "p99 ratio", "other ticks p50 ms", "other ticks p99 ms"],
        rows,
    )  # fmt: skip
