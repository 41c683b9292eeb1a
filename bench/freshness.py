"""Freshness and seams on the absolute-space model: how old, how jumpy, how far off.

The three refill strategies of ``bench/continuity.py`` (refill when empty; one request in
flight with an EMA lead, new chunk from its first step; this engine) drive lingbot-va-5b
(joint positions, 0.64 s chunks) at the gateway's 0.79 s median refill. Besides staleness and
seam jump, every command is compared with where the simulator's reference trajectory is at
the moment it is sent (``reference_position(model, time.time())``): the tracking error a
stale or replayed plan shows up as on a real arm. Row (c') is the engine with
``freshness="fresh"`` (the smallest sustainable lag, more requests) for comparison.

A second table repeats the runs against a state-conditioned simulator: each chunk starts
at the joint positions the observation reported and moves as the reference does from
there, as a real policy predicting from the arm's state would. A plan played ``lag``
seconds late then jumps back by about lag x joint speed at every swap.
"""

from __future__ import annotations

import itertools
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from bench._common import BENCH_KEY, machine_note, mean, quantile, ratio
from bench._common import table as markdown_table
from bench._ema_prefetch import EmaPrefetch
from bench.continuity import MEDIAN_S, STRATEGIES
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm, reference_position

MODEL = "lingbot-va-5b"
#: Seconds of motion per strategy. The figure uses the same runs (see record_strategies).
#: Quick: (a) moves 45 % of the time, so 3 s of its motion take 7 s; 8 s took 20 s a table.
QUICK_SECONDS, FULL_SECONDS = 3.0, 20.0
#: The strategies of this table: continuity's three plus the engine at round-trip lag.
ROWS = {**STRATEGIES, "r": "(c') engine, freshness=fresh"}


@dataclass(frozen=True)
class Command:
    wall: float  # time.time() when sent
    monotonic: float
    action: FloatArray


@dataclass(frozen=True)
class Recording:
    model: str
    strategy: str
    outcome: RunOutcome
    commands: list[Command]


def record_run(
    model: str,
    strategy: str,
    seconds: float,
    *,
    jitter: float = 0.0,
    seed: int = 1,
    state_conditioned: bool = False,
) -> Recording:
    """One run of a strategy of ``ROWS`` with every command time-stamped."""
    commands: list[Command] = []
    max_actions = int(seconds * CATALOGUE[model].control_hz)
    with (
        GatewaySimulator(
            api_key=BENCH_KEY,
            latency_s=MEDIAN_S,
            jitter=jitter,
            seed=seed,
            state_conditioned=state_conditioned,
        ) as sim,
        connect(model, api_key=BENCH_KEY, base_url=sim.url) as policy,
    ):
        arm = SimulatedArm(model)

        def act(action: FloatArray) -> None:
            commands.append(Command(time.time(), time.monotonic(), np.array(action)))
            arm.act(action)

        if strategy == "b":
            player = EmaPrefetch(policy, lambda prediction: None)
            try:
                # the baseline's stalls are measured to the end, not cut by run()'s bound
                outcome = drive(
                    player, arm.observe, act, max_actions=max_actions, stall_timeout_s=seconds
                )
            finally:
                player.close()
        else:
            outcome = policy.run(
                arm.observe,
                act,
                max_actions=max_actions,
                validate=lambda action: bool(np.all(np.isfinite(action))),
                prefetch=strategy in "cr",
                freshness="fresh" if strategy == "r" else "round_trip",
            )
    return Recording(model, strategy, outcome, commands)


_recorded: dict[tuple[str, float, str, bool], list[Recording]] = {}


def record_strategies(
    model: str, seconds: float, strategies: str = "abrc", *, state_conditioned: bool = False
) -> list[Recording]:
    """Several strategies at once, each in its own process with its own simulator and arm
    (threads of one interpreter would delay each other's ticks by the GIL's 5 ms switch
    interval and inflate the seams). Kept for the rest of the process, so the figure and the
    freshness table show the same runs."""
    key = (model, seconds, strategies, state_conditioned)
    if key not in _recorded:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=len(strategies), mp_context=context) as pool:
            futures = [
                pool.submit(record_run, model, s, seconds, state_conditioned=state_conditioned)
                for s in strategies
            ]
            _recorded[key] = [future.result() for future in futures]
    return _recorded[key]


