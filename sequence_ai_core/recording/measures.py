"""An episode's numbers computed again from its raw streams, by the rules ``RunOutcome``'s
are counted by (``playback.stats``), so that the two can be set side by side.

Field names are ``RunOutcome``'s where the number is the same one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .recorded import RecordedEpisode
from .replay import Attribution, attribute
from .takeovers import resume_times, takeovers
from .timeline import Timeline, peak


@dataclass(frozen=True)
class Measures:
    """What ``measure`` counted; seconds, and the actions' own units for seams and steps."""

    actions: int
    #: Chunks that played a step, and chunks recorded.
    chunks: int
    chunks_received: int
    requests: int
    underruns: int
    stalls: int
    underrun_s: float
    duty_cycle: float
    max_gap_s: float
    #: The plan's change at seams (before any hand-over), and what was sent from each seam
    #: to the step back onto the plan (``RunOutcome.max_seam_step``), on ``seam_dims``.
    max_seam_jump: float
    max_seam_step: float
    seam_step_p95: float
    seams: int
    blended_seams: int
    #: The largest change between two consecutive commands anywhere, on ``seam_dims``.
    max_step: float
    latency_p50_s: float
    latency_p95_s: float
    #: Plan age: each command's time minus its chunk's observation time.
    staleness_p50_s: float
    staleness_p95_s: float
    skipped_stale: int
    skipped_late: int
    #: ``early`` events: ticks that found their step already sent.
    early_ticks: int
    #: First to last message of the bag.
    elapsed_s: float
    #: Takeover spans, their seconds (one still open runs to the bag's end), and the longest
    #: from a release to the first command after it (0.0: none).
    takeovers: int
    takeover_s: float
    max_resume_s: float
    holds: Mapping[str, int]
    #: The recorder's own count (None: the bag has no ``/recording``).
    dropped: int | None
    #: The dimensions seams are measured on; None: all (the bag names no gripper dims).
    seam_dims: tuple[int, ...] | None
    #: Commands no recorded chunk accounts for.
    unattributed: int
    #: Where each chunk started came from ``started`` events (else rebuilt from anchors).
    starts_recorded: bool


def measure(episode: RecordedEpisode, played: Attribution | None = None) -> Measures:
    played = attribute(episode) if played is None else played
    width = episode.commands.shape[1]
    grippers = episode.gripper_dims
    arm = None if grippers is None else tuple(i for i in range(width) if i not in grippers)
    counts = Timeline(episode, played, list(arm) if arm is not None else list(range(width)))
    commands = episode.commands[:, list(arm)] if arm is not None else episode.commands
    steps = np.abs(np.diff(commands, axis=0))
    latencies = _latencies(episode)
    dropped = episode.recording.get("dropped")
    spans = takeovers(episode)
    return Measures(
        actions=len(episode.command_t),
        chunks=len({int(i) for i in played.chunk.tolist() if i >= 0}),
        chunks_received=len(episode.chunks),
        requests=episode.requests,
        underruns=counts.underruns,
        stalls=counts.stalls,
        underrun_s=counts.underrun_seconds(),
        duty_cycle=counts.duty_cycle(),
        max_gap_s=counts.max_gap_s,
        max_seam_jump=counts.max_seam_jump,
        max_seam_step=max(counts.seam_steps, default=0.0),
        seam_step_p95=_quantile(counts.seam_steps, 0.95),
        seams=counts.seams,
        blended_seams=counts.blended_seams,
        max_step=peak(steps),
        latency_p50_s=_quantile(latencies, 0.5),
        latency_p95_s=_quantile(latencies, 0.95),
        staleness_p50_s=_quantile(counts.staleness, 0.5),
        staleness_p95_s=_quantile(counts.staleness, 0.95),
        skipped_stale=_event_steps(episode, "skipped_stale"),
        skipped_late=_event_steps(episode, "skipped_late"),
        early_ticks=sum(event.name == "early" for event in episode.events),
        elapsed_s=episode.end_t,
        takeovers=len(spans),
        takeover_s=sum(span.seconds(episode.end_t) for span in spans),
        max_resume_s=max(resume_times(episode, spans), default=0.0),
        holds=dict(Counter(episode.hold_reasons)),
        dropped=int(float(dropped)) if dropped else None,
        seam_dims=arm,
        unattributed=int((played.chunk < 0).sum()),
        starts_recorded=played.from_events,
    )


def _quantile(values: list[float], q: float) -> float:
    return float(np.quantile(np.array(values, dtype=np.float64), q)) if values else math.nan


def _latencies(episode: RecordedEpisode) -> list[float]:
    """Every arrival's, as the outcome counts them: the chunks' and the discarded ones'."""
    found = [c.latency_s for c in episode.chunks]
    recorded = {str(c.request) for c in episode.chunks}
    for event in episode.events:
        if event.name == "discarded" and event.values.get("request") not in recorded:
            try:
                found.append(float(event.values["latency_s"]))
            except (KeyError, ValueError):
                continue
    return [value for value in found if math.isfinite(value)]


def _event_steps(episode: RecordedEpisode, name: str) -> int:
    total = 0
    for event in episode.events:
        if event.name == name:
            try:
                total += int(event.values.get("steps", "0"))
            except ValueError:
                continue
    return total
