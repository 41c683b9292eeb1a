"""``make demo`` (``python -m sequence_ai_sim.demo``): the client against a simulated gateway.

No key, no network, no robot: an in-process gateway simulator with the real gateway's
0.79 s refill time, and a simulated arm per model. For each catalogue model the arm is driven
by ``run()`` and, side by side, by the strictly closed loop (``prefetch=False``: request
only when nothing is left to play); then a few steps of the simple ``next_action()`` loop.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from sequence_ai_core.action_spaces import seam_unit
from sequence_ai_core.gateway.catalogue import models
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray, Model

from .arm import SimulatedArm
from .catalogue import CATALOGUE, reference_chunk
from .server import GatewaySimulator

# The simulator is imported where it is used, never at import time: the client package does
# not depend on sequence_ai_sim (test/project/test_package_layout.py checks it).

DEMO_KEY = "sk-demo-not-a-real-key"
REFILL_S = 0.79
MOTION_S = 3.0
JOINT_LIMIT_RAD = 2.8


def within_limits(action: FloatArray) -> bool:
    """The demo's validator: finite, and joint values inside the simulated arm's range."""
    return bool(np.all(np.isfinite(action)) and np.all(np.abs(action[:-1]) < JOINT_LIMIT_RAD))


@dataclass
class Pair:
    engine: RunOutcome | None = None
    closed_loop: RunOutcome | None = None


def drive(url: str, model: str, prefetch: bool) -> RunOutcome:
    """One episode on a fresh arm; ``MOTION_S`` seconds of commands."""

    arm = SimulatedArm(model)
    with connect(model, api_key=DEMO_KEY, base_url=url, allow_insecure_http=True) as policy:
        return policy.run(
            arm.observe,
            arm.act,
            max_actions=int(MOTION_S * CATALOGUE[model].control_hz),
            validate=within_limits,
            prefetch=prefetch,
        )


def compare(url: str, model: str) -> Pair:
    """run() and the closed loop at the same time, each with its own arm and connection."""
    pair = Pair()

    def closed_loop() -> None:
        pair.closed_loop = drive(url, model, prefetch=False)

    other = threading.Thread(target=closed_loop, name=f"demo-{model}")
    other.start()
    pair.engine = drive(url, model, prefetch=True)
    other.join()
    return pair


GLOSSARY = """\
How to read the numbers:
  duty cycle     share of control ticks that sent an action (100 % = the arm never waited)
  underruns      ticks with no planned step: the arm stood still (velocity spaces get zeros)
  max gap        longest time between two commands
  refill latency time from sending a request to having its chunk in hand
  staleness      age of the observation behind each executed step: the plan is that old
  stale steps skipped
                 steps whose time passed while their request was in flight; chunks are
                 played by the clock, so these are skipped instead of replaying the past
  seam jump      largest per-joint change from the last step of one chunk to the first step
                 of the next, in the action's units (rad/s for velocities, rad for positions);
                 compare it with the largest step inside one chunk, printed beside it"""


class Progress:
    """A dot per half second while an episode runs, so the demo never sits silent."""

    def __init__(self, label: str) -> None:
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="demo-progress", daemon=True)
        print(label, end="", flush=True)

    def _tick(self) -> None:
        while not self._done.wait(0.5):
            print(".", end="", flush=True)

    def __enter__(self) -> Progress:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        print(f" {time.monotonic() - self._started:.1f} s", flush=True)


def in_chunk_step(model: str) -> float:
    """Largest per-joint change between consecutive steps of the simulator's reference."""

    values = reference_chunk(CATALOGUE[model], time.time(), 300)[:, :-1]  # joints, no gripper
    return float(np.abs(np.diff(values, axis=0)).max())


def print_catalogue(entries: list[Model]) -> None:
    print(f"{'model':28} {'robot':13} {'dims':>4} {'Hz':>4} {'steps':>5} {'covers':>7}  cameras")
    for m in entries:
        print(
            f"{m.short_id:28} {m.robot:13} {m.action_dim:>4} {m.control_hz:>4g} "
            f"{m.action_horizon:>5} {m.covers_seconds:>6.2f}s  {', '.join(m.camera_views)}"
        )


def pct(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:6.1%}"


def print_comparison(results: dict[str, Pair]) -> None:

    print(
        f"{'model':28} {'chunk':>6} {'run()':>7} {'closed loop':>12} {'(long run)':>10}  underruns"
    )
    for model, pair in results.items():
        if pair.engine is None or pair.closed_loop is None:
            continue  # compare() fills both
        covers = CATALOGUE[model].covers_seconds
        # a long closed-loop run moves covers / (covers + refill) of the time
        steady = covers / (covers + REFILL_S)
        print(
            f"{model:28} {covers:>5.2f}s {pct(pair.engine.duty_cycle):>7} "
            f"{pct(pair.closed_loop.duty_cycle):>12} {pct(steady):>10}  "
            f"{pair.engine.underruns} vs {pair.closed_loop.underruns}"
        )


def next_action_loop(url: str, steps: int = 20) -> None:
    """The simple loop: one call per action; it blocks for a whole refill when empty."""

    model = "pi05-droid"
    arm = SimulatedArm(model)
    period = 1.0 / CATALOGUE[model].control_hz
    with connect(model, api_key=DEMO_KEY, base_url=url, allow_insecure_http=True) as policy:
        for n in range(steps):
            started = time.monotonic()
            action = policy.next_action(arm.observe())
            took = time.monotonic() - started
            if not within_limits(action):
                print("  validator refused an action: stopping")
                return
            arm.act(action)
            if n < 2 or took > period:
                note = "  <- waited for a refill: the arm stood still" if took > period else ""
                print(
                    f"  action {n:2d}: {took * 1000:6.0f} ms, {policy.buffered:2d} buffered{note}"
                )
            time.sleep(max(0.0, period - took))
    print(f"  ... {steps} actions; next_action() never prefetches, run() does.")


def main() -> int:

    print("sequence-ai demo: a simulated gateway and arm, no key, no network, no robot.")
    with GatewaySimulator(api_key=DEMO_KEY, latency_s=REFILL_S, workers=8) as sim:
        print(f"\nSimulated gateway at {sim.url}, {REFILL_S} s per refill.\n\nCatalogue:")
        print_catalogue(models(endpoint="act", base_url=sim.url, allow_insecure_http=True))
        print(f"\n{GLOSSARY}")
        results: dict[str, Pair] = {}
        for n, model in enumerate(CATALOGUE, start=1):
            label = (
                f"\n[{n}/{len(CATALOGUE)}] {model}: {MOTION_S:g} s of motion with run(), "
                "the closed loop beside it "
            )
            with Progress(label):
                results[model] = compare(sim.url, model)
            engine = results[model].engine
            if engine is not None:
                print(engine.summary())
            unit = seam_unit(CATALOGUE[model].action_space)
            print(
                f"  largest step inside one chunk of this model: {in_chunk_step(model):.4f} {unit}"
            )
        print(f"\nTime moving, run() vs the closed loop (refill only when empty), {REFILL_S} s:")
        print_comparison(results)
        print(
            "(long run: what the closed loop converges to, covers / (covers + refill);\n"
            " a short run starts with a full chunk in hand, so it looks better)"
        )
        print("\nnext_action(), the simple loop:")
        next_action_loop(sim.url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
