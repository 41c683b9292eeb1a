"""The report's text: each number computed from the bag's streams beside the one the episode's
outcome recorded, so that a reader sees whether they agree."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from ..action_spaces import seam_unit
from .measures import Measures, measure
from .recorded import RecordedEpisode
from .takeovers import had_takeovers

#: A row: its label, then how to show a computed value and which outcome field it stands
#: beside (None: the outcome has no such number).
Row = tuple[str, Callable[[Measures], str], str | None, Callable[[float], str]]


def _count(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{int(value)}"


def _show_s(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.3f} s"


def _ms(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value * 1000:.0f} ms"


def _percent(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.1%}"


def _amount(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.4f}"


def _field(field: str, show: Callable[[float], str]) -> Callable[[Measures], str]:
    return lambda m: show(float(getattr(m, field)))


def _rows(unit: str, dims: str) -> list[Row]:
    rows: list[tuple[str, str, str | None, Callable[[float], str]]] = [
        ("commands played", "actions", "actions", _count),
        ("chunks played", "chunks", "chunks", _count),
        ("chunks received", "chunks_received", None, _count),
        ("requests", "requests", "requests", _count),
        ("underrun ticks", "underruns", "underruns", _count),
        ("stalls (underrun spells)", "stalls", "stalls", _count),
        ("underrun time", "underrun_s", "underrun_s", _show_s),
        ("duty cycle", "duty_cycle", "duty_cycle", _percent),
        ("max gap between commands", "max_gap_s", "max_gap_s", _ms),
        ("seams", "seams", None, _count),
        ("blended seams", "blended_seams", "blended_seams", _count),
        (f"max seam jump, plan ({unit}, {dims})", "max_seam_jump", "max_seam_jump", _amount),
        (f"max seam step, sent ({unit}, {dims})", "max_seam_step", "max_seam_step", _amount),
        ("seam step p95", "seam_step_p95", "seam_step_p95", _amount),
        (f"max step between commands ({dims})", "max_step", None, _amount),
        ("refill latency p50", "latency_p50_s", "latency_p50_s", _show_s),
        ("refill latency p95", "latency_p95_s", "latency_p95_s", _show_s),
        ("plan age p50", "staleness_p50_s", "staleness_p50_s", _show_s),
        ("plan age p95", "staleness_p95_s", "staleness_p95_s", _show_s),
        ("stale steps skipped", "skipped_stale", "skipped_stale", _count),
        ("late steps skipped", "skipped_late", "skipped_late", _count),
        ("early ticks (step already sent)", "early_ticks", "early_ticks", _count),
        # not compared: the outcome's runs from the first tick to the stop
        ("elapsed (bag: first to last message)", "elapsed_s", None, _show_s),
    ]
    return [(label, _field(field, show), recorded, show) for label, field, recorded, show in rows]


def _takeover_rows() -> list[Row]:
    """Shown when the bag or the outcome has a takeover."""
    rows: list[tuple[str, str, Callable[[float], str]]] = [
        ("takeovers", "takeovers", _count),
        ("time taken over", "takeover_s", _show_s),
        ("max resume time (release to command)", "max_resume_s", _show_s),
    ]
    return [(label, _field(field, show), field, show) for label, field, show in rows]


def summary(episode: RecordedEpisode, measures: Measures | None = None) -> str:
    """A few dozen named lines: the episode, then computed against recorded, then holds and
    the recorder's counts. A row whose two values differ as shown ends in ``<- differs``."""
    found = measure(episode) if measures is None else measures
    outcome = episode.outcome
    grippers = episode.gripper_dims
    if found.seam_dims is None:
        dims = "all dims: the bag names no gripper dims"
    else:
        dims = "arm dims" if grippers else "all dims"
    lines = [
        f"episode {episode.path}",
        f"  model {episode.model or '-'}, {episode.action_space or '-'}, "
        f"{episode.commands.shape[1]} dims, grippers "
        f"{'unknown' if grippers is None else ', '.join(map(str, grippers)) or 'none'}",
        f"  outcome: {outcome.get('reason', 'none recorded')}"
        + (f" ({outcome['error']})" if outcome.get("error", "None") not in ("", "None") else "")
        + (
            f", {_recorded(outcome, 'elapsed_s', _show_s)} from the first tick"
            if "elapsed_s" in outcome
            else ""
        )
        + (f", labelled {outcome['label']}" if outcome.get("label") else ""),
        "  chunk starts: "
        + (
            "as the started events say"
            if found.starts_recorded
            else "rebuilt from the recorded anchors (no started events)"
        ),
        "",
        f"  {'':40} {'from the streams':>18} {'outcome':>14}",
    ]
    rows = _rows(seam_unit(episode.action_space), dims)
    taken_over = had_takeovers(episode)
    for label, computed, field, show in rows + (_takeover_rows() if taken_over else []):
        mine = computed(found)
        theirs = "" if field is None else _recorded(outcome, field, show)
        differs = field is not None and theirs not in ("", "-") and theirs != mine
        lines.append(
            f"  {label:40} {mine:>18} {theirs:>14}{'  <- differs' if differs else ''}".rstrip()
        )
    lines += ["", _holds(found.holds)]
    if taken_over or episode.operator_t.size:
        lines.append(_human(episode, outcome))
    lines.append(_recording(episode.recording, found.dropped))
    if found.unattributed:
        lines.append(f"  {found.unattributed} commands matched no recorded chunk step")
    return "\n".join(lines)


def _recorded(outcome: Mapping[str, str], field: str, show: Callable[[float], str]) -> str:
    try:
        return show(float(outcome[field]))
    except (KeyError, ValueError):
        return ""


def _holds(holds: Mapping[str, int]) -> str:
    if not holds:
        return "holds: none"
    each = ", ".join(f"{reason} x{count}" for reason, count in sorted(holds.items()))
    return f"holds: {sum(holds.values())} ({each})"


def _human(episode: RecordedEpisode, outcome: Mapping[str, str]) -> str:
    sources = ", ".join(sorted(set(episode.operator_sources))) or "none"
    jump = _recorded(outcome, "max_resume_jump", lambda v: f"{v:.2f} in-chunk steps")
    return (
        f"while taken over: {episode.human_t.size} joint readings, "
        f"{episode.operator_t.size} operator commands (from {sources})"
        + (f"; max resume jump {jump} (outcome)" if jump else "")
    )


def _recording(recording: Mapping[str, str], dropped: int | None) -> str:
    if not recording:
        return "recording: no /recording message (the recorder did not finish)"
    stopped = recording.get("stopped", "")
    return (
        f"recording: {recording.get('written', '?')} messages written, "
        f"{'?' if dropped is None else dropped} dropped"
        + (f", stopped early: {stopped}" if stopped else "")
    )
