"""Seams: what each hand-over strategy sends the arm where one chunk gives way to the next.

Every catalogue model at every disagreement level of the simulator (``none``, ``calibrated``,
``mode_switch``: ``sequence_ai_sim.disagreement``), at the gateway's 0.79 s refill and the
engine's default timing (``round_trip``), side by side for each ``EngineConfig.handover``
strategy plus (e), the cross-fade over a real overlap: refills started k periods earlier
(a subclass of the engine with a longer lead), so the old chunk still has k + 1 steps when
the new one starts, for n / (n - 1 - k) requests per chunk. Fixed-length blends (b, c, e)
last a third of a chunk; the rate-bound ones (d, d') add at most half the largest in-chunk
step to a step. The gripper (each model's last dimension) is excluded (``gripper_dims=1``).

The matrix runs on an exact clock with the simulator's own chunks (``_seam_clock``), so the
figures are the strategies' arithmetic; a second table repeats (a) and the default against
the real HTTP simulator in real time. Figures are defined in ``_seam_metrics``. Nothing here
asserts: the numbers are the result.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, cast

import numpy as np

from bench._common import BENCH_KEY, ROOT, counted, machine_note, quantile, results_dir, table
from bench._seam_clock import LATENCY_S, Record, episode
from bench._seam_metrics import Measured, measure
from bench._tapped import Tapped
from sequence_ai_core.action_spaces import seam_unit
from sequence_ai_core.playback.blends import fixed_steps
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.playback.engine_config import RunConfig
from sequence_ai_core.playback.handover import DEFAULT_HANDOVER, DEFAULT_HANDOVER_RATE, Handover
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.policy import connect
from sequence_ai_sim import CATALOGUE, DISAGREEMENT_LEVELS, GatewaySimulator, SimulatedArm

STRATEGIES = {
    "none": "(a) none",
    "fade": "(b) fade, compensated",
    "extrapolate": "(c) cross-fade, old chunk extrapolated",
    "slew": "(d) slew-limited",
    "smooth": "(d') smooth: cosine, slew-limited",
    "overlap": "(e) overlap cross-fade (refills k steps early)",
}
FIGURE = "seams.png"
FIGURE_MODELS = ("lingbot-va-5b", "pi05-droid")


def _overlapping(steps: int) -> type[PlaybackEngine]:
    class Overlapping(PlaybackEngine):
        """Refills start ``steps`` periods before the engine's own lead would start them."""

        def lead_s(self) -> float:
            return super().lead_s() + steps * (self.period_s or 0.0)

    return Overlapping


def setting(strategy: str, horizon: int) -> tuple[EngineConfig, type[PlaybackEngine]]:
    if strategy == "overlap":
        config = EngineConfig(handover="extrapolate", gripper_dims=1)
        return config, _overlapping(fixed_steps(0, horizon))
    return EngineConfig(handover=cast(Handover, strategy), gripper_dims=1), PlaybackEngine


def cell(model: str, level: str, strategy: str, runs: int, seconds: float) -> list[Record]:
    entry = CATALOGUE[model]
    config, engine_type = setting(strategy, entry.action_horizon)
    return [episode(entry, level, seed, seconds, config, engine_type) for seed in range(runs)]


def _pooled(measured: list[Measured], field: Callable[[Measured], list[float]]) -> list[float]:
    return [value for m in measured for value in field(m)]


def _off_plan(measured: list[Measured]) -> str:
    off = _pooled(measured, lambda m: m.off_plan)
    return f"{quantile(off, 0.95) * 1000:.0f} / {max(off) * 1000:.0f}"


