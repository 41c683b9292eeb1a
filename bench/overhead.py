"""Engine overhead: CPU per tick and per chunk, run()'s pacing at 50 Hz, memory over many chunks.

Each cost is set against the floor a hand-written loop cannot go below (indexing a numpy
array, ``json.loads`` plus ``np.asarray``, a sleep-to-deadline loop), so the table says how
much the engine's bookkeeping and validation add, not how fast this machine is.

The tick and memory parts feed the engine from an in-memory chunk source (the engine's
``ChunkSource`` protocol: ``fetch`` returns a chunk parsed by ``wire.parse_prediction`` from
a simulator-made body), so HTTP and the in-process simulator neither cost CPU on the
measured thread nor allocate memory that tracemalloc would count.
"""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from bench import _command_order
from bench._common import BENCH_KEY, machine_note, quantile, simulator_process
from bench._loop_breakdown import KindTimer, RowPlayer, engine_ticks, render_breakdown
from bench._overhead_tables import (
    LOOP_NAMES,
    render_cameras,
    render_cpu,
    render_loop,
    render_memory,
)
from bench._tapped import Tapped
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.gateway.wire import parse_prediction
from sequence_ai_core.images import encode_image
from sequence_ai_core.limits import MAX_STEPS
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.playback.source import DriverGuard
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray, ImageFrame, Observation, Prediction
from sequence_ai_sim import CATALOGUE, SimModel, SimulatedArm
from sequence_ai_sim.catalogue import reference_chunk
from sequence_ai_sim.responses import act_body

MODEL = CATALOGUE["lingbot-vla-v2-6b"]
LOOP_HZ = 50.0
#: The rate whose loop is taken apart (``where_time_goes``): the model's chunks then last 14
#: ticks, so a chunk's own ticks (arrival, request, seam) weigh most.
BREAKDOWN_HZ = 200.0


def chunk_body(model: SimModel, steps: int) -> bytes:
    """A 200 body exactly as the simulator sends it."""
    values = reference_chunk(model, time.time(), steps)
    body = act_body(model, values, response_id="act-0", inference_ms=0, queue_ms=0, usage={})
    return json.dumps(body).encode()


class ParsedChunks:
    """Answers every ``fetch`` with a freshly parsed copy of one chunk body."""

    control_hz: float | None = None

    def __init__(self, body: bytes) -> None:
        self._body = json.loads(body)
        self.fetches = 0
        self.guard = DriverGuard("bench")

    def fetch(self, observation: Observation, options: Mapping[str, Any]) -> Prediction:
        self.fetches += 1
        return parse_prediction(self._body, request_id="r-bench", latency_s=0.0)


def _observation() -> Observation:
    return SimulatedArm(MODEL, cameras=False).observe(instruction="bench")


def _cpu_and_wall(loop: Callable[[], int]) -> tuple[float, float, int]:
    """(thread CPU s, wall s, iterations) of one call of `loop`."""
    gc.collect()
    cpu, wall = time.thread_time(), time.perf_counter()
    count = loop()
    return time.thread_time() - cpu, time.perf_counter() - wall, count


def tick_cost(ticks: int) -> dict[str, tuple[float, float]]:
    """Per-tick CPU and wall time of the engine with a pre-filled plan, and of the floor.
    A chunk holds at most ``MAX_STEPS`` steps, so the ticks run in batches, each on a fresh
    engine whose first chunk covers the whole batch."""
    totals = {"engine": [0.0, 0.0], "floor": [0.0, 0.0]}
    batch = MAX_STEPS - 64
    for start in range(0, ticks, batch):
        for name, (cpu, wall) in _tick_batch(min(batch, ticks - start)).items():
            totals[name][0] += cpu
            totals[name][1] += wall
    return {name: (cpu / ticks, wall / ticks) for name, (cpu, wall) in totals.items()}


def _tick_batch(ticks: int) -> dict[str, tuple[float, float]]:
    """(CPU s, wall s) of ``ticks`` engine ticks on one pre-filled chunk, and of the floor."""
    source = ParsedChunks(chunk_body(MODEL, ticks + 64))
    obs = _observation()
    engine = PlaybackEngine(source, EngineConfig())
    period = 1.0 / MODEL.control_hz
    now = 0.0
    while engine.tick(now, lambda: obs).kind != "action":  # first chunk arrives
        engine.wait_any(0.1)
    steps = np.array(source.fetch(obs, {}).action_chunk.steps)

    def engine_loop() -> int:
        for i in range(1, ticks + 1):  # a driver's tick: the action goes out (commit)
            engine.tick(now + i * period, lambda: obs)
            engine.commit()
        return ticks

    def floor_loop() -> int:
        for i in range(ticks):
            steps[i].copy()
        return ticks

    results = {}
    for name, loop in (("engine", engine_loop), ("floor", floor_loop)):
        cpu, wall, _ = _cpu_and_wall(loop)
        results[name] = (cpu, wall)
    engine.close()
    return results


