"""Many robots: eight Policies, each in its own thread, against one simulated gateway.

Each robot marks its requests (instruction ``robot-<k>`` and ``seed=<k>``; the simulator adds
seeded noise, so a chunk's values say which request they answer). Every chunk a robot
played is checked against the simulator's record of the request it claims to answer: same
robot, and exactly the values that request's anchor and seed produce. A chunk meant for
another robot would fail both checks (a "sequence break").

The gateway's worker pool is shared: with 2 workers, 8 robots queue behind each other.
The hand-written alternative is the closed loop (refill only when the chunk is used up, like
``next_action``), run here as ``run(prefetch=False)`` so it is measured the same way.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bench._common import BENCH_KEY, machine_note, ms, quantile, ratio
from bench._common import table as markdown_table
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray, Observation, Prediction
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm
from sequence_ai_sim.responses import chunk_values

MODEL = CATALOGUE["pi05-droid"]
ROBOTS = 8
#: Median refill latency and right skew, as measured on the real gateway.
LATENCY_S, JITTER = 0.79, 0.3
NOISE = 0.01


@dataclass
class Robot:
    index: int
    played: list[tuple[str, FloatArray]] = field(default_factory=list)
    outcome: RunOutcome | None = None
    error: BaseException | None = None

    @property
    def marker(self) -> str:
        return f"robot-{self.index}"


def drive_robot(robot: Robot, url: str, *, actions: int, prefetch: bool) -> None:
    arm = SimulatedArm(MODEL)

    def observe() -> Observation:
        return arm.observe(instruction=robot.marker)

    def act(action: FloatArray) -> None:
        arm.act(action)

    def keep(prediction: Prediction) -> None:
        robot.played.append((prediction.request_id, np.array(prediction.action_chunk.steps)))

    try:
        with connect(MODEL.short_id, api_key=BENCH_KEY, base_url=url) as policy:
            robot.outcome = policy.run(
                observe,
                act,
                max_actions=actions,
                validate=lambda action: bool(np.all(np.abs(action) < 10)),
                on_chunk=keep,
                prefetch=prefetch,
                options={"seed": robot.index},
            )
    except BaseException as exc:  # reported in the table, not swallowed silently
        robot.error = exc


def sequence_breaks(robot: Robot, records: dict[str, dict[str, Any]]) -> int:
    """Chunks this robot played that do not answer one of its own requests."""
    breaks = 0
    for request_id, steps in robot.played:
        record = records.get(request_id)
        if record is None or record["observation"].get("instruction") != robot.marker:
            breaks += 1
            continue
        seed = record["options"].get("seed")
        expected = chunk_values(MODEL, record["anchor_wall"], len(steps), noise=NOISE, seed=seed)
        if seed != robot.index or not np.allclose(steps, expected, rtol=0, atol=1e-9):
            breaks += 1
    return breaks


def fleet(workers: int, *, actions: int, prefetch: bool) -> dict[str, Any]:
    robots = [Robot(k) for k in range(ROBOTS)]
    with GatewaySimulator(
        api_key=BENCH_KEY, latency_s=LATENCY_S, jitter=JITTER, workers=workers, action_noise=NOISE
    ) as sim:
        threads = [
            threading.Thread(
                target=drive_robot,
                args=(r, sim.url),
                kwargs={"actions": actions, "prefetch": prefetch},
            )
            for r in robots
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = sim.stats()
        records = [r for r in sim.received if r.get("request_id")]
    by_id = {r["request_id"]: r for r in records}
    markers_per_connection: dict[int, set[str]] = defaultdict(set)
    for record in records:
        markers_per_connection[record["connection"]].add(record["observation"].get("instruction"))
    outcomes = [r.outcome for r in robots if r.outcome is not None]
    return {
        "workers": workers,
        "prefetch": prefetch,
        "connections": stats["connections"],
        "shared_connections": sum(len(m) > 1 for m in markers_per_connection.values()),
        "requests": [o.requests for o in outcomes],
        "chunks": [o.chunks for o in outcomes],
        "breaks": sum(sequence_breaks(r, by_id) for r in robots),
        "underruns": sum(o.underruns for o in outcomes),
        "underrun_s": sum(o.underrun_s for o in outcomes),
        "duty": [o.duty_cycle for o in outcomes],
        "latency_p50": quantile([o.latency_p50_s for o in outcomes], 0.5),
        "latency_p95": max((o.latency_p95_s for o in outcomes), default=float("nan")),
        "max_queued": stats["max_queued"],
        "errors": [f"{r.marker}: {r.error!r}" for r in robots if r.error is not None],
    }


def render(results: list[dict[str, Any]]) -> str:
    baseline = results[-1]  # the closed loop with a pool as large as the fleet
    rows = []
    for r in results:
        requests = r["requests"] or [0]
        chunks = r["chunks"] or [0]
        duty = r["duty"] or [float("nan")]
        rows.append(
            [
                "`run()` (prefetch)" if r["prefetch"] else "closed loop (refill when empty)",
                r["workers"],
                r["connections"],
                r["shared_connections"],
                f"{min(requests)}–{max(requests)}",
                f"{min(chunks)}–{max(chunks)}",
                r["breaks"],
                r["underruns"],
                f"{r['underrun_s']:.1f}",
                f"{min(duty):.0%}–{max(duty):.0%}",
                ratio(float(np.mean(duty)), float(np.mean(baseline["duty"] or [float("nan")]))),
                f"{ms(r['latency_p50'], 0)} / {ms(r['latency_p95'], 0)}",
                r["max_queued"],
            ]
        )
    headers = [
        "loop (8 robots)",
        "gateway workers",
        "connections",
        "connections shared by robots",
        "requests per robot",
        "chunks played per robot",
        "sequence breaks",
        "underrun ticks (all robots)",
        "underrun s",
        "duty cycle per robot",
        "duty vs closed loop",
        "refill p50 / p95 ms",
        "max queued at gateway",
    ]
    return markdown_table(headers, rows)


def run(full: bool) -> str:
    # quick: two chunks, the fewest with a refill; the 2-worker fleet's queue takes 7 s of 15
    chunks = 10 if full else 2
    actions = chunks * MODEL.action_horizon
    results = [
        fleet(8, actions=actions, prefetch=True),
        fleet(2, actions=actions, prefetch=True),
        fleet(8, actions=actions, prefetch=False),
    ]
    errors = [e for r in results for e in r["errors"]]
    parts = [
        "## Many robots on one gateway",
        machine_note(full=full, sizes=f"{chunks} chunks per robot, {ROBOTS} robots per fleet"),
        f"{ROBOTS} robots, each its own `Policy` in its own thread, {actions} actions "
        f"({chunks} chunks of {MODEL.covers_seconds:.2f} s, {MODEL.short_id}); refill latency "
        f"median {LATENCY_S} s with right skew (jitter {JITTER}). Ratios are against the closed "
        "loop on 8 workers."
        + (
            ""
            if full
            else " Quick run: one refill per robot, so the duty ratios rest on it and move "
            "between runs."
        ),
        render(results),
    ]
    if errors:
        parts.append("Errors: " + "; ".join(errors))
    return "\n\n".join(parts)
