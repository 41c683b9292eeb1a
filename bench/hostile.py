"""Every end holds, on time; no body exhausts memory. Measured against hostile gateways.

1. A gateway that goes silent mid-run (every refill hangs): the time from the last planned
   step to ``hold``, for ``run()`` against a loop that holds only when an error surfaces
   (what ``run()`` did before: silence until the request's deadline, here 3 s, 1 s in quick
   mode). Velocity arms keep executing the last command for all of that time.
2. Peak Python memory (tracemalloc) of one request whose answer is the largest body the
   client accepts, and of an 820-byte stacked-gzip body that decodes to 64 MB: the client
   against a plain ``httpx.Client`` (which advertises and decodes gzip without limit).

The ROS node is not measured here: it needs rclpy, and its underrun hold is the node's own
publisher path (tested in the real-rclpy tier); ``run()`` and the node share the engine
whose first empty tick triggers both.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
import tracemalloc
from typing import Any

import httpx

from bench._common import BENCH_KEY, counted, machine_note, ms, quantile, ratio, table
from sequence_ai_core import SequencesError, connect
from sequence_ai_core.limits import MAX_BODY_BYTES
from sequence_ai_sim import CATALOGUE, Fault, GatewaySimulator, SimulatedArm

MODELS = ["lingbot-vla-v2-6b", "pi05-droid", "lingbot-va-5b"]
#: Quick mode's: the shortest and the longest period.
QUICK_MODELS = ["lingbot-vla-v2-6b", "pi05-droid"]
#: The baseline's request deadline: what the arm waited for before (30 s by default).
BASELINE_TIMEOUT_S = 3.0
QUICK_BASELINE_TIMEOUT_S = 1.0


class Timeline:
    """When the last action went out and when hold came."""

    def __init__(self) -> None:
        self.last_act = float("nan")
        self.hold_at = float("nan")
        self.acted = 0

    def act(self, action: Any) -> None:
        self.last_act = time.monotonic()
        self.acted += 1

    def hold(self) -> None:
        if self.hold_at != self.hold_at:  # first hold only
            self.hold_at = time.monotonic()


def silent_after(sim: GatewaySimulator, timeline: Timeline, actions: int) -> Any:
    def act(action: Any) -> None:
        timeline.act(action)
        if timeline.acted == actions:
            sim.inject(Fault.timeout(600.0), times=10_000)

    return act


def run_hold_delay(model: str) -> float:
    arm = SimulatedArm(model, image_size=(32, 32))
    timeline = Timeline()
    with (
        GatewaySimulator(api_key=BENCH_KEY, latency_s=0.05) as sim,
        connect(model, api_key=BENCH_KEY, base_url=sim.url, timeout_s=600) as policy,
    ):
        policy.run(
            arm.observe,
            silent_after(sim, timeline, 20),
            max_actions=10_000,
            validate=lambda a: True,
            hold=timeline.hold,
            stall_timeout_s=0.5,
        )
    return timeline.hold_at - timeline.last_act


def baseline_hold_delay(model: str, deadline_s: float) -> float:
    """``next_action``-free stand-in for the old loop: play the plan, hold only when a
    request's error surfaces (its deadline)."""
    arm = SimulatedArm(model, image_size=(32, 32))
    timeline = Timeline()
    with (
        GatewaySimulator(api_key=BENCH_KEY, latency_s=0.05) as sim,
        connect(model, api_key=BENCH_KEY, base_url=sim.url, timeout_s=deadline_s) as p,
    ):
        from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine

        act = silent_after(sim, timeline, 20)
        engine = PlaybackEngine(p, EngineConfig())
        period = 1.0 / CATALOGUE[model].control_hz
        try:
            while True:
                tick = engine.tick(time.monotonic(), arm.observe)
                if tick.action is not None:
                    act(tick.action)
                    engine.commit()
                time.sleep(period)
        except SequencesError:
            timeline.hold()
        finally:
            engine.close(wait=False)
    return timeline.hold_at - timeline.last_act


def hold_table(models: list[str], repeats: int, deadline_s: float) -> str:
    rows = []
    for model in models:
        period = 1.0 / CATALOGUE[model].control_hz
        ours = [run_hold_delay(model) for _ in range(repeats)]
        before = [baseline_hold_delay(model, deadline_s) for _ in range(1)]
        rows.append(
            [model, ms(period, 1), ms(quantile(ours, 0.5), 1), ms(max(ours), 1),
             ratio(max(ours), period), ms(quantile(before, 0.5), 0),
             ratio(quantile(before, 0.5), quantile(ours, 0.5))]
        )  # fmt: skip
    return table(
        ["model", "period ms", "run(): last step to hold, median ms", "max ms", "max / period",
         f"hold only on error ({deadline_s:g} s deadline) ms", "before / after"],
        rows,
    )  # fmt: skip


