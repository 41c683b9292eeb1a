"""The chunk gate's cost: ``run()`` without a chunk check and with an accepting one.

A check of whole chunks (``run(validate_chunk=...)``) runs on the refill worker, so its time
is part of the refill latency that prefetch plans for; what it should cost is that time added
to each refill, not motion or requests. Both runs drive the same model against their own
simulator at the gateway's 0.79 s median refill (right-skewed jitter, the same seed), side by
side in processes of their own, started together; the check sleeps ~3 ms (a local service
call) and accepts. Nothing here asserts on time: the numbers are the result.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from bench._common import BENCH_KEY, machine_note, ms, quantile, ratio, table
from bench.continuity import MEDIAN_S
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import connect
from sequence_ai_core.types import ActionChunk, Observation
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm

#: The shortest chunk (0.5 s, under the refill): pipelined refills, the most seams per second.
MODEL = "lingbot-vla-v2-6b"
CHECK_S = 0.003
JITTER = 0.3  # lognormal sigma: p99 = 2x the median
#: Seconds of motion per run, and the seeds (one pair of runs each).
QUICK_SECONDS, QUICK_SEEDS = 6.0, (1,)
FULL_SECONDS, FULL_SEEDS = 40.0, (1, 2)
ROWS = {False: "no chunk check", True: f"validate_chunk, accepting, ~{CHECK_S * 1000:.0f} ms"}


@dataclass(frozen=True)
class Result:
    checked: bool
    outcome: RunOutcome
    check_s: list[float]

    @property
    def requests_per_chunk(self) -> float:
        """Requests answered (played or wasted) per chunk-length of motion; 1.0 is the floor
        (as in bench/continuity.py: the one in flight at the end is left out)."""
        entry = CATALOGUE[MODEL]
        chunks_of_motion = self.outcome.actions / entry.control_hz / entry.covers_seconds
        answered = self.outcome.chunks + self.outcome.wasted_requests
        return answered / max(chunks_of_motion, 1e-9)


def one_run(checked: bool, seconds: float, seed: int, start_at: float) -> Result:
    check_s: list[float] = []

    def check(chunk: ActionChunk, observation: Observation) -> bool:
        started = time.perf_counter()
        time.sleep(CHECK_S)
        ok = bool(np.all(np.isfinite(chunk.steps)))
        check_s.append(time.perf_counter() - started)
        return ok

    max_actions = int(seconds * CATALOGUE[MODEL].control_hz)
    time.sleep(max(0.0, start_at - time.time()))  # both processes imported: start together
    with (
        GatewaySimulator(api_key=BENCH_KEY, latency_s=MEDIAN_S, jitter=JITTER, seed=seed) as sim,
        connect(MODEL, api_key=BENCH_KEY, base_url=sim.url, allow_insecure_http=True) as policy,
    ):
        arm = SimulatedArm(MODEL)
        outcome = policy.run(
            arm.observe,
            arm.act,
            max_actions=max_actions,
            validate=lambda action: bool(np.all(np.isfinite(action))),
            validate_chunk=check if checked else None,
        )
    return Result(checked, outcome, check_s)


def measure(seconds: float, seeds: tuple[int, ...]) -> dict[bool, list[Result]]:
    """Per seed, both runs at once, each in a process of its own (runs sharing one
    interpreter would wait for each other's GIL)."""
    results: dict[bool, list[Result]] = {False: [], True: []}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        for n, seed in enumerate(seeds):
            start_at = time.time() + (1.5 if n == 0 else 0.3)
            futures = [pool.submit(one_run, c, seconds, seed, start_at) for c in (False, True)]
            for future in futures:
                result = future.result()
                results[result.checked].append(result)
    return results


def summary(results: list[Result]) -> dict[str, float]:
    outcomes = [r.outcome for r in results]
    answered = sum(r.requests_per_chunk * r.outcome.actions for r in results)
    actions = sum(o.actions for o in outcomes)
    return {
        "duty": float(np.mean([o.duty_cycle for o in outcomes])),
        "underruns": float(sum(o.underruns for o in outcomes)),
        "stalls": float(sum(o.stalls for o in outcomes)),
        "requests_per_chunk": answered / max(actions, 1),
        "latency_p95": float(np.mean([o.latency_p95_s for o in outcomes])),
        "latency_p50": float(np.mean([o.latency_p50_s for o in outcomes])),
        "check_p50": quantile([s for r in results for s in r.check_s], 0.5),
        "chunks": float(sum(o.chunks for o in outcomes)),
    }


def render(results: dict[bool, list[Result]], seconds: float, seeds: tuple[int, ...]) -> str:
    plain, checked = summary(results[False]), summary(results[True])
    rows = []
    for key, s in ((False, plain), (True, checked)):
        rows.append(
            [
                ROWS[key],
                f"{s['duty']:.1%}",
                f"{s['underruns']:.0f} ({s['stalls']:.0f} stalls)",
                f"{s['requests_per_chunk']:.2f}",
                f"{ms(s['latency_p50'], 0)} / {ms(s['latency_p95'], 0)}",
                "-" if key is False else ms(s["check_p50"], 1),
                f"{s['chunks']:.0f}",
            ]
        )
    rows.append(
        [
            "ratio (check / none)",
            ratio(checked["duty"], plain["duty"]),
            ratio(checked["underruns"], plain["underruns"]),
            ratio(checked["requests_per_chunk"], plain["requests_per_chunk"]),
            f"{ratio(checked['latency_p50'], plain['latency_p50'])} / "
            f"{ratio(checked['latency_p95'], plain['latency_p95'])}",
            "",
            ratio(checked["chunks"], plain["chunks"]),
        ]
    )
    headers = [
        "run",
        "duty",
        "underruns",
        "requests per chunk",
        "refill latency p50 / p95 ms",
        "check p50 ms",
        "chunks",
    ]
    entry = CATALOGUE[MODEL]
    runs = f"{len(seeds)} pair{'s' if len(seeds) > 1 else ''} of runs"
    return "\n\n".join(
        [
            "## Chunk gate: run() with and without validate_chunk",
            machine_note(full=len(seeds) > 1, sizes=f"{seconds:g} s of motion per run, {runs}"),
            f"{MODEL} ({entry.action_space}, {entry.covers_seconds:.2f} s chunks at "
            f"{entry.control_hz:g} Hz), refill {MEDIAN_S} s median (lognormal sigma {JITTER}), "
            f"{seconds:g} s of motion per run, {runs} (one seed each, both runs at once). "
            "Duty = share of the time since the first command that a command covered; requests "
            "per chunk = requests answered per chunk-length of motion (1.00 is the floor). Refill "
            "latency (observation to harvest) includes the check. Duty and latency are means "
            "over the runs, underruns and chunks totals.",
            table(headers, rows),
        ]
    )


def run(full: bool) -> str:
    seconds, seeds = (FULL_SECONDS, FULL_SEEDS) if full else (QUICK_SECONDS, QUICK_SEEDS)
    return render(measure(seconds, seeds), seconds, seeds)