def row(model: str, level: str, strategy: str, measured: list[Measured]) -> list[str]:
    steps = _pooled(measured, lambda m: m.seam_steps)
    lags = _pooled(measured, lambda m: [float(lag) for lag in m.lags])
    ended = sum(m.ended for m in measured)
    alone = sum(m.ended_in_chunk for m in measured)
    label = STRATEGIES[strategy] + (" **default**" if strategy == DEFAULT_HANDOVER else "")
    return [
        model,
        level,
        label,
        f"{max(steps):.2f}x / {quantile(steps, 0.95):.2f}x",
        f"{max(m.seam_jerk for m in measured):.0f}x",
        f"{quantile(lags, 0.5):.0f} / {quantile(lags, 0.95):.0f}",
        _off_plan(measured),
        f"{np.mean([m.requests_per_chunk for m in measured]):.2f} / "
        f"{np.mean([m.steady_requests_per_chunk for m in measured]):.2f}",
        f"{min(m.duty for m in measured):.1%}",
        f"{ended}/{len(measured)} ({alone})",
    ]


HEADERS = [
    "model",
    "disagreement",
    "hand-over",
    "seam step max / p95 (x largest in-chunk step)",
    "jerk at seams (x in-chunk)",
    "added lag p50 / p95 (periods)",
    "off plan p95 / max (mrad)",
    "requests per chunk: run / steady",
    "duty",
    "ended by max_step (by in-chunk motion alone)",
]


def goals(results: dict[tuple[str, str, str], list[Measured]]) -> str:
    """The default against the goals: calibrated, and no disagreement against (a)."""
    rows = []
    for model in CATALOGUE:
        cal = results[(model, "calibrated", DEFAULT_HANDOVER)]
        steps = _pooled(cal, lambda m: m.seam_steps)
        lags = _pooled(cal, lambda m: [float(lag) for lag in m.lags])
        steady = float(np.mean([m.steady_requests_per_chunk for m in cal]))
        calm = results[(model, "none", DEFAULT_HANDOVER)]
        plain = results[(model, "none", "none")]
        calm_steps = _pooled(calm, lambda m: m.seam_steps)
        plain_steps = _pooled(plain, lambda m: m.seam_steps)
        ended = sum(m.ended and not m.ended_in_chunk for m in cal)
        p95 = quantile(steps, 0.95)
        rows.append(
            [
                model,
                f"{p95:.2f}x ({'met' if p95 <= 1.5 else 'NOT met'})",
                f"{quantile(lags, 0.5):.0f} / {quantile(lags, 0.95):.0f}",
                f"{steady:.2f} ({'met' if steady <= 1.1 else 'NOT met'})",
                f"{ended}/{len(cal)}",
                f"{max(calm_steps):.2f}x against {max(plain_steps):.2f}x",
                f"{np.mean([m.steady_requests_per_chunk for m in calm]):.2f} against "
                f"{np.mean([m.steady_requests_per_chunk for m in plain]):.2f}",
            ]
        )
    headers = [
        "model",
        "calibrated: seam step p95 (goal <= 1.5x)",
        "added lag p50 / p95 (periods)",
        "steady requests per chunk (goal <= 1.1)",
        "episodes ended by max_step beyond in-chunk motion",
        "no disagreement: max seam step, default against (a)",
        "requests per chunk, default against (a)",
    ]
    return table(headers, rows)


RATES = (0.25, 0.5, 1.0, 2.0)


def rates(runs: int, seconds: float) -> str:
    """The default strategy at other rates: what a hand-over may add to a step, against how
    far a summed command's correction takes the arm off the plan meanwhile."""
    rows = []
    for model in CATALOGUE:
        entry = CATALOGUE[model]
        for rate in RATES:
            config = EngineConfig(gripper_dims=1, handover_rate=rate)
            measured = [
                measure(episode(entry, "calibrated", seed, seconds, config)) for seed in range(runs)
            ]
            steps = _pooled(measured, lambda m: m.seam_steps)
            lags = _pooled(measured, lambda m: [float(lag) for lag in m.lags])
            rows.append(
                [
                    model,
                    f"{rate:g}" + (" **default**" if rate == DEFAULT_HANDOVER_RATE else ""),
                    f"{max(steps):.2f}x / {quantile(steps, 0.95):.2f}x",
                    f"{quantile(lags, 0.5):.0f} / {quantile(lags, 0.95):.0f}",
                    _off_plan(measured),
                ]
            )
    headers = ["model", "handover_rate", "seam step max / p95", "lag p50 / p95", "off plan"]
    return table(headers, rows)


