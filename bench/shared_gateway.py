"""Shared gateway: many robots on one simulator with few model slots, per client setting.

pi05-droid robots (1.00 s chunks at 15 Hz), refill median 0.79 s with right skew (lognormal
sigma 0.3: p99 = 2x the median), one simulator with N model slots: requests beyond N queue.
For each cell (robots / slots) every setting runs against its own simulator, all settings at
once, each setting and each simulator in a process of its own (clients and server must not
share a GIL). Settings:

- the default ``run()`` (round-trip lag, up to 3 in flight, backs off while queued);
- ``max_in_flight=1``, the least aggressive setting of this engine;
- ``round_trip`` without backoff (``EngineConfig(backoff=False)``): the default's pipelining
  alone;
- ``fresh`` without backoff: the smallest lag, the previous default;
- the released ``sequence-ai`` 0.1.0 client's ``run()`` (one request in flight, EMA lead).

Every robot runs for the same wall time and is stopped by its validator (the one way both
clients' ``run()`` stop early and still return their outcome); ``run()``'s bound on an empty
plan is lifted past the run's length (the 0.1.0 client has none). A robot whose run fails is
named under the table, never averaged in. Duty = time a command covered
(a period each, from the times ``act`` was called: the same measure for both clients) / the
run's wall time, the wait for the first chunk included. Wasted = requests whose chunk never
played a step. Plan age = the median age of the observation behind each step played. The
simulator serves queued requests first come, first served (``sequence_ai_sim.slots``), as a
gateway's queue does; once every slot is busy, more requests in flight cannot move the arms
more, only make every plan older.
"""

from __future__ import annotations

import base64
import math
import multiprocessing
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from bench._common import BENCH_KEY, machine_note, ratio, table
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray, Observation
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm

MODEL = CATALOGUE["pi05-droid"]
LATENCY_S, JITTER = 0.79, 0.3
CELLS = ((8, 8), (8, 4), (8, 2), (16, 8), (16, 2))
#: Quick mode's one cell: a slot per robot. On fewer slots the robots without backoff queue
#: deep and wait seconds past their time for the chunk whose validation stops them (8 / 4:
#: 17 s for a 6 s cell, 8 / 8: 12 s).
QUICK_CELLS = ((8, 8),)
SETTINGS = {
    "default": "default",
    "single": "`max_in_flight=1`",
    "round_trip": "round_trip, no backoff",
    "fresh": "fresh, no backoff",
    "v010": "0.1.0 client",
}


@dataclass
class Fleet:
    """What one setting did in one cell, summed over its robots."""

    setting: str
    duty: list[float] = field(default_factory=list)
    requests: int = 0
    wasted: int = 0
    backoffs: int = 0
    motion_s: float = 0.0
    latency_p95: list[float] = field(default_factory=list)
    staleness_p50: list[float] = field(default_factory=list)
    max_queued: int = 0
    errors: list[str] = field(default_factory=list)


def serve(conn: Connection, workers: int, seed: int) -> None:
    """The simulator process: serve until told to stop, then send back its counts."""
    with GatewaySimulator(
        api_key=BENCH_KEY, latency_s=LATENCY_S, jitter=JITTER, workers=workers, seed=seed
    ) as sim:
        conn.send(sim.url)
        conn.recv()
        conn.send(sim.stats())


Result = tuple[float, int, int, int, float, float, float]


def duty_of(stamps: list[float], seconds: float) -> float:
    """Time a command covered (a period each, from when ``act`` was called: the same measure
    for both clients) over the whole run, the wait for the first chunk included: on a
    saturated gateway that wait is part of what a robot gets."""
    if not stamps:
        return 0.0
    period = 1 / MODEL.control_hz
    covered = np.minimum(np.diff(np.asarray(stamps)), period).sum() + period
    return float(min(1.0, covered / seconds))


class TimedArm(SimulatedArm):
    def __init__(self) -> None:
        # The model's two cameras, small: run() refuses an observation without them, and
        # rendering full-size frames for 16 robots would load the measuring machine.
        super().__init__(MODEL, image_size=(32, 24))
        self.stamps: list[float] = []

    def act(self, action: FloatArray) -> None:
        self.stamps.append(time.monotonic())
        super().act(action)


