"""What one operation costs on a control thread right after its sleep, against the same warm.

A control loop sleeps most of each period; when it wakes, what it touches first runs with
cold caches. Each operation here is timed alone (the caller's thread CPU, ``thread_time``)
right after a sleep of one 200 Hz period, and again with no sleep before it; the empty row is
the cost of the timing itself. These are the figures the engine's why-comments and
docs/performance.md's control-thread section cite (``Tick`` a tuple, the seam measure in
plain Python, ``time.sleep`` for a control period rather than ``Event.wait``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np

from bench._common import machine_note, quantile, ratio, table
from sequence_ai_core.playback.plan import PlannedStep
from sequence_ai_core.playback.stats import largest_difference
from sequence_ai_core.types import FloatArray

PERIOD_S = 0.005


@dataclass(frozen=True)
class _Frozen:
    action: object
    kind: str
    chunk_seq: int
    step_index: int
    new_chunk: bool
    staleness_s: float


class _Tuple(NamedTuple):
    action: object
    kind: str
    chunk_seq: int
    step_index: int
    new_chunk: bool
    staleness_s: float


class _Attrs:
    def __init__(self) -> None:
        self.x, self.y = 0, 1


def _operations(pool: ThreadPoolExecutor) -> dict[str, Callable[[], object]]:
    a: FloatArray = np.arange(8, dtype=np.float64)
    b: FloatArray = a + 0.5
    attrs, event, nobody = _Attrs(), threading.Event(), cast(Any, None)

    def twenty_updates() -> None:
        for _ in range(20):
            attrs.x = attrs.y + 1

    return {
        "nothing (the timing itself)": lambda: None,
        "twenty attribute updates": twenty_updates,
        "a frozen dataclass of six fields": lambda: _Frozen(None, "action", 1, 2, False, 0.1),
        "a NamedTuple of six fields": lambda: _Tuple(None, "action", 1, 2, False, 0.1),
        "`plan.PlannedStep` (a slots dataclass)": lambda: PlannedStep(nobody, 1, a, a, False, 0, 0),
        "`np.max(np.abs(a - b))`, 8 values": lambda: float(np.max(np.abs(a - b))),
        "the same in plain Python (`stats.largest_difference`)": lambda: largest_difference(a, b),
        "a row's `.copy()`": a.copy,
        "`Event.wait(0)`": lambda: event.wait(0.0),
        "`ThreadPoolExecutor.submit`": lambda: pool.submit(int),
    }


def _median_us(operation: Callable[[], object], repeats: int, sleep_s: float) -> float:
    samples = []
    for _ in range(repeats):
        time.sleep(sleep_s)
        before = time.thread_time()
        operation()
        samples.append(time.thread_time() - before)
    return quantile(samples, 0.5) * 1e6


def run(full: bool) -> str:
    # quick: 50 samples (2.5 s of sleeps); two 300-sample runs' cold medians already differed
    # by 10 to 40 %, so quick mode tells which operations cost more, not by how much
    repeats = 2000 if full else 50
    with ThreadPoolExecutor(max_workers=1) as pool:
        operations = _operations(pool)
        rows = []
        for name, operation in operations.items():
            cold = _median_us(operation, repeats, PERIOD_S)
            warm = _median_us(operation, repeats, 0.0)
            rows.append([name, f"{cold:.1f}", f"{warm:.1f}", ratio(cold, warm)])
    return "\n\n".join(
        [
            "## Cold caches: one operation right after a control period's sleep",
            machine_note(full=full, sizes=f"{repeats} samples per operation, cold and warm"),
            f"Median CPU µs of each operation alone, right after a {PERIOD_S * 1000:g} ms "
            f"sleep (cold) and with no sleep before it (warm), {repeats} times each. Subtract "
            "the first row from the others for the operation itself."
            + ("" if full else " Quick run: cold medians move by tens of percent between runs."),
            table(["operation", "cold µs", "warm µs", "cold / warm"], rows),
        ]
    )
