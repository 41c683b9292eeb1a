"""rtc: the seams with and without the real-time-chunking prefix, on openpi's real server.

openpi-server's ``WebsocketPolicyServer`` serves the simulator's ideal RTC policy
(``sequence_ai_sim/rtc_peer.py``: 10-step DROID chunks, 8 dims at 15 Hz = 0.67 s, a fixed
inference latency) in a process of its own, its chunks agreeing or disagreeing as real
models' do (a per-chunk offset and drift, sd 0.05 rad/s and rad/s^2 on every dimension).
This package's ``run()`` drives it with the ``droid`` profile, without and with ``rtc``
(``droid+rtc``: ``prev_chunk_left_over`` and ``inference_delay`` with every request).

Seam = the largest per-dimension change from a chunk's last command to the next chunk's
first (docs/architecture.md §3; also across an underrun, the arm held in between); in-chunk
step = the largest such change between consecutive commands of one chunk. The goal is a seam of at
most 1.1 in-chunk steps. At 0.3 s one request is out at a time. At 0.8 s the chunk is
shorter than the round trip: with ``run()``'s defaults several requests are out (queued
behind each other on the one server), and each prefix stops where the chunk in flight
before it starts; with ``max_in_flight=1`` (``config/openpi_droid.yaml``) one is, and the
plan runs out before each chunk lands.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any

import numpy as np

import sequence_ai_core as sai
from bench._common import counted, machine_note, quantile, table
from bench.openpi import DIM, HORIZON, HZ, PROFILE, Camera, Recorder, peer_process
from sequence_ai_core.openpi import load_profile
from sequence_ai_core.playback.runner import drive

#: (inference latency, engine settings) per table.
SETUPS = (
    (0.3, {}),
    (0.8, {}),
    (0.8, {"max_in_flight": 1}),
)
DISAGREEMENT = {"agreeing": 0.0, "disagreeing (sd 0.05)": 0.05}
#: Quick mode: the setup where the prefix changes the seams (at 0.3 s both profiles meet
#: the goal, at 0.8 s with several requests out neither does), on disagreeing chunks.
QUICK_SETUPS = ((0.8, {"max_in_flight": 1}),)
QUICK_LEVELS = ("disagreeing (sd 0.05)",)
PROFILES = {
    "droid": PROFILE,
    "droid+rtc": dataclasses.replace(
        load_profile("droid+rtc"), timestamp_key=PROFILE.timestamp_key
    ),
}


def rtc_peer(latency_s: float, disagreement: float) -> contextlib.AbstractContextManager[str]:
    return peer_process(
        latency_s, "sequence_ai_sim.rtc_peer", "--disagreement", str(disagreement), "--seed", "7"
    )


def seams(
    url: str, profile: Any, actions: int, settings: dict[str, Any]
) -> tuple[list[float], list[float]]:
    """(seams, in-chunk steps) of one ``run()``-like drive of ``actions`` commands."""
    camera = Camera()
    times: list[float] = []
    played: list[np.ndarray[Any, Any]] = []
    chunks: list[int] = []
    with sai.connect(url, profile=profile) as policy:
        recorder = Recorder(sai.PlaybackEngine(policy, sai.EngineConfig(**settings)))

        def act(action: np.ndarray[Any, Any]) -> None:
            tick = recorder.last
            assert tick is not None
            times.append(time.monotonic())
            played.append(np.asarray(action, dtype=np.float64))
            chunks.append(tick.chunk_seq)

        try:
            drive(recorder, camera.observation, act, max_actions=actions,
                  validate=lambda a: bool(np.all(np.isfinite(a))), stall_timeout_s=5.0)  # fmt: skip
        finally:
            recorder.engine.close()
    at_seams: list[float] = []
    in_chunk: list[float] = []
    for n in range(1, len(played)):
        jump = float(np.max(np.abs(played[n] - played[n - 1])))
        (at_seams if chunks[n] != chunks[n - 1] else in_chunk).append(jump)
    return at_seams, in_chunk


def run(full: bool) -> str:
    # quick: a run costs its actions' time and about 0.5 s to start its server (45 actions,
    # one setup, disagreeing chunks: 12 s); twelve runs of 150 took 158 s
    actions = 450 if full else 45
    setups = SETUPS if full else QUICK_SETUPS
    levels = tuple(DISAGREEMENT) if full else QUICK_LEVELS
    sizes = (
        f"{actions} actions per run; {counted(len(setups), 'setup')}, "
        f"{counted(len(levels), 'disagreement level')}, {counted(len(PROFILES), 'profile')}"
    )
    sections = [
        "# rtc: seams with and without the real-time-chunking prefix, on one real server\n",
        machine_note(full=full, sizes=sizes),
        f"\nopenpi-server's `WebsocketPolicyServer`, the ideal RTC policy: {HORIZON}-step "
        f"chunks of {DIM} dims at {HZ:g} Hz ({HORIZON / HZ:.2f} s), fixed inference latency; "
        f"`run()`'s engine, {actions} actions per run. Seam and in-chunk step as in "
        "bench/rtc.py's docstring; the goal is seam max / in-chunk max <= 1.10."
        + ("" if full else f" Quick run: one setup, disagreeing chunks, about "
           f"{actions / HORIZON - 1:.0f} seams per run.")
        + "\n",
    ]  # fmt: skip
    for latency, settings in setups:
        rows = []
        for level in levels:
            sd = DISAGREEMENT[level]
            for name, profile in PROFILES.items():
                with rtc_peer(latency, sd) as url:
                    at_seams, in_chunk = seams(url, profile, actions, settings)
                largest = max(in_chunk, default=float("nan"))
                rows.append(
                    [
                        level,
                        f"`{name}`",
                        str(len(at_seams)),
                        f"{max(at_seams, default=float('nan')):.4f}",
                        f"{quantile(at_seams, 0.95):.4f}",
                        f"{largest:.4f}",
                        f"{max(at_seams, default=float('nan')) / largest:.2f}",
                        f"{quantile(at_seams, 0.95) / largest:.2f}",
                    ]
                )
        named = ", ".join(f"`{k}={v}`" for k, v in settings.items()) or "defaults"
        sections.append(f"\n## inference latency {latency:g} s, {named}\n")
        sections.append(
            table(
                [
                    "chunks",
                    "profile",
                    "seams",
                    "seam max",
                    "seam p95",
                    "in-chunk max",
                    "seam max / in-chunk",
                    "seam p95 / in-chunk",
                ],
                rows,
            )
        )
    return "\n".join(sections)