def ours(setting: str, url: str, seconds: float) -> Result:
    """(duty, requests, wasted, backoffs, motion s, refill p95, plan age p50) of one robot."""
    arm = TimedArm()
    deadline = time.monotonic() + seconds

    def in_time(action: FloatArray) -> bool:
        return time.monotonic() < deadline

    with connect(MODEL.short_id, api_key=BENCH_KEY, base_url=url) as policy:
        if setting in ("default", "single"):
            outcome = policy.run(
                arm.observe,
                arm.act,
                max_actions=10**6,
                validate=in_time,
                max_in_flight=1 if setting == "single" else 3,
                # on a saturated gateway a refill can take longer than run()'s default 2 s
                # bound on an empty plan; measured here is throughput, not that bound
                stall_timeout_s=2 * seconds,
            )
        else:
            config = EngineConfig(
                freshness="fresh" if setting == "fresh" else "round_trip",
                backoff=False, expected_covers_s=MODEL.covers_seconds,
                expected_control_hz=MODEL.control_hz,
            )  # fmt: skip
            with PlaybackEngine(policy, config) as engine:
                outcome = drive(
                    engine, arm.observe, arm.act, max_actions=10**6, validate=in_time,
                    stall_timeout_s=2 * seconds,  # as above: throughput, not the bound
                )  # fmt: skip
    if outcome.error is not None:  # a table of zeros must not pass for a measurement
        raise RuntimeError(f"{setting}: the run failed: {outcome!r}")
    motion = outcome.actions / MODEL.control_hz
    return (
        duty_of(arm.stamps, seconds),
        outcome.requests,
        outcome.wasted_requests,
        outcome.backoffs,
        motion,
        outcome.latency_p95_s,
        outcome.staleness_p50_s,
    )


def released(url: str, seconds: float) -> Result:
    """The same for the released 0.1.0 client (its observation types, base64 images)."""
    import sequence_ai  # the `bench` extra installs sequence-ai==0.1.0

    arm = TimedArm()
    deadline = time.monotonic() + seconds

    def observe() -> Any:
        ours_obs: Observation = arm.observe()
        p = ours_obs.proprioception
        return sequence_ai.types.Observation(
            images=[
                sequence_ai.types.ImageFrame(f.view, base64.b64encode(f.data).decode(), None)
                for f in ours_obs.images
            ],
            proprioception=sequence_ai.types.Proprioception(
                joint_positions=list(p.joint_positions), gripper=p.gripper
            ),
            instruction="",
        )

    def act(action: list[float]) -> None:
        arm.act(np.asarray(action, dtype=np.float64))

    with sequence_ai.connect(MODEL.short_id, api_key=BENCH_KEY, base_url=url) as policy:
        _omit_nulls(policy)
        out = policy.run(
            observe, act, max_actions=10**6, validate=lambda a: time.monotonic() < deadline
        )
    return (
        duty_of(arm.stamps, seconds),
        out.chunks,
        0,
        0,
        out.actions / MODEL.control_hz,
        float("nan"),
        float("nan"),
    )


def _omit_nulls(policy: Any) -> None:
    """0.1.0 sends unset optional fields as JSON null, which the real gateway took as absent;
    strip them before the body leaves, for a simulator that reads null as a malformed value."""
    post = policy._t.post

    def post_without_nulls(path: str, payload: dict[str, Any]) -> Any:
        proprio = payload.get("observation", {}).get("proprioception", {})
        for key in [k for k, v in proprio.items() if v is None]:
            del proprio[key]
        return post(path, payload)

    policy._t.post = post_without_nulls


