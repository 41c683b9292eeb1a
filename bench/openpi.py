"""openpi: three ways to play an openpi policy server's chunks, on the same real server.

openpi's ``WebsocketPolicyServer`` (PyPI openpi-server) serves our trajectory policy
(``sequence_ai_sim/openpi_peer.py``: 10-step DROID chunks, 8 dims at 15 Hz = 0.67 s, a fixed
inference latency, the reference continued from each observation's time) in a process of
its own. Against it, for each latency:

- (a) openpi-client's ``WebsocketClientPolicy`` + ``ActionChunkBroker`` paced like openpi's
  ``Runtime`` (infer only when the chunk is used up, then play it from its first step);
- (b) the DROID example's loop (``examples/droid/main.py``): a blocking ``infer`` every 8
  actions, 8 of the 10 steps played, paced by sleeping the rest of each period;
- (c) this package's ``run()`` (profile ``droid``), default settings.

Every command is logged with its time, so the same metrics come from all three: duty (time
with a fresh command per period), underruns (gaps over 1.5 periods) and their seconds, the
largest gap, the seam (largest per-dimension jump where one chunk hands over to the next),
staleness (age of the observation behind each command) and the tracking error (distance of
each command from the reference at the moment it is sent: what playing stale steps costs).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

import sequence_ai_core as sai
from bench._common import machine_note, quantile, ratio, table
from bench._tapped import Tapped
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.openpi import BUILTIN
from sequence_ai_core.playback.runner import drive
from sequence_ai_sim.openpi_peer import free_port, reference

HZ = 15.0
PERIOD_S = 1.0 / HZ
HORIZON = 10
DIM = 8
#: The DROID example's open-loop horizon: 8 of the 10 steps, then a blocking call.
OPEN_LOOP_HORIZON = 8
LATENCIES = (0.3, 0.8)
#: Quick mode: one latency, 0.3 s (at 0.8 s the blocking loops (a) and (b) take 5 s for 30
#: actions instead of 3; bench/rtc.py's quick run is at 0.8 s), and the three loops this
#: compares (the engine's other settings, (d) and (e), in full runs only).
QUICK_LATENCIES = (0.3,)
QUICK_LOOPS = "abc"
STAMP = "observation/timestamp"
PROFILE = dataclasses.replace(BUILTIN["droid"], timestamp_key=(STAMP,))
LOOPS = {
    "a": "(a) openpi ActionChunkBroker loop",
    "b": "(b) openpi DROID example (8 of 10, blocking)",
    "c": "(c) this engine, `run()` defaults",
    "d": "(d) this engine, `max_in_flight=1`",
    "e": '(e) this engine, `freshness="fresh"`',
}


@dataclass
class Log:
    """(time, action, chunk number, observation time) of every command sent."""

    times: list[float] = field(default_factory=list)
    actions: list[np.ndarray[Any, Any]] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    observed: list[float] = field(default_factory=list)
    requests: int = 0
    backoffs: int | None = None

    def add(self, action: np.ndarray[Any, Any], chunk: int, observed_at: float) -> None:
        self.times.append(time.time())
        self.actions.append(np.asarray(action, dtype=np.float64))
        self.chunks.append(chunk)
        self.observed.append(observed_at)


@contextlib.contextmanager
def peer_process(
    latency_s: float, module: str = "sequence_ai_sim.openpi_peer", *more: str
) -> Iterator[str]:
    """A peer server (``module``: openpi_peer or rtc_peer) in a process of its own, with
    ``more`` arguments; yields its URL once it answers."""
    port = free_port()
    command = [sys.executable, "-m", module, "--port", str(port)]
    command += ["--latency", str(latency_s), "--dim", str(DIM), "--hz", str(HZ)]
    process = subprocess.Popen(
        [*command, "--horizon", str(HORIZON), *more],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=0.5).is_success:
                    break
            time.sleep(0.05)
        yield f"ws://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


class Camera:
    """Two 320x240 cameras and a 7-joint arm; frames are stamped when taken."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.exterior = rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)
        self.wrist = rng.integers(0, 255, (240, 320, 3), dtype=np.uint8)

    def openpi_request(self) -> dict[str, Any]:
        """What the DROID example builds (openpi's image_tools on the caller's thread)."""
        from openpi_client import image_tools

        return {
            "observation/exterior_image_1_left": image_tools.resize_with_pad(
                self.exterior, 224, 224
            ),
            "observation/wrist_image_left": image_tools.resize_with_pad(self.wrist, 224, 224),
            "observation/joint_position": np.zeros(7),
            "observation/gripper_position": np.zeros(1),
            "prompt": "put the cup in the sink",
            STAMP: time.time(),
        }

    def observation(self) -> sai.Observation:
        return sai.Observation(
            proprioception=sai.Proprioception(joint_positions=[0.0] * 7, gripper=0.0),
            images=[
                RawFrame("exterior_1", self.exterior, copy=False),
                RawFrame("wrist_left", self.wrist, copy=False),
            ],
            instruction="put the cup in the sink",
        )