class _Recording(Tapped):
    """A player around the engine that keeps every command, for ``measure``."""

    def __init__(self, engine: PlaybackEngine, record: Record) -> None:
        super().__init__(engine)
        self.record = record

    def seen(self, result: Tick) -> None:
        if result.action is not None:
            r = self.record
            r.sent.append(result.action)
            r.raw.append(r.chunks[result.chunk_seq - 1][result.step_index])
            r.seq.append(result.chunk_seq)
            r.index.append(result.step_index)
            r.new_chunk.append(result.new_chunk)


def live(job: tuple[str, str, float, int]) -> tuple[str, str, Measured]:
    """One run against the HTTP simulator in real time, calibrated disagreement."""
    model, strategy, seconds, seed = job
    entry = CATALOGUE[model]
    record = Record(entry)
    with (
        GatewaySimulator(
            api_key=BENCH_KEY,
            latency_s=LATENCY_S,
            disagreement="calibrated",
            disagreement_seed=seed,
        ) as sim,
        connect(model, api_key=BENCH_KEY, base_url=sim.url, allow_insecure_http=True) as policy,
    ):
        config = RunConfig(handover=cast(Handover, strategy), gripper_dims=1)
        engine = PlaybackEngine(
            policy,
            config.with_catalogue(policy.describe()),
            on_chunk=lambda p: record.chunks.append(np.asarray(p.action_chunk.steps)),
        )
        arm = SimulatedArm(model)
        try:
            record.outcome = drive(
                _Recording(engine, record),
                arm.observe,
                arm.act,
                max_actions=int(seconds * entry.control_hz),
                validate=lambda action: bool(np.all(np.isfinite(action))),
            )
        finally:
            policy.cancel_requests()
            engine.close()
    return model, strategy, measure(record)


def live_table(models: tuple[str, ...], seconds: float) -> str:
    jobs = [(m, s, seconds, 3) for m in models for s in ("none", DEFAULT_HANDOVER)]
    context = multiprocessing.get_context("spawn")
    results: list[tuple[str, str, Measured]] = []
    for model in models:  # one model's runs at a time: more processes make ticks late
        mine = [job for job in jobs if job[0] == model]
        with ProcessPoolExecutor(max_workers=len(mine), mp_context=context) as pool:
            results += list(pool.map(live, mine))
    rows = [row(m, "calibrated", s, [measured]) for m, s, measured in results]
    return table(HEADERS, rows)