def chunk_cost(repeats: int) -> dict[str, float]:
    """Seconds per chunk: JSON decode + parse_prediction against JSON decode + np.asarray."""
    raw = chunk_body(CATALOGUE["pi05-droid"], CATALOGUE["pi05-droid"].action_horizon)

    def parsed() -> None:
        parse_prediction(json.loads(raw), request_id="r-bench", latency_s=0.0)

    def floor() -> None:
        body = json.loads(raw)
        np.asarray([step["values"] for step in body["action_chunk"]["steps"]], dtype=np.float64)

    out = {}
    for name, call in (("parse_prediction", parsed), ("floor", floor)):
        gc.collect()
        start = time.thread_time()
        for _ in range(repeats):
            call()
        out[name] = (time.thread_time() - start) / repeats
    return out


def _intervals(stamps: list[float]) -> FloatArray:
    return np.diff(np.asarray(stamps))


class TimedPlayer(Tapped):
    """The engine, with the caller's-thread CPU and wall time of every tick recorded, and
    which ticks started a request (called ``observe``)."""

    def __init__(self, engine: PlaybackEngine) -> None:
        super().__init__(engine)
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.starts: list[bool] = []

    def play(self, now: float) -> Tick:
        cpu, wall = time.thread_time(), time.perf_counter()
        result = self.engine.play(now)
        self.wall.append(time.perf_counter() - wall)
        self.cpu.append(time.thread_time() - cpu)
        self.starts.append(False)
        return result

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        """Counted with the tick's ``play``: the two are one tick's work."""
        before = self.engine.requests_started
        cpu, wall = time.thread_time(), time.perf_counter()
        self.engine.refill(now, observe)
        self.wall[-1] += time.perf_counter() - wall
        self.cpu[-1] += time.thread_time() - cpu
        self.starts[-1] = self.engine.requests_started > before