def one_fleet(
    setting: str, robots: int, workers: int, seconds: float, start_at: float, conn: Connection
) -> None:
    """A process: its own simulator process, then ``robots`` threads on this setting."""
    context = multiprocessing.get_context("spawn")
    server, child = context.Pipe()
    simulator = context.Process(target=serve, args=(child, workers, 5), daemon=True)
    simulator.start()
    url = server.recv()
    fleet = Fleet(setting)
    lock = threading.Lock()

    def robot() -> None:
        try:
            result = released(url, seconds) if setting == "v010" else ours(setting, url, seconds)
        except BaseException as exc:  # reported in the table, not swallowed
            with lock:
                fleet.errors.append(repr(exc))
            return
        duty, requests, wasted, backoffs, motion, p95, age = result
        with lock:
            fleet.duty.append(duty)
            fleet.requests += requests
            fleet.wasted += wasted
            fleet.backoffs += backoffs
            fleet.motion_s += motion
            fleet.latency_p95.append(p95)
            fleet.staleness_p50.append(age)

    time.sleep(max(0.0, start_at - time.time()))  # every setting starts together
    threads = [threading.Thread(target=robot) for _ in range(robots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    server.send("stop")
    fleet.max_queued = int(server.recv()["max_queued"])
    simulator.join(timeout=10)
    conn.send(fleet)


def cell(robots: int, workers: int, seconds: float) -> dict[str, Fleet]:
    context = multiprocessing.get_context("spawn")
    start_at = time.time() + 3.0
    jobs = []
    for setting in SETTINGS:
        parent, child = context.Pipe()
        process = context.Process(
            target=one_fleet, args=(setting, robots, workers, seconds, start_at, child)
        )
        process.start()
        jobs.append((setting, parent, process))
    results = {}
    for setting, parent, process in jobs:
        results[setting] = parent.recv()
        process.join(timeout=30)
    return results


def pct(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{value:.0%}"


def difference(ours: list[float], theirs: list[float]) -> str:
    """Mean duty difference in percentage points, with two standard errors of it over the
    robots: robots on one gateway differ by tens of points (who queued first), so a point
    or two between two settings' means is within what the same client scores twice."""
    if len(ours) < 2 or len(theirs) < 2:
        return "-"
    a, b = np.asarray(ours), np.asarray(theirs)
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    return f"{100 * (a.mean() - b.mean()):+.1f} ({200 * se:.1f})"


def render(cells: dict[tuple[int, int], dict[str, Fleet]], seconds: float) -> str:
    duty_rows, load_rows = [], []
    for (robots, workers), fleets in cells.items():
        d = {k: float(np.nanmean(f.duty)) if f.duty else math.nan for k, f in fleets.items()}
        default = fleets["default"]
        best = max(("single", "v010"), key=lambda k: d[k])
        duty_rows.append(
            [f"{robots} / {workers}"]
            + [pct(d[k]) for k in SETTINGS]
            + [
                ratio(d["default"], d[best]),
                difference(default.duty, fleets[best].duty),
                pct(default.wasted / max(1, default.requests)),
                pct(fleets["fresh"].wasted / max(1, fleets["fresh"].requests)),
                default.backoffs,
            ]
        )
        load_rows.append(
            [f"{robots} / {workers}"]
            + [f"{f.requests / seconds:.1f}" for f in fleets.values()]
            + [
                f"{fleets[k].requests / max(fleets[k].motion_s / MODEL.covers_seconds, 1e-9):.2f}"
                for k in ("default", "fresh")
            ]
            + [f"{fleets[k].max_queued}" for k in SETTINGS]
            + [
                f"{max(fleets[k].latency_p95, default=math.nan):.2f}"
                for k in ("default", "round_trip", "fresh")
            ]
            + [
                f"{float(np.nanmedian(fleets[k].staleness_p50)):.2f}"
                if fleets[k].staleness_p50
                else "-"
                for k in ("default", "single", "round_trip", "fresh")
            ]
        )
    names = list(SETTINGS.values())
    duty_table = table(
        ["robots / slots", *[f"{n} duty" for n in names],
         "default vs best of max_in_flight=1 / 0.1.0", "difference, points (2 SE)",
         "default wasted", "fresh wasted",
         "default backoffs"],
        duty_rows,
    )  # fmt: skip
    load_table = table(
        ["robots / slots", *[f"{n} req/s" for n in names],
         "default req per chunk", "fresh req per chunk", *[f"{n} max queued" for n in names],
         "default p95 s", "round_trip p95 s", "fresh p95 s",
         *[f"{SETTINGS[k]} plan age p50 s" for k in ("default", "single", "round_trip", "fresh")]],
        load_rows,
    )  # fmt: skip
    errors = [f"{cell}: {f.setting}: {e}" for cell, fs in cells.items()
              for f in fs.values() for e in f.errors[:2]]  # fmt: skip
    parts = [duty_table, "Load offered (requests per second, all robots), queue and refill tail:",
             load_table]  # fmt: skip
    if errors:
        parts.append("Errors: " + "; ".join(errors))
    return "\n\n".join(parts)


def run(full: bool) -> str:
    # quick: one cell of 4 s, 10 s (a cell costs its seconds and about 5 s to start its 10
    # processes and stop them); five cells of 20 s took 167 s
    seconds = 60.0 if full else 4.0
    grid = CELLS if full else QUICK_CELLS
    started = time.monotonic()
    cells = {(r, w): cell(r, w, seconds) for r, w in grid}
    named = ", ".join(f"{r} / {w}" for r, w in grid)
    quick = (
        ""
        if full
        else f" Quick run: one cell, {seconds:g} s, a few chunks per robot: the wait for the "
        "first chunk weighs more in each duty, and duty and its difference between settings "
        "move by several points between runs."
    )
    return "\n\n".join(
        [
            "## Shared gateway: robots per model slot",
            machine_note(full=full, sizes=f"robots / slots {named}; {seconds:g} s per robot"),
            f"{MODEL.short_id} robots ({MODEL.covers_seconds:.2f} s chunks), refill median "
            f"{LATENCY_S} s, lognormal sigma {JITTER} (p99 = 2x median), {seconds:.0f} s per "
            "robot; one simulator per setting, every setting of a cell at once. Duty is the "
            "mean over robots; the ratio is the default against the better of "
            "`max_in_flight=1` and the 0.1.0 client." + quick,
            render(cells, seconds),
            f"_{len(grid)} cells x {len(SETTINGS)} settings, "
            f"{time.monotonic() - started:.0f} s wall._",
        ]
    )