def _paced(step: Callable[[], None], actions: int) -> None:
    """openpi's Runtime pacing: sleep the rest of the period after each step."""
    last = time.time()
    for _ in range(actions):
        step()
        now = time.time()
        if now - last < PERIOD_S:
            time.sleep(PERIOD_S - (now - last))
            last = time.time()
        else:
            last = now


def broker_loop(url: str, actions: int) -> Log:
    from openpi_client import action_chunk_broker, websocket_client_policy

    camera, log = Camera(), Log()
    client = websocket_client_policy.WebsocketClientPolicy(url)
    broker = action_chunk_broker.ActionChunkBroker(client, action_horizon=HORIZON)
    state = {"chunk": 0, "observed": 0.0}

    def step() -> None:
        request = camera.openpi_request()
        if broker._last_results is None:  # the broker is about to call infer on this one
            state["chunk"] += 1
            state["observed"] = request[STAMP]
            log.requests += 1
        log.add(broker.infer(request)["actions"], state["chunk"], state["observed"])

    _paced(step, actions)
    return log


def droid_example_loop(url: str, actions: int) -> Log:
    from openpi_client import websocket_client_policy

    camera, log = Camera(), Log()
    client = websocket_client_policy.WebsocketClientPolicy(url)
    chunk: np.ndarray[Any, Any] | None = None
    done, observed = 0, 0.0
    for _ in range(actions):
        started = time.time()
        if chunk is None or done >= OPEN_LOOP_HORIZON:
            request = camera.openpi_request()
            chunk, done, observed = client.infer(request)["actions"], 0, request[STAMP]
            log.requests += 1
        log.add(chunk[done], log.requests, observed)
        done += 1
        elapsed = time.time() - started
        if elapsed < PERIOD_S:
            time.sleep(PERIOD_S - elapsed)
    return log


class Recorder(Tapped):
    """The engine as ``run()`` drives it, its last tick kept for each tick's chunk and
    staleness."""


def engine_loop(url: str, actions: int, config: sai.EngineConfig | None = None) -> Log:
    """``runner.drive`` + ``PlaybackEngine`` with the defaults, which is what ``run()`` is
    (``run()`` adds the observation check and SIGTERM handling); the recorder reads the
    chunk and the staleness of each played step off the engine's tick."""
    camera, log = Camera(), Log()
    with sai.connect(url, profile=PROFILE) as policy:
        recorder = Recorder(sai.PlaybackEngine(policy, config or sai.EngineConfig()))

        def act(action: np.ndarray[Any, Any]) -> None:
            tick = recorder.last
            assert tick is not None
            log.add(action, tick.chunk_seq, time.time() - tick.staleness_s)

        try:
            outcome = drive(
                recorder,
                camera.observation,
                act,
                max_actions=actions,
                validate=lambda a: bool(np.all(np.isfinite(a))),
                stall_timeout_s=5.0,
            )
        finally:
            recorder.engine.close()
        log.requests = outcome.requests
        log.backoffs = outcome.backoffs
    return log


@dataclass
class Result:
    duty: float
    underruns: int
    underrun_s: float
    max_gap_s: float
    seam: float
    staleness_p50: float
    staleness_p95: float
    tracking_p95: float
    requests: int
    chunks: int
    backoffs: int | None


