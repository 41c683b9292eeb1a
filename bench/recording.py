"""What the flight recorder costs: ``run()`` recording against ``run()`` not, side by side.

Three tables: the writer library (rosbags against ``mcap`` + ``mcap-ros2-support``, the two
that write ROS 2 MCAP without ROS), the control loop's CPU and worst tick with recording on
and off, and the size of a pi05-droid episode with two 224x224 cameras at the default image
rate. The simulator runs in a process of its own.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from sequence_ai_core.policy import connect
from sequence_ai_core.recording import topics
from sequence_ai_core.recording.config import DEFAULT_IMAGE_HZ
from sequence_ai_core.types import FloatArray, Observation
from sequence_ai_sim.arm import SimulatedArm
from sequence_ai_sim.catalogue import CATALOGUE

from ._common import BENCH_KEY, machine_note, ratio, simulator_process, table, us

MODEL = CATALOGUE["pi05-droid"]
CAMERAS = (224, 224)


def writer_cost(messages: int) -> dict[str, float]:
    """Seconds per joint state serialized and written, by each library, into a fresh file."""
    from mcap_ros2.writer import Writer as McapRos2Writer
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    joint_state = store.types[topics.OBSERVATION.msgtype]
    header, stamp = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    names = [f"joint_{i}" for i in range(7)]
    empty = np.empty(0)
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        with Writer(Path(scratch) / "rb", version=8, storage_plugin=StoragePlugin.MCAP) as bag:
            channel = bag.add_connection(
                topics.OBSERVATION.name, joint_state.__msgtype__, typestore=store
            )
            for i in range(messages):
                message = joint_state(
                    header=header(stamp=stamp(sec=i, nanosec=0), frame_id=""),
                    name=names,
                    position=np.full(7, float(i)),
                    velocity=empty,
                    effort=empty,
                )
                bag.write(channel, i, store.serialize_cdr(message, joint_state.__msgtype__))
        out["rosbags"] = (time.perf_counter() - started) / messages
        definition, _ = store.generate_msgdef(joint_state.__msgtype__, ros_version=2)
        started = time.perf_counter()
        with (Path(scratch) / "m.mcap").open("wb") as stream:
            writer = McapRos2Writer(stream)
            schema = writer.register_msgdef(joint_state.__msgtype__, definition)
            for i in range(messages):
                message_dict = {
                    "header": {"stamp": {"sec": i, "nanosec": 0}, "frame_id": ""},
                    "name": names,
                    "position": [float(i)] * 7,
                    "velocity": [],
                    "effort": [],
                }
                writer.write_message(topics.OBSERVATION.name, schema, message_dict, i, i)
            writer.finish()
        out["mcap-ros2-support"] = (time.perf_counter() - started) / messages
    return out


def _one_run(
    url: str, observe: Callable[[], Observation], actions: int, hz: float, record: Path | None
) -> dict[str, float]:
    stamps: list[float] = []
    cpu: list[float] = []
    process: list[float] = []

    def act(action: FloatArray) -> None:
        stamps.append(time.perf_counter())
        cpu.append(time.thread_time())
        process.append(time.process_time())

    with connect(MODEL.short_id, api_key=BENCH_KEY, base_url=url, control_hz=hz) as policy:
        outcome = policy.run(
            observe, act, max_actions=actions, validate=lambda a: True, record=record
        )
    if outcome.error is not None or len(cpu) < 2:
        raise RuntimeError(f"run() did not play: {outcome!r}")
    intervals = np.diff(np.asarray(stamps))[1:]  # the first includes the first request
    return {
        "cpu": (cpu[-1] - cpu[0]) / (len(cpu) - 1),
        "process": (process[-1] - process[0]) / (len(process) - 1),
        "worst": float(np.max(np.abs(intervals - 1.0 / hz))),
        "played": float(outcome.actions),
        "recorded": float(_commands_in(outcome.recording)),
        "dropped": float(outcome.recording_dropped),
    }


def _commands_in(bag: str | None) -> int:
    if bag is None:
        return 0
    from rosbags.rosbag2 import Reader

    with Reader(bag) as reader:
        return sum(c.msgcount for c in reader.connections if c.topic == topics.COMMAND.name)


def loop_cost(actions: int, hz: float, repeats: int) -> dict[str, dict[str, float]]:
    """Median of ``repeats`` runs of each, taken in turn, two 224x224 cameras observed."""
    arm = SimulatedArm(MODEL, image_size=CAMERAS)
    observation = arm.observe("bench")
    runs: dict[str, list[dict[str, float]]] = {"recording": [], "off": []}
    with tempfile.TemporaryDirectory() as scratch, simulator_process(latency_s=0.02) as url:
        for _ in range(repeats):
            runs["off"].append(_one_run(url, lambda: observation, actions, hz, None))
            runs["recording"].append(_one_run(url, lambda: observation, actions, hz, Path(scratch)))
    return {
        name: {key: float(np.median([run[key] for run in stats])) for key in stats[0]}
        for name, stats in runs.items()
    }


def episode_size(seconds: float) -> tuple[int, int, float]:
    """(bytes on disk, of which images, seconds played) of one pi05-droid episode at its own
    rate, two 224x224 cameras, images at the default rate."""
    arm = SimulatedArm(MODEL, image_size=CAMERAS)
    scratch = Path(tempfile.mkdtemp())
    try:
        with (
            simulator_process(latency_s=0.2) as url,
            connect(MODEL.short_id, api_key=BENCH_KEY, base_url=url) as policy,
        ):
            outcome = policy.run(
                arm.observe,
                arm.act,
                max_actions=round(seconds * MODEL.control_hz),
                validate=lambda a: True,
                record=scratch,
            )
        assert outcome.recording is not None
        bag = Path(outcome.recording)
        size = sum(path.stat().st_size for path in bag.iterdir())
        from rosbags.rosbag2 import Reader

        with Reader(bag) as reader:
            images = sum(
                len(raw)
                for connection, _, raw in reader.messages()
                if connection.topic.startswith(topics.IMAGE_PREFIX)
            )
        return size, images, outcome.elapsed_s
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: The continuity benchmark's settings (bench/continuity.py): its refill time and the wider
#: of its jitters; strategy (a) refills only when the plan is empty, (c) is the engine.
CONTINUITY_JITTER = 0.3
COMPARED = ("stalls", "underruns", "chunks", "max_seam_jump", "max_seam_step")


#: The report of one of those runs, as docs/recording.md shows it (``make bench-full``).
FIGURE = Path(__file__).resolve().parent / "results" / "report.png"
FIGURE_RUN = ("lingbot-va-5b", True)


def recorded_continuity_run(
    job: tuple[str, bool, float, bool],
) -> dict[str, tuple[float, float]]:
    """One continuity run recorded, and (outcome, report) for each ``COMPARED`` number;
    with ``figure`` its report's figure is ``FIGURE``."""
    from sequence_ai_core.recording.episode_log import read_episode
    from sequence_ai_core.recording.measures import measure
    from sequence_ai_core.recording.plot import plot
    from sequence_ai_sim import GatewaySimulator

    from .continuity import MEDIAN_S

    model, prefetch, seconds, figure = job
    arm = SimulatedArm(model)
    scratch = Path(tempfile.mkdtemp())
    try:
        with GatewaySimulator(
            api_key=BENCH_KEY, latency_s=MEDIAN_S, jitter=CONTINUITY_JITTER, seed=7
        ) as sim, connect(
            model, api_key=BENCH_KEY, base_url=sim.url, allow_insecure_http=True
        ) as policy:  # fmt: skip
            outcome = policy.run(
                arm.observe, arm.act, max_actions=round(seconds * CATALOGUE[model].control_hz),
                validate=lambda a: True, prefetch=prefetch, record=scratch,
            )  # fmt: skip
        assert outcome.recording is not None
        episode = read_episode(outcome.recording)
        measures = measure(episode)
        if figure:
            plot(episode, FIGURE)
        return {k: (float(getattr(outcome, k)), float(getattr(measures, k))) for k in COMPARED}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


