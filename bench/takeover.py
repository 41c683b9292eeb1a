"""Takeover and hand-back: how the policy resumes after a person had the arm, three ways.

A person takes the arm mid-episode, moves it ``DISTANCE`` rad away and lets go
(``_operator``); the policy resumes (``_takeover_run``): ours (``run(takeover=)``: the first
chunk after the release handed over from the arm's measured state), or one of two naive
resumes, the plan from before (the engine is never told; the driver only stops sending) and
a blend from the last policy command (``hand_back(start_from=)``). A velocity model
(lingbot-vla-v2-6b) and the absolute one (lingbot-va-5b), through the gateway simulator at
its ``calibrated`` disagreement, state-conditioned (a chunk starts where the arm was
observed), in real time. A model's three approaches run side by side, each in a process of
its own, started together, on the same seeds. Nothing here asserts: the numbers are the
result.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from bench._common import counted, machine_note, ms, quantile, ratio, table
from bench._operator import DISTANCE, MOVE_S, STILL_S
from bench._takeover_run import APPROACHES, FEW, JITTER, LATENCY_S, POLICY_S, Resume, RunResult
from bench._takeover_run import one_run as _one_run
from sequence_ai_sim import CATALOGUE

MODELS = ("lingbot-vla-v2-6b", "lingbot-va-5b")
LABELS = {
    "ours": "ours: hand-back from the measured state",
    "plan": "naive 1: the plan from before",
    "blend": "naive 2: a blend from the last policy command",
}
QUICK_TAKEOVERS, QUICK_SEEDS = 3, (1,)
FULL_TAKEOVERS, FULL_SEEDS = 10, (1, 2)


def measure(model: str, takeovers: int, seeds: tuple[int, ...]) -> list[RunResult]:
    """Per seed, the three approaches at once, each in a process of its own."""
    context = multiprocessing.get_context("spawn")
    results: list[RunResult] = []
    with ProcessPoolExecutor(max_workers=len(APPROACHES), mp_context=context) as pool:
        for n, seed in enumerate(seeds):
            start_at = time.time() + (2.0 if n == 0 else 0.3)
            jobs = [(model, a, seed, takeovers, start_at) for a in APPROACHES]
            results += [f.result() for f in [pool.submit(_one_run, *job) for job in jobs]]
    return results


def figures(resume: Resume) -> tuple[float, float, float]:
    """(resume jump, largest step in the first ``FEW`` commands, both in the chunk's
    largest in-chunk steps; seconds from the release to the first policy command)."""
    rows = np.vstack([resume.reference, *resume.commands])
    steps = np.max(np.abs(np.diff(rows, axis=0)), axis=1) / resume.in_chunk_step
    return float(steps[0]), float(np.max(steps)), resume.first_at - resume.released_at


def summary(results: list[RunResult]) -> dict[str, float]:
    resumes = [figures(r) for result in results for r in result.resumes]
    jumps, early, waits = (list(column) for column in zip(*resumes, strict=True))
    period = 1.0 / CATALOGUE[results[0].model].control_hz
    bound = float(np.mean([r.outcome.latency_p95_s for r in results])) + period
    return {
        "resumes": len(resumes),
        "jump_p50": quantile(jumps, 0.5),
        "jump_max": max(jumps),
        "early_p50": quantile(early, 0.5),
        "early_max": max(early),
        "wait_p50": quantile(waits, 0.5),
        "wait_max": max(waits),
        "bound": bound,
        "within": sum(wait <= bound for wait in waits),
    }


def rows(model: str, results: list[RunResult]) -> list[list[str]]:
    by = {a: summary([r for r in results if r.approach == a]) for a in APPROACHES}
    ours = by["ours"]
    out = []
    for approach, s in by.items():
        out.append(
            [
                model,
                LABELS[approach],
                f"{s['jump_p50']:.2f}x / {s['jump_max']:.2f}x",
                f"{s['early_p50']:.2f}x / {s['early_max']:.2f}x",
                f"{ms(s['wait_p50'], 0)} / {ms(s['wait_max'], 0)}",
                f"{ms(s['bound'], 0)}: {s['within']:.0f}/{s['resumes']:.0f}",
                ratio(s["jump_p50"], ours["jump_p50"]),
                ratio(s["wait_p50"], ours["wait_p50"]),
            ]
        )
    return out


HEADERS = [
    "model",
    "resume",
    "resume jump p50 / max (x in-chunk step)",
    f"largest step, first {FEW} commands p50 / max",
    "resume time p50 / max (ms)",
    "refill p95 + period (ms): resumes within",
    "jump p50 / ours",
    "resume time p50 / ours",
]


def engine_line(model: str, results: list[RunResult]) -> str:
    """What ours' own RunOutcomes reported."""
    outcomes = [r.outcome for r in results if r.approach == "ours"]
    return (
        f"{model}: {sum(o.takeovers for o in outcomes)} takeovers, "
        f"{sum(o.takeover_s for o in outcomes):.1f} s taken over, `max_resume_s` "
        f"{ms(max(o.max_resume_s for o in outcomes), 0)} ms, `max_resume_jump` "
        f"{max(o.max_resume_jump for o in outcomes):.2f}x; ended "
        f"{', '.join(sorted({o.reason for o in outcomes}))}."
    )


def render(results: dict[str, list[RunResult]], takeovers: int, seeds: tuple[int, ...]) -> str:
    body = [row for model in MODELS for row in rows(model, results[model])]
    runs = f"{counted(takeovers, 'takeover')} per run, {counted(len(seeds), 'seed')}"
    return "\n\n".join(
        [
            "## Takeover and hand-back: ours against two naive resumes",
            machine_note(full=len(seeds) > 1, sizes=runs),
            f"Each run: {POLICY_S:g} s of policy commands, then a person takes the arm, moves "
            f"every joint {DISTANCE:g} rad away over {MOVE_S:g} s, keeps it still "
            f"{STILL_S:g} s and lets go; {runs}. Refill {LATENCY_S} s median (lognormal sigma "
            f"{JITTER}), disagreement `calibrated`, state-conditioned chunks. Resume jump: the "
            "first policy command after the release against the arm then (its measured "
            "position for lingbot-va-5b, rest for lingbot-vla-v2-6b's speeds), arm joints, in "
            "the largest in-chunk step of that command's chunk (the goal: at most 1.0x). "
            f"Largest step: the same, over the first {FEW} commands, each against the one "
            "before. Resume time: from the moment the person let go to the first policy "
            "command; the goal: within the run's refill p95 plus one period.",
            table(HEADERS, body),
            "What ours' own `RunOutcome`s reported. Their resume time runs from the tick that "
            "saw the release, and their jump compares the first chunk's first step before "
            "hand-over (as `max_seam_jump` does): for speeds, the model's speed against rest, "
            "which the hand-over then ramps up from rest.",
            "\n".join(f"- {engine_line(model, results[model])}" for model in MODELS),
        ]
    )


def run(full: bool) -> str:
    takeovers, seeds = (FULL_TAKEOVERS, FULL_SEEDS) if full else (QUICK_TAKEOVERS, QUICK_SEEDS)
    results = {model: measure(model, takeovers, seeds) for model in MODELS}  # one at a time
    return render(results, takeovers, seeds)
