"""One diagnostic status from the node's state, the live engine and the last episode's outcome.

Levels follow what an operator must do: ERROR needs a person (auth, credit, e-stop, stale
inputs, a rejected action), WARN is degraded but running (underruns, large seams, a warming
model), OK otherwise. Values are strings (diagnostic_msgs/KeyValue.value is a string), and
every text passes through ``redact`` (the package's one redaction, ``sequence_ai_core.redaction``,
whatever the key's length) so a key can never reach /diagnostics.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sequence_ai_core import Unavailable
from sequence_ai_core.node_api import redact as redact  # the node redacts its logs with it

from .episode import EpisodeEnd

OK, WARN, ERROR = 0, 1, 2
#: The seam jump (action units) above which the status turns WARN, unless ``seam_warn`` says.
SEAM_WARN = 0.2


def hardware_id(given: str, model: str) -> str:
    """The status's hardware_id: the parameter's, else one naming the model."""
    return given.strip() or f"sequence-ai:{model}"


_OUTCOME_FIELDS = (
    "actions", "chunks", "elapsed_s", "underruns", "underrun_s", "max_gap_s", "max_seam_jump",
    "max_seam_step", "seam_step_p95", "blended_seams",
    "skipped_stale", "skipped_late", "early_ticks", "retries", "requests", "latency_p50_s",
    "latency_p95_s",
    "staleness_p50_s", "staleness_p95_s", "duty_cycle", "reason",
    "takeovers", "takeover_s", "max_resume_s", "max_resume_jump", "label",
)  # fmt: skip


@dataclass(frozen=True)
class RecordingStatus:
    """The running or last episode's bag (``record_dir``): where, and what it lost."""

    path: str
    dropped: int  # messages not recorded so far (queue full, over a cap, a failed write)
    stopped: str = ""  # why recording stopped before the episode ended, empty if it did not


@dataclass(frozen=True)
class Health:
    lifecycle: str
    model: str
    episode_running: bool
    episode_number: int
    actions: int
    estop_latched: bool
    input_problem: str | None = None
    last_end: EpisodeEnd | None = None
    error: BaseException | None = None
    snapshot: Mapping[str, Any] | None = None
    outcome: Any = None
    seam_warn: float = SEAM_WARN
    secret: str | None = None
    gateway: str = ""
    requests_sent: int | None = None  # over the connection's lifetime, all episodes
    configure_problem: str | None = None  # why the last configure failed, while unconfigured
    recording: RecordingStatus | None = None
    #: Who has the arm: ``policy``, or ``human`` while a person has taken it over.
    control_source: str = "policy"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _number(source: Any, name: str) -> float:
    value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _stop_summary(health: Health) -> tuple[int, str] | None:
    end = health.last_end
    if end is None or health.episode_running or not end.early:
        return None
    what = f"episode {end.number} stopped after {end.actions} actions: {end.reason}"
    if end.detail:
        what += f" ({end.detail})"
    error = health.error
    if isinstance(error, Unavailable) and error.warming:
        wait = f"; retry after {error.retry_after_s:g} s" if error.retry_after_s else ""
        return WARN, f"model warming up{wait}: {what}"
    if end.reason == "stopped":
        return OK, what
    return ERROR, what


def _level_message(health: Health) -> tuple[int, str]:
    if health.configure_problem:
        return ERROR, health.configure_problem
    if health.estop_latched:
        return ERROR, "e-stop latched: nothing moves until it is released and an episode starts"
    if health.episode_running and health.input_problem:
        return ERROR, f"stale or missing input, no request sent: {health.input_problem}"
    stop = _stop_summary(health)
    if stop is not None and stop[0] > OK:
        return stop
    source = health.snapshot if health.episode_running else health.outcome
    warnings = []
    if source is not None and _number(source, "underruns") > 0:
        warnings.append(f"{int(_number(source, 'underruns'))} underruns")
    if source is not None and _number(source, "max_seam_jump") > health.seam_warn:
        warnings.append(f"seam jump {_number(source, 'max_seam_jump'):.3g} > {health.seam_warn:g}")
    if isinstance(health.snapshot, Mapping) and health.snapshot.get("warming"):
        warnings.append("model warming up")
    if health.recording is not None and health.recording.dropped:
        warnings.append(f"recording dropped {health.recording.dropped} messages")
    if warnings:
        return WARN, "; ".join(warnings)
    if stop is not None:
        return stop
    if health.episode_running and health.control_source == "human":
        return OK, f"episode {health.episode_number}: a person has the arm, the policy waits"
    if health.episode_running:
        return OK, f"episode {health.episode_number} running, {health.actions} actions"
    return OK, f"{health.lifecycle}, no episode running"


def _values(health: Health) -> list[tuple[str, str]]:
    values = [
        ("model", health.model),
        ("lifecycle", health.lifecycle),
        ("episode", str(health.episode_number)),
        ("episode_running", str(health.episode_running)),
        ("actions", str(health.actions)),
        ("estop_latched", str(health.estop_latched)),
        ("control_source", health.control_source),
    ]
    if health.gateway:
        values.append(("gateway", health.gateway))
    if health.requests_sent is not None:
        values.append(("requests_sent", str(health.requests_sent)))
    if health.configure_problem:
        values.append(("configure_problem", health.configure_problem))
    if health.input_problem:
        values.append(("input_problem", health.input_problem))
    if health.episode_running and health.snapshot:
        values += [(f"live.{k}", _fmt(v)) for k, v in sorted(health.snapshot.items())]
    if health.outcome is not None:
        values += [
            (f"last.{name}", _fmt(getattr(health.outcome, name)))
            for name in _OUTCOME_FIELDS
            if getattr(health.outcome, name, None) is not None
        ]
    if health.error is not None:
        values.append(("last_error", f"{type(health.error).__name__}: {health.error}"))
    recording = health.recording
    if recording is not None:
        values += [("recording", recording.path), ("recording_dropped", str(recording.dropped))]
        if recording.stopped:
            values.append(("recording_stopped", recording.stopped))
    return values


def evaluate(health: Health) -> tuple[int, str, list[tuple[str, str]]]:
    """(level OK/WARN/ERROR, message, key-values), all text redacted."""
    level, message = _level_message(health)
    values = [(k, redact(v, health.secret)) for k, v in _values(health)]
    return level, redact(message, health.secret), values