def figure(records: dict[tuple[str, str], Record], level: str, path: Path) -> None:
    """One joint through several seams, per strategy (rows) and model (columns)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        len(STRATEGIES), len(FIGURE_MODELS), figsize=(11, 2.0 * len(STRATEGIES)), sharex="col"
    )
    for column, model in enumerate(FIGURE_MODELS):
        entry = CATALOGUE[model]
        base = records[(model, "none")]
        raw = np.array(base.raw)[:, : entry.joint_count]
        seams = [t for t, new in enumerate(base.new_chunk) if new]
        start = seams[len(seams) // 3]
        span = slice(start - 3, start + int(2.5 * entry.control_hz))
        joint = int(np.argmax(np.max(np.abs(np.diff(raw[span], axis=0)), axis=0)))
        for line, strategy in enumerate(STRATEGIES):
            axis = axes[line][column]
            record = records[(model, strategy)]
            times = np.array(record.times)
            _plans(axis, record, span, joint)
            axis.plot(times[span], np.array(record.sent)[span][:, joint], color="C3", lw=1.4)
            axis.set_title(f"{model} joint {joint}: {STRATEGIES[strategy]}", fontsize=8)
            axis.set_xlim(times[span][0], times[span][-1])
            axis.grid(alpha=0.3)
        axes[-1][column].set_xlabel("s (grey: each chunk's own plan, all its steps; red: sent)")
        axes[len(STRATEGIES) // 2][column].set_ylabel(seam_unit(entry.action_space))
    fig.suptitle(f"Hand-over at each seam, disagreement {level}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _plans(axis: Any, record: Record, span: slice, joint: int) -> None:
    """Every step of each chunk played in ``span``, at the time it stood for."""
    period = 1.0 / record.model.control_hz
    first: dict[int, tuple[float, int]] = {}
    for now, seq, index in zip(record.times, record.seq, record.index, strict=True):
        first.setdefault(seq, (now, index))
    for seq in sorted(set(record.seq[span])):
        now, index = first[seq]
        rows = record.chunks[seq - 1]
        times = now + (np.arange(len(rows)) - index) * period
        axis.plot(times, rows[:, joint], color="0.6", lw=0.8)


def run(full: bool) -> str:
    # quick: the exact-clock matrix costs CPU in proportion to runs x seconds (4 x 30 s: about
    # 20 s), the real-time check its seconds and each model's processes' start
    runs, seconds = (10, 60.0) if full else (2, 15.0)
    started = time.monotonic()
    results: dict[tuple[str, str, str], list[Measured]] = {}
    rows, shown = [], {}
    for model in CATALOGUE:
        for level in DISAGREEMENT_LEVELS:
            for strategy in STRATEGIES:
                records = cell(model, level, strategy, runs, seconds)
                results[(model, level, strategy)] = measured = [measure(r) for r in records]
                rows.append(row(model, level, strategy, measured))
                if level == "mode_switch" and model in FIGURE_MODELS:
                    shown[(model, strategy)] = records[0]
    path = results_dir(full) / FIGURE
    figure(shown, "mode_switch", path)
    matrix_s = time.monotonic() - started
    live_models = tuple(CATALOGUE) if full else ("lingbot-va-5b",)
    live_seconds = 30.0 if full else 3.0
    checked = live_table(live_models, live_seconds)
    sizes = (
        f"{counted(runs, 'episode')} x {seconds:g} s per row; real time: "
        f"{counted(len(live_models), 'model')} x {live_seconds:g} s"
    )
    seams = [runs * round(seconds / m.covers_seconds - 1) for m in CATALOGUE.values()]
    quick = (
        ""
        if full
        else f" Quick run: {runs} episodes of {seconds:g} s, so a row's p95 rests on "
        f"{min(seams)} to {max(seams)} seams, and the real-time check is one model's."
    )
    return "\n\n".join(
        [
            "# Seams: hand-over between chunks that disagree",
            machine_note(full=full, sizes=sizes),
            __doc__.split("\n\n", 1)[1].strip() if __doc__ else "",
            f"{runs} episodes of {seconds:.0f} s of motion per row, fixed {LATENCY_S} s "
            "refill, exact clock. Seam step: the largest change between two commands from a "
            "seam to the end of its hand-over, over the largest step within any chunk of the "
            "episode (max over all seams / 95th percentile of seams). Lag: periods from a "
            "seam until the command stays within 10 % of the seam's offset of the newest "
            "plan (at most the periods to the next seam). Off plan: how far (position) the "
            "commands take the arm from where the played plan would. Steady requests: after "
            "the first 5 seams. max_step: 0.5 rad/s per step on velocity models "
            "(config/pi05_droid.yaml), twice the largest in-chunk step on lingbot-va-5b." + quick,
            table(HEADERS, rows),
            "### The default against the goals",
            goals(results),
            f"### The rate\n\n`{DEFAULT_HANDOVER}` at `calibrated` with other "
            "`handover_rate` values (what a hand-over may add to a step, as a fraction of "
            "the largest in-chunk step), same episodes. Summed commands (velocity models) "
            "trade seam steps against how far the correction takes the arm off the plan.",
            rates(runs, seconds),
            f"### Against the HTTP simulator in real time\n\n{live_seconds:.0f} s of motion "
            "per run, calibrated disagreement, (a) and the default side by side, one model's "
            "runs at a time.",
            checked,
            f"Figure: `{path.relative_to(ROOT)}` (one joint through several seams at "
            "`mode_switch`, every strategy).",
            f"_{len(rows) * runs} episodes on the exact clock in {matrix_s:.0f} s, "
            f"{2 * len(live_models)} real-time runs; {time.monotonic() - started:.0f} s wall._",
        ]
    )
