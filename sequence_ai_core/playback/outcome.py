"""What one episode did: the record ``run()`` returns and the ROS node publishes."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..action_spaces import seam_unit


def _fmt(value: float, unit: str = "s", scale: float = 1.0, digits: int = 3) -> str:
    return "-" if not math.isfinite(value) else f"{value * scale:.{digits}f}{unit}"


def _one_line(error: BaseException, limit: int = 300) -> str:
    """The error's message on one line, cut to ``limit`` characters. Gateway text in it was
    redacted of the key before the error was built (transport)."""
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class RunOutcome:
    """Counts and timings of one episode.

    ``reason`` is ``completed`` (``max_actions`` reached), ``validate`` (the validator refused
    an action), ``estop``, ``stopped`` (stopped from outside), ``stale_input`` (the node's arm
    reading went stale) or ``raised:<Class>`` (an error ended the episode; it is in
    ``error``): ``episode.StopReason``. Every reason but ``completed`` means hold was called.
    ``actions`` counts the actions that went out (committed): a refused one is not counted.
    """

    actions: int
    chunks: int
    elapsed_s: float
    underruns: int
    underrun_s: float
    max_gap_s: float
    stopped_early: bool
    reason: str
    max_seam_jump: float
    action_space: str | None
    skipped_stale: int
    retries: int
    requests: int
    latency_p50_s: float
    latency_p95_s: float
    staleness_p50_s: float
    staleness_p95_s: float
    duty_cycle: float
    error: BaseException | None = None
    #: Number of separate underrun spells (runs of consecutive underrun ticks).
    stalls: int = 0
    #: Steps passed over because a tick came late (the plan is indexed by time).
    skipped_late: int = 0
    #: Ticks in the slot of a step an earlier tick sent: they sent and held nothing.
    early_ticks: int = 0
    #: Requests answered with a chunk that never played a step (too late or superseded).
    wasted_requests: int = 0
    #: Times the engine cut its requests in flight to one because the gateway queued.
    backoffs: int = 0
    #: ``busy`` answers (HTTP 429 and the like) from the gateway.
    busy_answers: int = 0
    #: Refills that found the gateway queueing (see ``load``).
    queued_refills: int = 0
    #: The lowest refill level measured, against which queueing is judged (seconds).
    unloaded_latency_s: float = math.nan
    #: What the arm was sent at seams, after any hand-over (``max_seam_jump`` is the plan's,
    #: before it): the largest change between two commands from a seam's first command to
    #: the step back onto the plan after its hand-over, over all seams and at the 95th
    #: percentile of seams; gripper dimensions left out, as from ``max_seam_jump``.
    max_seam_step: float = 0.0
    seam_step_p95: float = math.nan
    #: Seams a hand-over corrected (``EngineConfig.handover``).
    blended_seams: int = 0
    #: The episode's bag (``run(record=)``, the node's ``record_dir``), None when not
    #: recorded, and the messages the recorder dropped (queue full, cap, failed write).
    recording: str | None = None
    recording_dropped: int = 0
    #: Times a person took the arm over (``run(takeover=)``, the node's ``takeover``), and
    #: the seconds they had it, a takeover still under way at the end included.
    takeovers: int = 0
    takeover_s: float = 0.0
    #: The hand-backs: the longest from a release to the first policy command after it, and
    #: the largest jump from the arm's measured state (absolute spaces) or rest (velocity,
    #: delta) to the first step played after it, in the chunk's largest in-chunk steps,
    #: before hand-over (as ``max_seam_jump`` is measured); 0.0 when there was none.
    max_resume_s: float = 0.0
    max_resume_jump: float = 0.0
    #: A person's verdict on the episode: ``success``, ``failure``, or empty (none given).
    label: str = ""

    def __repr__(self) -> str:
        # A run that stopped says why on the line users print: the class alone is too little.
        why = f": {_one_line(self.error)}" if self.error is not None else ""
        return (
            f"RunOutcome({self.actions} actions over {self.chunks} chunks in "
            f"{self.elapsed_s:.1f}s, {self.reason}{why})"
        )

    def summary(self) -> str:
        """A few readable lines for logs and the demo."""
        duty = "-" if not math.isfinite(self.duty_cycle) else f"{self.duty_cycle:.1%}"
        lines = [
            repr(self),
            f"  duty cycle {duty}, underruns {self.underruns} ({self.stalls} stalls, "
            f"{self.underrun_s:.2f}s), max gap {_fmt(self.max_gap_s, ' ms', 1000, 0)}",
            f"  refill latency p50/p95 {_fmt(self.latency_p50_s)}/{_fmt(self.latency_p95_s)}, "
            f"staleness p50/p95 {_fmt(self.staleness_p50_s)}/{_fmt(self.staleness_p95_s)}",
            f"  {self.requests} requests, {self.retries} retries, {self.skipped_stale} stale "
            f"steps skipped, {self._seam()}",
        ]
        if self.recording is not None:
            lines.append(f"  recorded to {self.recording} ({self.recording_dropped} dropped)")
        if self.takeovers:
            lines.append(
                f"  {self.takeovers} takeovers ({self.takeover_s:.1f}s), resume "
                f"{self.max_resume_s:.3f}s, resume jump {self.max_resume_jump:.2f} steps"
            )
        if self.label:
            lines.append(f"  labelled {self.label}")
        if self.wasted_requests or self.backoffs or self.busy_answers:
            lines.append(
                f"  gateway load: {self.wasted_requests} wasted requests, {self.backoffs} "
                f"backoffs, {self.busy_answers} busy answers, {self.queued_refills} queued "
                "refills"
            )
        return "\n".join(lines)

    def _seam(self) -> str:
        if self.action_space is None:
            return "no chunk played"
        if self.chunks < 2:
            return f"one chunk, no seam ({self.action_space})"
        unit = seam_unit(self.action_space)
        return (
            f"max seam jump {self.max_seam_jump:.4f} {unit} ({self.action_space}), "
            f"{self.max_seam_step:.4f} after hand-over ({self.blended_seams} blended)"
        )