# ------------------------------------------------------------------ memory


class CannedServer:
    """Answers every request on loopback with the same raw bytes (keep-alive)."""

    def __init__(self, response: bytes) -> None:
        self.response = response
        self._server = socket.create_server(("127.0.0.1", 0))
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(sock,), daemon=True).start()

    def _answer(self, sock: socket.socket) -> None:
        with sock:
            buffer = b""
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buffer += data
                if b"\r\n\r\n" in buffer:
                    head, _, rest = buffer.partition(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    if len(rest) >= length:
                        buffer = rest[length:]
                        sock.sendall(self.response)

    def close(self) -> None:
        self._server.close()


def _response(body: bytes, encoding: str | None = None) -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    if encoding:
        head += f"Content-Encoding: {encoding}\r\n"
    return head.encode() + b"\r\n" + body


def largest_body(model: str) -> bytes:
    entry = CATALOGUE[model]
    chunk = {
        "steps": [{"index": i, "values": [0.123456789] * entry.action_dim} for i in range(15)],
        "robot": entry.robot,
        "action_space": entry.action_space,
        "action_dim": entry.action_dim,
        "control_frequency_hz": entry.control_hz,
    }
    body = {"id": "big", "model": entry.id, "action_chunk": chunk, "warnings": [""]}
    pad = MAX_BODY_BYTES - len(json.dumps(body).encode()) - 1
    body["warnings"] = ["x" * pad]
    return json.dumps(body).encode()


def peak_mb(call: Any) -> tuple[float, str]:
    tracemalloc.start()
    try:
        call()
        outcome = "accepted"
    except Exception as exc:  # what each client does is the result
        outcome = f"{type(exc).__name__}"
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak / 1e6, outcome


def memory_table() -> str:
    model = "pi05-droid"
    arm = SimulatedArm(model, image_size=(32, 32))
    observation = arm.observe()
    bomb = gzip.compress(gzip.compress(b'{"id": "' + b"0" * 64_000_000 + b'"}', 9), 9)
    cases = [
        (f"largest accepted body ({MAX_BODY_BYTES // 1024} KiB)", _response(largest_body(model))),
        (f"stacked gzip, {len(bomb)} B on the wire, 64 MB decoded", _response(bomb, "gzip, gzip")),
    ]
    rows = []
    for name, response in cases:
        server = CannedServer(response)
        try:
            with connect(model, api_key=BENCH_KEY, base_url=server.url) as policy:
                ours, ours_result = peak_mb(lambda: policy.predict(observation))
            with httpx.Client(base_url=server.url) as plain:
                theirs, theirs_result = peak_mb(lambda: plain.post("/v1/act", json={}).json())
        finally:
            server.close()
        rows.append([name, f"{ours:.1f}", ours_result, f"{theirs:.1f}", theirs_result,
                     ratio(ours, theirs)])  # fmt: skip
    return table(
        ["answer", "client peak MB", "client result", "plain httpx peak MB", "httpx result",
         "client / httpx"],
        rows,
    )  # fmt: skip


def run(full: bool) -> str:
    # quick: a run() costs about 2 s, the baseline its deadline and 1.5 s more; three
    # models, two runs each and the 3 s deadline took 26 s
    repeats = 5 if full else 1
    models = MODELS if full else QUICK_MODELS
    deadline = BASELINE_TIMEOUT_S if full else QUICK_BASELINE_TIMEOUT_S
    sizes = (
        f"{counted(len(models), 'model')}, {counted(repeats, 'run')} of each, "
        f"the baseline's deadline {deadline:g} s"
    )
    return "\n\n".join(
        [
            "### A gateway that goes silent mid-run: last planned step to hold",
            ("" if full else "Quick run: one run of `run()` per model, so the median and "
             f"max are that run's, and a {deadline:g} s deadline for the baseline.\n\n")
            + hold_table(models, repeats, deadline),
            "### Peak memory of one answer",
            memory_table(),
            machine_note(full=full, sizes=sizes),
        ]
    )  # fmt: skip


if __name__ == "__main__":
    print(run(False))