#: Quick runs: one model whose chunks are longer than the refill and one shorter.
QUICK_MODELS = ("pi05-droid", "lingbot-vla-v2-6b")


def continuity_agreement(seconds: float, *, full: bool) -> list[list[str]]:
    """Every catalogue model, strategies (a) and (c), each run in a process of its own (the
    two numbers compared come from the same run, so sharing the cores cannot part them)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    jobs = [
        (model, prefetch, seconds, full and (model, prefetch) == FIGURE_RUN)
        for model in (CATALOGUE if full else QUICK_MODELS)
        for prefetch in (False, True)
    ]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=context) as pool:
        results = list(pool.map(recorded_continuity_run, jobs))
    rows = []
    for (model, prefetch, _, _), numbers in zip(jobs, results, strict=True):
        same = all(abs(a - b) <= 1e-9 for a, b in numbers.values())
        cells = [f"{a:g} / {b:g}" if k in ("stalls", "underruns", "chunks") else
                 f"{a:.4f} / {b:.4f}" for k, (a, b) in numbers.items()]  # fmt: skip
        rows.append([model, "(c) engine" if prefetch else "(a) when empty", *cells,
                     "yes" if same else "NO"])  # fmt: skip
    return rows


def run(full: bool) -> str:
    messages, actions, repeats, seconds = (20_000, 500, 5, 60.0) if full else (2_000, 60, 2, 3.0)
    hz = 50.0
    writers = writer_cost(messages)
    loops = loop_cost(actions, hz, repeats)
    size, images, played = episode_size(seconds)
    continuity_s = 20.0 if full else 3.0
    agreement = continuity_agreement(continuity_s, full=full)
    per_minute = 60.0 / played
    on, off = loops["recording"], loops["off"]
    lines = [
        "## Recording",
        "",
        machine_note(
            full=full,
            sizes=f"{messages} messages per writer; {repeats} runs of {actions} actions at "
            f"{hz:g} Hz each way; a {seconds:g} s episode for the size; "
            f"{len(agreement)} continuity runs of {continuity_s:g} s",
        ),
        "",
        "### The writer: one `sensor_msgs/JointState` serialized and written to MCAP",
        "",
        table(
            ["library", "µs per message", "vs rosbags"],
            [[name, us(cost), ratio(cost, writers["rosbags"])] for name, cost in writers.items()],
        ),
        "",
        f"### `run()` recording against not ({MODEL.short_id}, two 224x224 cameras, {hz:g} Hz)",
        "",
        "Thread CPU is the control thread's (`time.thread_time`); process CPU adds the "
        "request workers and the recorder's writer thread. Worst tick: the largest distance "
        "of an interval between two commands from the period. Median of the runs.",
        "",
        table(
            [
                "",
                "thread CPU µs/action",
                "process CPU µs/action",
                "worst tick ms",
                "commands played",
                "commands recorded",
                "dropped",
            ],
            [
                [
                    name,
                    us(s["cpu"]),
                    us(s["process"]),
                    f"{s['worst'] * 1000:.2f}",
                    f"{s['played']:.0f}",
                    f"{s['recorded']:.0f}",
                    f"{s['dropped']:.0f}",
                ]
                for name, s in loops.items()
            ],
        ),
        "",
        f"Recording on against off: thread CPU {ratio(on['cpu'], off['cpu'])}, process CPU "
        f"{ratio(on['process'], off['process'])}, worst tick "
        f"{(on['worst'] - off['worst']) * 1000:+.2f} ms.",
        "",
        "### Size of one episode",
        "",
        table(
            ["episode", "played s", "bag MB", "of which images MB", "MB per minute"],
            [
                [
                    f"{MODEL.short_id}, two 224x224 cameras at {DEFAULT_IMAGE_HZ:g} Hz",
                    f"{played:.1f}",
                    f"{size / 1e6:.2f}",
                    f"{images / 1e6:.2f}",
                    f"{size / 1e6 * per_minute:.2f}",
                ]
            ],
        ),
        "",
        "### The report against the outcome, on the continuity benchmark's runs",
        "",
        f"Each row one run recorded ({continuity_s:g} s, the refill time of "
        f"bench/continuity.py, jitter {CONTINUITY_JITTER}); each cell the `RunOutcome`'s number "
        "/ the one `sequence-ai report` counts from the bag's streams.",
        "",
        table(["model", "strategy", *COMPARED, "same"], agreement),
    ]
    return "\n".join(lines)