def run_loop_overhead(
    actions: int, rates: tuple[float, ...], repeats: int = 3
) -> dict[float, dict[str, dict[str, float]]]:
    """``Policy.run()`` itself at each rate against a hand-written sleep-to-deadline loop over
    an array, and against ``drive`` around a player with no engine (``RowPlayer``), ``repeats``
    runs of each in turn (``actions`` at ``LOOP_HZ``, as many seconds at the others); the
    median run of each is reported. CPU counts from the first action to the last, the same
    for all (the catalogue lookup and the wait for the first chunk are not the loop's)."""
    obs = SimulatedArm(MODEL, image_size=(32, 24)).observe(instruction="bench")
    out = {}
    with simulator_process(latency_s=0.02) as url:
        for hz in rates:
            count = int(actions * hz / LOOP_HZ)
            runs: dict[str, list[dict[str, float]]] = {"run()": [], "driver": [], "floor": []}
            for _ in range(repeats):
                runs["run()"].append(_one_run(url, obs, count, hz))
                runs["driver"].append(_one_driver(count, hz))
                runs["floor"].append(_one_floor(count, hz))
            out[hz] = {
                name: sorted(stats, key=lambda s: s["cpu_per_action"])[len(stats) // 2]
                for name, stats in runs.items()
            }
    return out


def _one_run(url: str, obs: Observation, actions: int, hz: float) -> dict[str, float]:
    stamps: list[float] = []
    cpu: list[float] = []

    def act(action: FloatArray) -> None:
        stamps.append(time.perf_counter())
        cpu.append(time.thread_time())

    with connect(MODEL.short_id, api_key=BENCH_KEY, base_url=url, control_hz=hz) as p:
        outcome = p.run(lambda: obs, act, max_actions=actions, validate=lambda action: True)
    if outcome.error is not None or len(cpu) < 2:
        raise RuntimeError(f"run() did not play: {outcome!r}")
    return _loop_stats(stamps, cpu, hz, underruns=outcome.underruns)


def _one_floor(actions: int, hz: float) -> dict[str, float]:
    steps = reference_chunk(MODEL, time.time(), actions)
    stamps: list[float] = []
    cpu: list[float] = []
    t0 = time.monotonic()
    for i in range(actions):
        stamps.append(time.perf_counter())
        cpu.append(time.thread_time())
        steps[i].copy()
        time.sleep(max(0.0, t0 + (i + 1) / hz - time.monotonic()))
    return _loop_stats(stamps, cpu, hz, underruns=0)


def _one_driver(actions: int, hz: float) -> dict[str, float]:
    stamps: list[float] = []
    cpu: list[float] = []

    def act(action: FloatArray) -> None:
        stamps.append(time.perf_counter())
        cpu.append(time.thread_time())

    player = RowPlayer(reference_chunk(MODEL, time.time(), actions + 1), hz)
    drive(player, lambda: None, act, max_actions=actions, validate=lambda action: True)
    return _loop_stats(stamps, cpu, hz, underruns=0)


def where_time_goes(actions: int, hz: float) -> tuple[KindTimer, RunOutcome]:
    """The engine's ticks and commits in a run like ``run()``'s, timed one by one."""
    obs = SimulatedArm(MODEL, image_size=(32, 24)).observe(instruction="bench")
    with simulator_process(latency_s=0.02) as url:
        return engine_ticks(url, MODEL, obs, actions, hz)


def _loops_at(stats_by_loop: dict[str, dict[str, float]]) -> dict[str, float]:
    """CPU per action of each loop at one rate, labelled as the tables label them."""
    return {LOOP_NAMES[name]: stats["cpu_per_action"] for name, stats in stats_by_loop.items()}


def _loop_stats(
    stamps: list[float], cpu: list[float], hz: float, *, underruns: int
) -> dict[str, float]:
    # The first interval of run() includes the first request; pacing is judged after it.
    intervals = _intervals(stamps)[1:]
    error = np.abs(intervals - 1.0 / hz)
    return {
        "cpu_per_action": (cpu[-1] - cpu[0]) / (len(cpu) - 1),
        "jitter_p50": quantile(list(error), 0.5),
        "jitter_p95": quantile(list(error), 0.95),
        "jitter_max": float(error.max()) if error.size else float("nan"),
        "gaps": float(np.sum(intervals > 1.5 / hz)),
        "underruns": float(underruns),
    }


def camera_observer(encode_on_worker: bool, copy: bool = True) -> Callable[[], Observation]:
    """``observe`` for a robot with two 640x480 cameras: frames encoded right there (224x224
    JPEG, on the caller's thread), or handed over as ``RawFrame`` for the worker."""
    arm = SimulatedArm(MODEL, cameras=False)
    rng = np.random.default_rng(0)
    pictures = [rng.integers(0, 255, (480, 640, 3), dtype=np.uint8) for _ in range(2)]
    views = MODEL.camera_views or ("exterior_1", "wrist_left")

    def observe() -> Observation:
        base = arm.observe(instruction="bench")
        if encode_on_worker:
            images: tuple[ImageFrame, ...] = tuple(
                RawFrame(view, picture, copy=copy)
                for view, picture in zip(views, pictures, strict=False)
            )
        else:
            images = tuple(
                encode_image(picture, view=view)
                for view, picture in zip(views, pictures, strict=False)
            )
        return Observation(proprioception=base.proprioception, images=images)

    return observe


def control_thread_cost(actions: int) -> dict[str, TimedPlayer]:
    """Caller's-thread time of every tick of run()'s loop at 50 Hz with two cameras, the
    simulator in its own process."""
    out = {}
    with simulator_process(latency_s=0.3) as url:
        for name, on_worker, copy in (
            ("in observe", False, True),
            ("RawFrame (worker)", True, True),
            ("RawFrame, copy=False", True, False),
        ):
            with connect(MODEL.short_id, api_key=BENCH_KEY, base_url=url, control_hz=LOOP_HZ) as p:
                config = EngineConfig(control_hz=LOOP_HZ, expected_covers_s=0.5)
                with PlaybackEngine(p, config) as engine:
                    player = TimedPlayer(engine)
                    drive(
                        player,
                        camera_observer(on_worker, copy),
                        lambda action: None,
                        max_actions=actions,
                        validate=lambda action: True,
                    )
            out[name] = player
    return out


def command_order(actions: int) -> dict[str, list[tuple[float, bool]]]:
    """How late each command reaches ``act`` in either order, at 50 Hz with two cameras
    handed over as ``RawFrame`` (their pixels copied in ``observe``)."""
    with simulator_process(latency_s=0.3) as url:
        observe = camera_observer(True, True)
        return _command_order.command_delays(url, MODEL, observe, actions, LOOP_HZ)


def memory_over_chunks(chunks: int, steps_per_chunk: int = 2) -> list[tuple[int, float]]:
    """(chunks played, traced MB) at tenths of the run, after a warm-up of 100 chunks.

    The engine keeps its latency and staleness samples in windows of 10,000, so memory may
    grow until those are full and must be flat after: run at least twice that long.
    """
    source = ParsedChunks(chunk_body(MODEL, steps_per_chunk))
    obs = _observation()
    played = 0

    def count(prediction: Prediction) -> None:
        nonlocal played
        played += 1

    engine = PlaybackEngine(source, EngineConfig(), on_chunk=count)
    period, now = 1.0 / MODEL.control_hz, 0.0
    checkpoints = [100, *(chunks * k // 10 for k in range(1, 11))]
    readings: list[tuple[int, float]] = []
    tracemalloc.start()
    try:
        for target in checkpoints:
            while played < target:
                now += period
                if engine.tick(now, lambda: obs).kind == "action":
                    engine.commit()  # it went out: the statistics record it
                else:
                    engine.wait_any(0.05)
            gc.collect()
            readings.append((played, tracemalloc.get_traced_memory()[0] / 1e6))
    finally:
        tracemalloc.stop()
        engine.close()
    return readings


def run(full: bool) -> str:
    # quick: the real-time parts (loops, cameras) take their actions' wall time, and
    # tracemalloc makes a chunk cost about 1 ms, so those are what quick mode shortens
    ticks, repeats, actions, camera_actions, chunks, timed = (
        (20_000, 2_000, 1_500, 1_500, 40_000, 6_000) if full else (2_000, 500, 20, 40, 3_000, 1_000)
    )
    ticking = tick_cost(ticks)
    parsing = chunk_cost(repeats)
    looping = run_loop_overhead(actions, (LOOP_HZ, BREAKDOWN_HZ))
    timer, timed_outcome = where_time_goes(timed, BREAKDOWN_HZ)
    cameras = control_thread_cost(camera_actions)
    ordered = command_order(camera_actions)
    memory = memory_over_chunks(chunks)
    sizes = (
        f"{ticks:,} ticks, {repeats:,} chunks parsed, loops of {actions} actions at "
        f"{LOOP_HZ:g} Hz x 3, {timed:,} timed at {BREAKDOWN_HZ:g} Hz, {camera_actions} ticks "
        f"per camera setting, {chunks:,} chunks traced"
    )
    quick_note = (
        ""
        if full
        else f" Quick run: the period errors rest on {actions - 2} intervals at {LOOP_HZ:g} Hz."
    )
    memory_note = (
        ""
        if full
        else "\n\nQuick run: fewer chunks than the engine's 10,000-sample windows, which are "
        "still filling here (memory grows until they are full); the flat part after them "
        "shows in a full run."
    )
    return "\n\n".join(
        [
            "## Engine overhead",
            machine_note(full=full, sizes=sizes),
            f"CPU is the measuring thread's CPU time (`time.thread_time`), so the simulator's "
            f"threads are not counted. Model: {MODEL.short_id}.",
            render_cpu(ticking, parsing, ticks, repeats, 1.0 / MODEL.control_hz),
            f"### `run()`'s loop against a bare loop ({actions} actions at {LOOP_HZ:g} Hz, "
            f"{actions * 4} at 200 Hz)",
            "CPU per action on the caller's thread, from the first action to the last: "
            "`Policy.run()` (the engine and its driver) against a loop that sleeps to deadlines "
            "and copies a row of an array, and against `drive()` (`run()`'s loop and its "
            "`Episode`) around a player that hands out a copy of a row, with no engine; the "
            "median of three runs of each, taken in turn. Gaps: intervals over 1.5 periods."
            + quick_note,
            render_loop(looping),
            f"### Where `run()`'s time goes at {BREAKDOWN_HZ:g} Hz",
            f"The loops above at {BREAKDOWN_HZ:g} Hz; then the engine's part, from one run like "
            "`run()`'s with each tick's and each commit's caller's-thread CPU timed alone, by "
            "what the tick did: a chunk arrived, a request started, a chunk started (its "
            "seam's hand-over begins), a step went out with a hand-over's correction or as "
            "planned, or nothing went out (each tick under the first that applies). The "
            "timing's own cost is in the run, not in these rows.",
            render_breakdown(
                _loops_at(looping[BREAKDOWN_HZ]),
                looping[BREAKDOWN_HZ]["floor"]["cpu_per_action"],
                timer,
                timed_outcome,
                BREAKDOWN_HZ,
            ),
            "### The control thread's time per tick (50 Hz, two 640x480 cameras)",
            "Caller's-thread CPU and wall time of each tick, all ticks and the ticks that "
            "started a request (they call `observe`). Frames encoded in `observe` (224x224 "
            "JPEG) against `RawFrame`, encoded by the worker that builds the request. The "
            "budget is 5 % of a 20 ms period: 1 ms.",
            render_cameras(cameras, 1.0 / LOOP_HZ),
            "### A request's tick: the command before the request",
            f"From the start of each tick to its command reaching `act`, at {LOOP_HZ:g} Hz with "
            "the two cameras as `RawFrame` (pixels copied in `observe`), two runs of each "
            "order in turn, pooled: `run()`'s order (`play`, the command, then `refill`, which "
            "calls `observe`, checks it and hands it to a worker) against the order before it "
            "(the whole `tick`, request included, then the command).",
            _command_order.render(ordered),
            f"### Memory over {chunks:,} chunks (tracemalloc, engine + wire parsing)" + memory_note,
            render_memory(memory),
        ]
    )
