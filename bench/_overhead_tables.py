"""The tables of ``bench/overhead.py``, from what it measured."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from bench._common import ms, ratio, us
from bench._common import table as markdown_table

#: The loops ``run_loop_overhead`` compares, as the tables name them.
LOOP_NAMES = {
    "run()": "`Policy.run()`",
    "driver": "`drive()` around a row player, no engine",
    "floor": "floor: sleep to deadlines, copy a row",
}


class Timed(Protocol):
    """Per tick: caller's-thread CPU and wall seconds, and whether it started a request."""

    cpu: list[float]
    wall: list[float]
    starts: list[bool]


def render_cpu(
    ticking: dict[str, tuple[float, float]],
    parsing: dict[str, float],
    ticks: int,
    repeats: int,
    period: float,
) -> str:
    tick_cpu, tick_wall = ticking["engine"]
    floor_cpu, floor_wall = ticking["floor"]
    parsed = parsing["parse_prediction"]
    rows = [
        [f"`PlaybackEngine.tick` + `commit`, pre-filled plan ({ticks:,} ticks)", us(tick_cpu),
         us(tick_wall), ratio(tick_cpu, floor_cpu), f"{tick_wall / period:.2%}"],
        ["floor: index a numpy array", us(floor_cpu), us(floor_wall), "1.00x",
         f"{floor_wall / period:.3%}"],
        [f"`json.loads` + `parse_prediction`, 15x8 chunk ({repeats:,} chunks)",
         us(parsed), "-", ratio(parsed, parsing["floor"]), "-"],
        ["floor: `json.loads` + `np.asarray`", us(parsing["floor"]), "-", "1.00x", "-"],
    ]  # fmt: skip
    return markdown_table(
        ["work", "CPU µs", "wall µs", "vs floor", f"of a {period * 1000:.0f} ms period"], rows
    )


def render_loop(looping: dict[float, dict[str, dict[str, float]]]) -> str:
    rows = []
    for hz, stats_by_loop in looping.items():
        floor = stats_by_loop["floor"]
        for name, stats in stats_by_loop.items():
            rows.append(
                [
                    f"{hz:g} Hz",
                    LOOP_NAMES[name],
                    us(stats["cpu_per_action"]),
                    ratio(stats["cpu_per_action"], floor["cpu_per_action"]),
                    ms(stats["jitter_p50"], 2),
                    ms(stats["jitter_p95"], 2),
                    ms(stats["jitter_max"], 2),
                    f"{stats['gaps']:.0f}",
                    f"{stats['underruns']:.0f}",
                ]
            )  # fmt: skip
    return markdown_table(
        ["rate", "loop", "CPU µs/action", "vs floor", "period error p50 ms", "p95 ms", "max ms",
         "gaps > 1.5 periods", "underruns"],
        rows,
    )  # fmt: skip


def render_cameras(cameras: Mapping[str, Timed], period: float) -> str:
    rows = []
    for name, player in cameras.items():
        cpu, wall, starts = np.array(player.cpu), np.array(player.wall), np.array(player.starts)
        for which, mask in (
            ("every tick", np.ones_like(starts)),
            ("ticks starting a request", starts),
        ):
            c, w = cpu[mask.astype(bool)], wall[mask.astype(bool)]
            if c.size == 0:
                continue
            rows.append(
                [
                    name, which, f"{c.size}",
                    ms(float(np.median(c)), 3), ms(float(c.max()), 3),
                    f"{c.max() / period:.1%}",
                    ms(float(np.quantile(w, 0.99)), 3), ms(float(w.max()), 3),
                ]
            )  # fmt: skip
    return markdown_table(
        ["frames", "ticks", "count", "CPU p50 ms", "CPU max ms", "CPU max / period",
         "wall p99 ms", "wall max ms"],
        rows,
    )  # fmt: skip


def render_memory(readings: list[tuple[int, float]]) -> str:
    base = readings[0][1]
    rows = [[f"{n:,}", f"{mb:.3f}", f"{(mb - base) * 1000:+.0f}"] for n, mb in readings]
    return markdown_table(["chunks played", "traced MB", "kB since 100 chunks"], rows)