def measure(log: Log) -> Result:
    times = np.asarray(log.times)
    actions = np.asarray(log.actions)
    gaps = np.diff(times)
    late = gaps[gaps > 1.5 * PERIOD_S]
    elapsed = times[-1] - times[0] + PERIOD_S
    staleness = times - np.asarray(log.observed)
    chunks = np.asarray(log.chunks)
    seams = [
        float(np.max(np.abs(actions[i] - actions[i - 1])))
        for i in range(1, len(actions))
        if chunks[i] != chunks[i - 1]
    ]
    tracking = np.max(np.abs(actions - reference(times, DIM)), axis=1)
    return Result(
        duty=min(1.0, len(actions) * PERIOD_S / elapsed),
        underruns=len(late),
        underrun_s=float(np.sum(late - PERIOD_S)),
        max_gap_s=float(np.max(gaps)) if len(gaps) else math.nan,
        seam=max(seams, default=0.0),
        staleness_p50=quantile(list(staleness), 0.5),
        staleness_p95=quantile(list(staleness), 0.95),
        tracking_p95=quantile(list(tracking), 0.95),
        requests=log.requests,
        chunks=len(set(chunks.tolist())),
        backoffs=log.backoffs,
    )


RUNNERS: dict[str, Callable[[str, int], Log]] = {
    "a": broker_loop,
    "b": droid_example_loop,
    "c": engine_loop,
    "d": lambda url, n: engine_loop(url, n, sai.EngineConfig(max_in_flight=1)),
    "e": lambda url, n: engine_loop(url, n, sai.EngineConfig(freshness="fresh")),
}


def run(full: bool) -> str:
    # quick: a loop costs its actions' time, (a) and (b) a blocking refill per chunk on top;
    # three loops of 30 actions take 9 s, ten loops of 150 took 152 s
    actions = 450 if full else 30
    latencies = LATENCIES if full else QUICK_LATENCIES
    loops = "".join(RUNNERS) if full else QUICK_LOOPS
    sizes = (
        f"{actions} actions per loop, loops {', '.join(f'({k})' for k in loops)} at "
        f"{' and '.join(f'{latency:g} s' for latency in latencies)}"
    )
    sections = [
        "# openpi: the broker loop, the DROID example and this engine on one real server\n",
        machine_note(full=full, sizes=sizes),
        f"\nopenpi-server's `WebsocketPolicyServer`, our trajectory policy: {HORIZON}-step "
        f"chunks of {DIM} dims at {HZ:g} Hz ({HORIZON / HZ:.2f} s), fixed inference latency; "
        f"{actions} actions per loop. Duty = time with a fresh command each period; underruns "
        "= gaps over 1.5 periods; seam = largest per-dimension jump at a chunk handover; "
        "tracking = distance of each command from the reference at the moment it is sent."
        + ("" if full else f" Quick run: {actions / HORIZON:.0f} chunks per loop, so the seams "
           "and the ratios rest on a few.")
        + "\n",
    ]  # fmt: skip
    for latency in latencies:
        results: dict[str, Result] = {}
        for key in loops:
            with peer_process(latency) as url:
                results[key] = measure(RUNNERS[key](url, actions))
        base = results["a"]
        rows = []
        for key, result in results.items():
            rows.append(
                [
                    LOOPS[key],
                    f"{result.duty * 100:.1f} %",
                    ratio(result.duty, base.duty),
                    str(result.underruns),
                    f"{result.underrun_s:.2f}",
                    f"{result.max_gap_s * 1000:.0f}",
                    f"{result.seam:.3f}",
                    f"{result.staleness_p50:.2f} / {result.staleness_p95:.2f}",
                    f"{result.tracking_p95:.3f}",
                    ratio(result.tracking_p95, base.tracking_p95),
                    f"{result.requests} / {result.chunks}",
                    "-" if result.backoffs is None else str(result.backoffs),
                ]
            )
        sections.append(f"\n## inference latency {latency:g} s\n")
        sections.append(
            table(
                [
                    "loop",
                    "duty",
                    "vs (a)",
                    "underruns",
                    "underrun s",
                    "max gap ms",
                    "seam (rad/s)",
                    "staleness p50 / p95 s",
                    "tracking p95",
                    "vs (a)",
                    "requests / chunks played",
                    "backoffs",
                ],
                rows,
            )
        )
    return "\n".join(sections)
