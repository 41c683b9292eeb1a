"""Small helpers shared by the benchmarks: markdown tables, ratios, quantiles, a TLS cert.

Every benchmark compares approaches side by side in one run on the same machine, because
absolute times on a shared 2-core machine move by tens of percent between runs; the ratios
between columns measured together are what carries over.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import platform
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Key used by every benchmark's simulator; never a real credential.
BENCH_KEY = "sk-bench-0123456789abcdef"
RESULTS = Path(__file__).resolve().parent / "results"
ROOT = RESULTS.parents[1]


def results_dir(full: bool) -> Path:
    """Where a run's tables and figures go: a full run's to ``bench/results`` (the committed
    tables the README quotes), a quick run's to ``bench/results/quick`` (git-ignored), so
    that ``make bench`` never overwrites them with its shorter, noisier numbers."""
    path = RESULTS if full else RESULTS / "quick"
    path.mkdir(parents=True, exist_ok=True)
    return path


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of values, NaN when there are none."""
    if len(values) == 0:
        return float("nan")
    return float(np.quantile(np.asarray(values, dtype=np.float64), q))


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


def ratio(value: float, baseline: float) -> str:
    """`value / baseline` as text like ``0.31x``; a dash when it cannot be computed."""
    if not np.isfinite(value) or not np.isfinite(baseline) or baseline == 0:
        return "-"
    return f"{value / baseline:.2f}x"


def counted(count: int, noun: str) -> str:
    """``1 run``, ``3 runs``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def ms(seconds: float, digits: int = 1) -> str:
    return "-" if not np.isfinite(seconds) else f"{seconds * 1000:.{digits}f}"


def us(seconds: float, digits: int = 1) -> str:
    return "-" if not np.isfinite(seconds) else f"{seconds * 1e6:.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; numbers should already be formatted as text."""
    lines = [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_note(*, full: bool, sizes: str) -> str:
    """One line saying which mode and sizes produced the numbers (``sizes`` is formatted
    from the run's own parameters), and where and when they were taken."""
    mode = "full" if full else "quick"
    return (
        f"_run: {mode} ({sizes}); {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Compare columns within a "
        "table (measured together); absolute times vary between runs._"
    )


def timed(call: Callable[[], object], repeats: int) -> list[float]:
    """Wall seconds of each of `repeats` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def _serve(conn: Any, options: dict[str, Any]) -> None:
    from sequence_ai_sim import GatewaySimulator

    with GatewaySimulator(api_key=BENCH_KEY, **options) as sim:
        conn.send(sim.url)
        conn.recv()
        conn.send(sim.stats())


@contextlib.contextmanager
def simulator_process(**options: Any) -> Iterator[str]:
    """A ``GatewaySimulator`` in a process of its own (its threads must not share the GIL
    with the client being measured); yields its URL."""
    context = multiprocessing.get_context("spawn")
    here, there = context.Pipe()
    process = context.Process(target=_serve, args=(there, options), daemon=True)
    process.start()
    try:
        yield here.recv()
    finally:
        here.send("stop")
        here.recv()
        process.join(timeout=10)
