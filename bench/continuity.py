"""Continuity: how much of the time the arm moves, side by side for three refill strategies.

Against the simulator at a 0.79 s median refill (the real gateway's), for each catalogue
model: (a) refill when empty (``run(prefetch=False)``, the strictly closed loop); (b) one
request in flight started from an EMA-of-latency lead time, the new chunk replacing the old
from its first step (the predecessor client's behaviour, re-implemented in
``_ema_prefetch``); (c) this engine (``run()``). Then a jitter sweep (right-skewed latency up
to p99 = 2x median): underrun rate per chunk boundary for (b) and (c).

Every run has its own simulator, arm and process; one model's runs go in parallel. Quick
mode runs one model (``QUICK_MODELS``), shorter, at one jitter.
Nothing here asserts on time: the numbers are the result.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench._common import BENCH_KEY, ROOT, counted, machine_note, ratio, results_dir, table
from bench._ema_prefetch import EmaPrefetch
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.policy import connect
from sequence_ai_core.types import Prediction
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm

MEDIAN_S = 0.79
STRATEGIES = {
    "a": "(a) refill when empty",
    "b": "(b) 1 in flight, EMA lead",
    "c": "(c) engine (default)",
}
#: The frontier: every named engine setting besides the default (round trip, 3 in flight).
FRONTIER = {
    "r1": ("round_trip", 1),
    "r2": ("round_trip", 2),
    "f2": ("fresh", 2),
    "f3": ("fresh", 3),
    "f4": ("fresh", 4),
}
LABELS = {
    **STRATEGIES,
    **{k: f"{fresh}, max_in_flight={m}" for k, (fresh, m) in FRONTIER.items()},
}
FIGURE = "frontier.png"
#: Lognormal log-sigma -> p99/median = e^(2.326 sigma).
QUICK_JITTERS = (0.3,)
#: Quick mode's model: the shortest chunk (0.5 s, under the refill), where the strategies
#: differ most, and the most seams in a short run (a 3 s run of cosmos3 has one at most).
QUICK_MODELS = ("lingbot-vla-v2-6b",)
#: Chunk boundaries counted as a run's start in the jitter sweep: with one or two refills
#: measured nothing is known about the tail, and those stall most
#: (``sequence_ai_core.playback.timing``).
WARMUP = 5
FULL_JITTERS = (0.1, 0.2, 0.3)


@dataclass(frozen=True)
class Result:
    model: str
    strategy: str
    jitter: float
    outcome: RunOutcome
    in_chunk_step: float  # largest |step[i+1] - step[i]| over every chunk received
    #: Stalls that began once more than WARMUP chunks had arrived, and those boundaries.
    late_stalls: int = 0
    late_boundaries: int = 0

    @property
    def motion_s(self) -> float:
        return self.outcome.actions / CATALOGUE[self.model].control_hz

    @property
    def boundary_underrun_rate(self) -> float:
        return self.outcome.stalls / max(1, self.outcome.chunks - 1)

    @property
    def requests_per_chunk(self) -> float:
        """Requests answered (played or wasted) per chunk-length of motion; 1.0 is the floor.
        The one still in flight when the run ends is left out: it costs one request per
        run, not per chunk, and would read as +10 % in a ten-chunk run."""
        chunk_s = CATALOGUE[self.model].covers_seconds
        answered = self.outcome.chunks + self.outcome.wasted_requests
        return answered / max(self.motion_s / chunk_s, 1e-9)


Job = tuple[str, str, float, float, int]


def one_run(job: Job, start_at: float) -> Result:
    model, strategy, seconds, jitter, seed = job
    entry = CATALOGUE[model]
    in_chunk = [0.0]
    received = [0]
    stalled_after: set[int] = set()  # chunks received when a stall began (one per boundary)

    def on_underrun(gap_s: float) -> None:
        stalled_after.add(received[0])

    def on_chunk(prediction: Prediction) -> None:
        received[0] += 1
        steps = prediction.action_chunk.steps
        if len(steps) > 1:
            in_chunk[0] = max(in_chunk[0], float(np.max(np.abs(np.diff(steps, axis=0)))))

    max_actions = int(seconds * entry.control_hz)
    time.sleep(max(0.0, start_at - time.time()))  # every process imported: start together
    with (
        GatewaySimulator(api_key=BENCH_KEY, latency_s=MEDIAN_S, jitter=jitter, seed=seed) as sim,
        connect(model, api_key=BENCH_KEY, base_url=sim.url, allow_insecure_http=True) as policy,
    ):
        arm = SimulatedArm(model)
        if strategy == "b":
            player = EmaPrefetch(policy, on_chunk)
            try:
                # the baseline's stalls are measured to the end, not cut by run()'s bound
                outcome = drive(
                    player, arm.observe, arm.act, max_actions=max_actions, stall_timeout_s=seconds
                )
            finally:
                player.close()
        else:
            freshness, in_flight = FRONTIER.get(strategy, ("round_trip", 3))
            outcome = policy.run(
                arm.observe,
                arm.act,
                max_actions=max_actions,
                validate=lambda action: bool(np.all(np.isfinite(action))),
                prefetch=strategy != "a",
                on_chunk=on_chunk,
                on_underrun=on_underrun,
                freshness=freshness,
                max_in_flight=in_flight,
            )
    late = sum(1 for k in stalled_after if k > WARMUP)
    late_boundaries = max(0, outcome.chunks - 1 - WARMUP)
    return Result(model, strategy, jitter, outcome, in_chunk[0], late, late_boundaries)


class Runs:
    """Runs in processes of one pool, a batch at a time, every run of a batch in a process of
    its own: runs sharing one interpreter wait for each other's GIL (5 ms switch interval),
    which shows up as tick jitter and inflates seams. The processes are kept from batch to
    batch; a batch larger than any before waits for its new processes to import."""

    def __init__(self, pool: ProcessPoolExecutor) -> None:
        self.pool = pool
        self.started = 0

    def batch(self, jobs: list[Job]) -> list[Result]:
        warm = len(jobs) <= self.started
        self.started = max(self.started, len(jobs))
        start_at = time.time() + (0.3 if warm else 1.0 + 0.15 * len(jobs))
        futures = [self.pool.submit(one_run, job, start_at) for job in jobs]
        return [future.result() for future in futures]

    def by_model(self, jobs: list[Job]) -> list[Result]:
        """One model's runs at a time: all of them at once on 2 cores (12 to 20 processes)
        made ticks late enough to move the short chunks' seams by a step, which one run
        alone never showed (1.0x the in-chunk step, 4 runs of each)."""
        results: list[Result] = []
        for model in CATALOGUE:
            mine = [job for job in jobs if job[0] == model]
            if mine:
                results += self.batch(mine)
        return results


def models_of(results: list[Result]) -> list[str]:
    return [m for m in CATALOGUE if any(r.model == m for r in results)]


def pct(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.1%}"


def fixed_latency_table(results: list[Result]) -> str:
    rows = []
    for r in results:
        o = r.outcome
        covers = CATALOGUE[r.model].covers_seconds
        rows.append(
            [
                f"{r.model} ({covers:.2f} s)",
                STRATEGIES[r.strategy],
                pct(o.duty_cycle),
                o.underruns,
                f"{o.underrun_s:.2f}",
                f"{o.max_gap_s * 1000:.0f}",
                f"{o.max_seam_jump:.4f}",
                ratio(o.max_seam_jump, r.in_chunk_step),
                f"{o.staleness_p50_s:.2f} / {o.staleness_p95_s:.2f}",
                f"{r.requests_per_chunk:.2f}",
                o.skipped_late if r.strategy != "b" else "-",
            ]
        )
    headers = [
        "model (chunk)",
        "strategy",
        "duty",
        "underruns",
        "underrun s",
        "max gap ms",
        "max seam",
        "seam / largest in-chunk step",
        "staleness p50/p95 s",
        "requests per chunk of motion",
        "late-tick skips",
    ]
    return table(headers, rows)


def frontier_table(results: list[Result]) -> str:
    """Requests per chunk of motion against staleness, per model and engine setting."""
    by_key = {(r.model, r.strategy): r for r in results}
    rows = []
    for model in models_of(results):
        default = by_key[(model, "c")]
        for key in ["c", *FRONTIER]:
            r = by_key[(model, key)]
            o = r.outcome
            rows.append(
                [
                    model,
                    "**default** (round_trip, max_in_flight=3)" if key == "c" else LABELS[key],
                    f"{r.requests_per_chunk:.2f}",
                    ratio(r.requests_per_chunk, default.requests_per_chunk),
                    f"{o.staleness_p50_s:.2f}",
                    ratio(o.staleness_p50_s, default.outcome.staleness_p50_s),
                    pct(o.duty_cycle),
                    ratio(o.max_seam_jump, r.in_chunk_step),
                ]
            )
    headers = [
        "model",
        "setting",
        "requests per chunk",
        "vs default",
        "staleness p50 s",
        "vs default",
        "duty",
        "seam / in-chunk step",
    ]
    return table(headers, rows)


def frontier_figure(results: list[Result], path: Path) -> None:
    """Requests per chunk (x) against staleness p50 (y), one panel per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = models_of(results)
    fig, axes = plt.subplots(
        1, len(models), figsize=(4 * len(models), 3.6), sharey=True, squeeze=False
    )
    for axis, model in zip(axes[0], models, strict=True):
        for r in (r for r in results if r.model == model and r.strategy in ["c", *FRONTIER]):
            default = r.strategy == "c"
            x, y = r.requests_per_chunk, r.outcome.staleness_p50_s
            axis.scatter([x], [y], s=70 if default else 30, c="C3" if default else "C0")
            name = "default" if default else LABELS[r.strategy].replace("max_in_flight=", "M=")
            axis.annotate(name, (x, y), fontsize=7, xytext=(4, 3), textcoords="offset points")
        axis.set_title(f"{model} ({CATALOGUE[model].covers_seconds:.2f} s)", fontsize=9)
        axis.set_xlabel("requests per chunk of motion")
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel("staleness p50 (s)")
    fig.suptitle(f"Cost of freshness at a {MEDIAN_S} s refill", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _late(stalls: int, boundaries: int) -> str:
    return f"{stalls / max(1, boundaries):.1%} ({stalls}/{boundaries})"


def jitter_table(results: list[Result]) -> str:
    by_key = {(r.model, r.jitter, r.strategy): r for r in results}
    rows = []
    for model in models_of(results):
        for jitter in sorted({r.jitter for r in results}):
            b, c = by_key[(model, jitter, "b")], by_key[(model, jitter, "c")]
            rows.append(
                [
                    model,
                    f"{math.exp(2.326 * jitter):.2f}x",
                    f"{b.boundary_underrun_rate:.1%} ({b.outcome.stalls}/{b.outcome.chunks - 1})",
                    f"{c.boundary_underrun_rate:.1%} ({c.outcome.stalls}/{c.outcome.chunks - 1})",
                    _late(c.late_stalls, c.late_boundaries),
                    pct(b.outcome.duty_cycle),
                    pct(c.outcome.duty_cycle),
                    f"{c.requests_per_chunk:.2f}",
                ]
            )
    stalls = {s: sum(r.outcome.stalls for r in results if r.strategy == s) for s in "bc"}
    bounds = {s: sum(max(0, r.outcome.chunks - 1) for r in results if r.strategy == s)
              for s in "bc"}  # fmt: skip
    rows.append(
        ["**all**", "-"]
        + [f"**{stalls[s] / max(1, bounds[s]):.1%}** ({stalls[s]}/{bounds[s]})" for s in "bc"]
        + [
            "**"
            + _late(
                sum(r.late_stalls for r in results if r.strategy == "c"),
                sum(r.late_boundaries for r in results if r.strategy == "c"),
            )
            + "**"
        ]
        + ["-", "-", "-"]
    )
    headers = [
        "model",
        "p99 / median",
        "(b) underruns per boundary",
        "(c) underruns per boundary",
        f"(c) after the first {WARMUP} boundaries",
        "(b) duty",
        "(c) duty",
        "(c) requests per chunk",
    ]
    return table(headers, rows)


def run(full: bool) -> str:
    # quick: 3 s runs of one model at one jitter, 22 s (15 s runs of all four models at two
    # jitters took 270 s). A model's runs last as long as the slowest: (b) and
    # max_in_flight=1 move 65 % of the time on lingbot-vla-v2-6b, 0.8 s the first refill.
    seconds = 45.0 if full else 3.0
    jitters = FULL_JITTERS if full else QUICK_JITTERS
    models = tuple(CATALOGUE) if full else QUICK_MODELS
    # (a) moves 40-75 % of the time: half the motion keeps its wall time near the others'
    share = {"a": 0.5, "b": 1.0, "c": 1.0}
    fixed = [(m, s, seconds * share[s], 0.0, 1) for m in models for s in STRATEGIES]
    frontier = [(m, s, seconds, 0.0, 1) for m in models for s in FRONTIER]
    swept = [(m, s, seconds * 1.2, j, 7) for j in jitters for m in models for s in "bc"]
    started = time.monotonic()
    context = multiprocessing.get_context("spawn")
    largest = max(len(STRATEGIES), len(FRONTIER), 2 * len(jitters))  # one model's runs
    with ProcessPoolExecutor(max_workers=largest, mp_context=context) as pool:
        runs = Runs(pool)
        frontier_results = runs.by_model(frontier)  # first: most processes, started once
        fixed_results = runs.by_model(fixed)
        swept_results = runs.by_model(swept)
    figure = results_dir(full) / FIGURE
    frontier_figure(fixed_results + frontier_results, figure)
    steady = " / ".join(
        f"{100 * CATALOGUE[m].covers_seconds / (CATALOGUE[m].covers_seconds + MEDIAN_S):.0f}"
        for m in models
    )
    sizes = (
        f"{', '.join(models)}; {seconds:g} s of motion per run, {seconds * 1.2:g} s at "
        f"{counted(len(jitters), 'jitter level')}"
    )
    quick = (
        ""
        if full
        else f" Quick run: {', '.join(models)} only, {seconds:g} s runs of a few seams each: "
        "the seam and requests-per-chunk figures move more between runs than a full run's."
    )
    return "\n\n".join(
        [
            "# Continuity: time moving at a 0.79 s refill",
            machine_note(full=full, sizes=sizes),
            f"{seconds:g} s of motion per run ((a): {seconds * share['a']:g} s), fixed latency. "
            "Duty = time a command covered / time since the first command. Seam = largest "
            "per-dimension jump between the last step of one chunk and the first played step "
            "of the next. The simulator's chunks follow the capture time of the observation, "
            "which lags the tick by however long the process waited for a CPU: on a loaded "
            "machine that moves a seam by up to a step (on a quiet one (c) stays within the "
            "largest in-chunk step). A tick more than 3/4 period late plays the step due and "
            "skips one (last column). A closed-loop "
            "run of N chunks ends on a full chunk, so (a) reads high by about 1/N in short "
            f"runs; its steady state is covers / (covers + {MEDIAN_S} s): {steady} % in "
            "table order." + quick,
            fixed_latency_table(fixed_results),
            "### Frontier: requests against staleness\n\nThe same fixed 0.79 s refill, every "
            "named engine setting. Requests per chunk of motion = requests / (seconds moved "
            f"/ chunk length); 1.0 is the floor. Figure: `{figure.relative_to(ROOT)}`.",
            frontier_table(fixed_results + frontier_results),
            f"Jitter sweep: lognormal latency, median {MEDIAN_S} s, {seconds * 1.2:g} s of "
            "motion per run. Underrun rate = separate stalls / chunk boundaries; 'after the "
            f"first {WARMUP}' counts the stalls that began once more than {WARMUP} chunks had "
            "arrived, over the boundaries after them.",
            jitter_table(swept_results),
            f"_{len(fixed)}, {len(frontier)} then {len(swept)} runs, each model's in parallel, "
            f"{time.monotonic() - started:.0f} s wall._",
        ]
    )
