"""Parse cost per chunk size against its floor, and what parsing does to a control loop.

A chunk's answer is parsed on a worker thread, but ``json.loads`` holds the GIL, so a 100 Hz
control thread waits while it runs. Two tables:

1. Thread CPU per chunk of what the client does with a 200 body's bytes (decoding, the item
   count and ``json.loads`` in ``bodies``; every check in ``wire.parse_prediction``; a
   valid answer is not redacted, only the error for a bad one) against the floor nobody can
   go below: ``json.loads`` + ``np.asarray`` of the values + one vectorised finiteness check.
   The goal is at most 1.5x at every size.
2. The largest lateness of a 100 Hz sleep-to-deadline loop while a worker parses chunks back
   (ten a second, more than a pipelined run receives): alone, with the largest
   chunk the client accepts, and with a 1000 x 32 chunk the caps refuse (parsed by plain
   ``json.loads`` to show what the caps prevent). Goal: at most half a period for the largest
   accepted chunk.
"""

from __future__ import annotations

import gc
import json
import math
import threading
import time
from typing import Any

import numpy as np

from bench._common import machine_note, ms, quantile, ratio, table, timed, us
from sequence_ai_core.gateway.bodies import decoded, parse_json
from sequence_ai_core.gateway.wire import parse_prediction
from sequence_ai_core.limits import MAX_CHUNK_VALUES, MAX_STEPS

LOOP_HZ = 100.0
#: Pause between parsed chunks on the worker: ten answers a second, several times what a
#: pipelined run receives (one per 0.3-2 s), so the loop meets many parses per run.
WORK_PAUSE_S = 0.1
#: (steps, dims): the catalogue's chunks, typical pi0-style shapes, the largest accepted.
SIZES = [(15, 8), (32, 8), (50, 32), (MAX_STEPS, MAX_CHUNK_VALUES // MAX_STEPS), (64, 32)]
REFUSED = (1000, 32)
SECRET = "sk-bench-0123456789abcdef"


def body_bytes(steps: int, dims: int, *, seed: int = 0) -> bytes:
    """A 200 body as the gateway sends it: ``{"index", "values"}`` steps at full precision."""
    values = np.random.default_rng(seed).standard_normal((steps, dims))
    chunk = {
        "steps": [{"index": i, "values": row.tolist()} for i, row in enumerate(values)],
        "robot": "bench",
        "action_space": "joint_velocity",
        "action_dim": dims,
        "control_frequency_hz": 50.0,
    }
    return json.dumps({"id": "bench", "model": "bench", "action_chunk": chunk}).encode()


def client_parse(raw: bytes) -> Any:
    """What the transport and the wire layer do with a 200 body's bytes."""
    body = parse_json(decoded(raw, None).decode("utf-8"))
    return parse_prediction(body, request_id="r-bench", latency_s=0.0, secret=SECRET)


def floor_parse(raw: bytes) -> Any:
    body = json.loads(raw)
    rows = [step["values"] for step in body["action_chunk"]["steps"]]
    array = np.asarray(rows, dtype=np.float64)
    return bool(np.isfinite(array).all())


def cpu_per_call(calls: dict[str, Any], raw: bytes, repeats: int) -> dict[str, float]:
    """Least thread CPU of one call over ``repeats`` rounds of 5 calls, the approaches
    interleaved round by round so that machine load hits them alike (the least is the
    figure load inflates least)."""
    best = {name: float("inf") for name in calls}
    gc.collect()
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.thread_time()
            for _ in range(5):
                call(raw)
            best[name] = min(best[name], (time.thread_time() - start) / 5)
    return best


def cost_table(repeats: int) -> str:
    rows = []
    for steps, dims in SIZES:
        raw = body_bytes(steps, dims)
        cost = cpu_per_call({"floor": floor_parse, "client": client_parse}, raw, repeats)
        floor, ours = cost["floor"], cost["client"]
        rows.append(
            [f"{steps} x {dims}", f"{len(raw) / 1024:.0f}", us(floor, 0), us(ours, 0),
             ratio(ours, floor)]
        )  # fmt: skip
    return table(["chunk", "body KiB", "floor µs", "client µs", "client / floor"], rows)


def loop_lateness(seconds: float, work: Any) -> list[float]:
    """Lateness of each tick of a 100 Hz sleep-to-deadline loop while ``work`` runs."""
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            work()
            time.sleep(WORK_PAUSE_S)

    thread = threading.Thread(target=worker, daemon=True) if work is not None else None
    if thread is not None:
        thread.start()
    period, late = 1.0 / LOOP_HZ, []
    start = time.perf_counter()
    n = 0
    while time.perf_counter() - start < seconds:
        n += 1
        deadline = start + n * period
        pause = deadline - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        late.append(max(0.0, time.perf_counter() - deadline))
    stop.set()
    if thread is not None:
        thread.join()
    return late


def lateness_table(seconds: float) -> str:
    """The three cases in interleaved half-second slices, so that machine load (this is a
    shared machine) falls on each alike; lateness is pooled per case over its slices."""
    steps, dims = SIZES[-1]
    largest = body_bytes(steps, dims)
    refused = body_bytes(*REFUSED)
    cases = [
        ("no parsing (the loop alone)", None),
        (f"client parses {steps} x {dims} (largest accepted)", lambda: client_parse(largest)),
        (f"json.loads of {REFUSED[0]} x {REFUSED[1]} (refused by the caps)",
         lambda: json.loads(refused)),
    ]  # fmt: skip
    late: dict[str, list[float]] = {name: [] for name, _ in cases}
    for _ in range(max(1, round(seconds / 0.5))):
        for name, work in cases:
            late[name] += loop_lateness(0.5, work)
    alone = quantile(late[cases[0][0]], 0.99)
    rows = []
    for name, work in cases:
        p99, worst = quantile(late[name], 0.99), max(late[name])
        parse = max(timed(work, 20)) if work is not None else 0.0
        rows.append([name, ms(parse, 2), ms(p99, 2), ms(p99 - alone, 2),
                     ratio(p99 - alone, 1.0 / LOOP_HZ), ms(worst, 1)])  # fmt: skip
    return table(
        ["worker thread", "longest parse ms", "p99 late ms", "p99 beyond the loop alone ms",
         "that / period", "max late ms"],
        rows,
    )  # fmt: skip


def run(full: bool) -> str:
    repeats = 60 if full else 20
    # quick: 1.5 s of the loop per case (the three cases take three times that)
    seconds = 20.0 if full else 1.5
    ticks = round(seconds * LOOP_HZ)
    sizes = f"{repeats} rounds of 5 parses per size, {seconds:g} s of loop per case"
    return "\n\n".join(
        [
            "### Parse cost per chunk size (thread CPU per chunk, least of interleaved rounds)",
            cost_table(repeats),
            f"### A {LOOP_HZ:g} Hz loop while a worker parses chunks",
            ("" if full else f"Quick run: {ticks} ticks per case, so a p99 is set by the "
             f"{math.ceil(0.01 * ticks)} latest.\n\n") + lateness_table(seconds),
            machine_note(full=full, sizes=sizes),
        ]
    )  # fmt: skip


if __name__ == "__main__":
    print(run(False))