def tracking_errors(recording: Recording) -> list[float]:
    """Per command: largest per-dimension distance from the reference position at send time."""
    entry = CATALOGUE[recording.model]
    return [
        float(np.max(np.abs(c.action - reference_position(entry, c.wall))))
        for c in recording.commands
    ]


def command_jumps(recording: Recording) -> list[float]:
    """Largest per-joint change between consecutive commands (the gripper excluded)."""
    actions = [c.action[:-1] for c in recording.commands]
    return [float(np.max(np.abs(b - a))) for a, b in itertools.pairwise(actions)]


def state_conditioned_table(seconds: float) -> str:
    recordings = record_strategies(MODEL, seconds, "abrc", state_conditioned=True)
    rows = []
    for r in recordings:
        o, jumps = r.outcome, command_jumps(r)
        rows.append(
            [
                ROWS[r.strategy],
                f"{o.staleness_p50_s:.2f} / {o.staleness_p95_s:.2f}",
                f"{o.max_seam_jump:.3f}",
                f"{quantile(jumps, 0.99):.3f}",
                f"{o.duty_cycle:.0%}",
            ]
        )
    headers = [
        "strategy",
        "staleness p50 / p95 s",
        "max seam jump rad",
        "command-to-command jump p99 rad",
        "duty",
    ]
    return markdown_table(headers, rows)


def run(full: bool) -> str:
    seconds = FULL_SECONDS if full else QUICK_SECONDS
    entry = CATALOGUE[MODEL]
    recordings = record_strategies(MODEL, seconds)
    errors = {r.strategy: tracking_errors(r) for r in recordings}
    baseline = next(r for r in recordings if r.strategy == "a")  # the hand-written loop
    rows = []
    for r in recordings:
        o, err = r.outcome, errors[r.strategy]
        rows.append(
            [
                ROWS[r.strategy],
                f"{o.staleness_p50_s:.2f} / {o.staleness_p95_s:.2f}",
                ratio(o.staleness_p95_s, baseline.outcome.staleness_p95_s),
                f"{o.max_seam_jump:.3f}",
                ratio(o.max_seam_jump, baseline.outcome.max_seam_jump),
                f"{mean(err):.3f} / {quantile(err, 0.95):.3f}",
                ratio(quantile(err, 0.95), quantile(errors["a"], 0.95)),
                f"{o.duty_cycle:.0%}",
            ]
        )
    headers = [
        "strategy",
        "staleness p50 / p95 s",
        "p95 vs (a)",
        "max seam jump rad",
        "seam vs (a)",
        "tracking error mean / p95 rad",
        "p95 vs (a)",
        "duty",
    ]
    return "\n\n".join(
        [
            "## Freshness, seams and tracking error",
            machine_note(full=full, sizes=f"{seconds:g} s of motion per strategy"),
            f"{MODEL} ({entry.action_space}, {entry.covers_seconds:.2f} s chunks at "
            f"{entry.control_hz:g} Hz), refill {MEDIAN_S} s, {seconds:g} s of motion per "
            "strategy. Staleness = age of the observation behind each executed step. Seam = "
            "largest per-joint jump where one chunk hands over to the next. Tracking error = "
            "largest per-joint distance between the command and the simulator's reference "
            "position at the moment it is sent. Ratios are against (a), the loop one writes "
            "by hand."
            + (
                ""
                if full
                else f" Quick run: {seconds:g} s, about "
                f"{seconds / entry.covers_seconds:.0f} chunks: the max seams rest on a few."
            ),
            markdown_table(headers, rows),
            "With a state-conditioned policy (chunks start at the observed joint positions): "
            "seam and the largest jump between consecutive commands. The reference's "
            "largest in-chunk step is about 0.014 rad at 25 Hz.",
            state_conditioned_table(seconds),
        ]
    )
