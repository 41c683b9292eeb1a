"""The report's figure: one PNG of what an episode commanded, planned and waited for.

Per action dimension (up to ``MAX_DIMS``): the commands played (a line), every chunk's plan
where it played (thin grey lines), seams (green ticks), holds (red lines, with the reason),
underruns (shaded from the underrun to the next command) and the spans a person had the arm
(shaded purple). Below them the refill latency of each chunk and the age of the plan each
command came from, then the outcome beside the numbers computed from the streams. Needs
matplotlib (the ``report`` extra); draws with Agg.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..action_spaces import seam_unit
from .extras import MissingExtra
from .measures import Measures, measure
from .recorded import Floats, RecordedEpisode
from .replay import Attribution, attribute
from .takeovers import had_takeovers, takeovers

#: More dimensions than this are cut, and the figure says so.
MAX_DIMS = 8
WIDTH_IN, DPI = 14.0, 100


def plot(
    episode: RecordedEpisode,
    png_path: str | Path,
    played: Attribution | None = None,
    measures: Measures | None = None,
) -> Path:
    """Write the figure to ``png_path``; returns the path."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.collections import LineCollection
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingExtra("the report's figure", "matplotlib", "report") from None
    played = attribute(episode) if played is None else played
    found = measure(episode, played) if measures is None else measures
    width = episode.commands.shape[1]
    shown = max(1, min(width, MAX_DIMS))
    figure = Figure(figsize=(WIDTH_IN, 1.8 * shown + 5.0), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(shown + 2, 1, height_ratios=[1.0] * shown + [1.2, 1.0])
    axes = [figure.add_subplot(grid[0])]
    axes += [figure.add_subplot(grid[i], sharex=axes[0]) for i in range(1, shown + 1)]
    for dim, ax in enumerate(axes[:shown]):
        if dim < width:
            _dimension(ax, episode, played, dim, LineCollection)
        else:
            ax.text(0.5, 0.5, "no commands recorded", ha="center", transform=ax.transAxes)
    _marks(axes[:shown], episode, played)
    _timing(axes[shown], episode, played)
    _outcome(figure.add_subplot(grid[shown + 1]), episode, found)
    cut = f" (dims 0-{shown - 1} of {width} shown)" if width > shown else ""
    figure.suptitle(
        f"{episode.model or 'unknown model'} | {episode.action_space or 'unknown space'} | "
        f"{episode.outcome.get('reason', 'no outcome')}{_label(episode)} | "
        f"{found.actions} actions, {found.chunks} chunks, {found.stalls} stalls{cut}",
        fontsize=14,
        fontweight="bold",
    )
    path = Path(png_path)
    figure.savefig(path, format="png")
    return path


def _dimension(
    ax: Any, episode: RecordedEpisode, played: Attribution, dim: int, lines: Any
) -> None:
    plans = []
    for position, chunk in enumerate(episode.chunks):
        if chunk.steps.shape[1] <= dim or not len(chunk.steps):
            continue
        anchor = played.anchors[position]
        times = (chunk.anchor_t if math.isnan(anchor) else anchor) + chunk.offsets
        plans.append(np.column_stack([times, chunk.steps[:, dim]]))
    if plans:
        ax.add_collection(lines(plans, colors="0.55", linewidths=0.7, label="chunk plans"))
    times, values = _broken(episode.command_t, episode.commands[:, dim])
    ax.plot(times, values, color="C0", lw=1.5, label="commanded")
    ax.autoscale_view()
    grippers = episode.gripper_dims or ()
    unit = "0..1" if dim in grippers else seam_unit(episode.action_space)
    ax.set_ylabel(f"a{dim}{' gripper' if dim in grippers else ''}\n({unit})", fontsize=9)
    ax.tick_params(labelbottom=False)  # the timing panel below has the time axis
    ax.grid(True, alpha=0.3)


def _marks(axes: list[Any], episode: RecordedEpisode, played: Attribution) -> None:
    seams = episode.command_t[played.seams()]
    spells = _underrun_spells(episode)
    taken = [
        (span.start_t, span.start_t + span.seconds(episode.end_t)) for span in takeovers(episode)
    ]
    labelled: set[str] = set()
    for index, ax in enumerate(axes):
        transform = ax.get_xaxis_transform()
        ax.vlines(seams, 0.0, 0.12, transform=transform, color="C2", lw=1.2, label="seams")
        for start, end in spells:
            ax.axvspan(start, end, color="orange", alpha=0.3, lw=0, label="underrun")
        for start, end in taken:
            ax.axvspan(start, end, color="C4", alpha=0.15, lw=0, label="taken over")
        for t, reason in zip(episode.hold_t.tolist(), episode.hold_reasons, strict=True):
            ax.axvline(t, color="red", lw=1.0, label="hold")
            if index == 0 and (reason not in labelled or len(episode.hold_t) <= 12):
                labelled.add(reason)
                ax.text(t, 1.01, reason, transform=transform, color="red", fontsize=8)
        if index == 0:
            handles, names = ax.get_legend_handles_labels()
            unique = dict(zip(names, handles, strict=True))
            ax.legend(unique.values(), unique.keys(), loc="upper left", fontsize=8, ncol=5)


def _broken(times: Floats, values: Floats) -> tuple[Floats, Floats]:
    """The line broken where no command went out for more than 1.5 of the usual intervals."""
    gaps = np.diff(times)
    if not gaps.size:
        return times, values
    breaks = np.flatnonzero(gaps > 1.5 * float(np.median(gaps))) + 1
    return np.insert(times, breaks, math.nan), np.insert(values, breaks, math.nan)


def _underrun_spells(episode: RecordedEpisode) -> list[tuple[float, float]]:
    """(first underrun, next command) of each run of underrun ticks."""
    spells: list[tuple[float, float]] = []
    commands = episode.command_t
    for t in episode.event_times("underrun").tolist():
        after = commands[commands > t]
        end = float(after[0]) if after.size else max(t, episode.end_t)
        if spells and spells[-1][1] == end:
            continue  # the same spell
        spells.append((t, end))
    return spells


def _timing(ax: Any, episode: RecordedEpisode, played: Attribution) -> None:
    arrived = np.array([c.received_t for c in episode.chunks], dtype=np.float64)
    latency = np.array([c.latency_s for c in episode.chunks], dtype=np.float64)
    ax.plot(arrived, latency, "o", color="C3", ms=4, label="refill latency (per chunk, at arrival)")
    times, ages = _broken(episode.command_t, _plan_age(episode, played))
    ax.plot(times, ages, color="C1", lw=1.2, label="plan age")
    ax.set_ylabel("seconds", fontsize=9)
    ax.set_xlabel("time (s) from the first message")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, ncol=2)


def _plan_age(episode: RecordedEpisode, played: Attribution) -> Floats:
    """Each command's time less the observation time of the chunk it came from (NaN for a
    command of no recorded chunk: its index -1 reads the NaN appended)."""
    observed = np.array([c.observed_at_t for c in episode.chunks] + [math.nan], np.float64)
    return np.asarray(episode.command_t - observed[played.chunk], dtype=np.float64)


def _label(episode: RecordedEpisode) -> str:
    label = episode.outcome.get("label", "")
    return f" ({label})" if label else ""


def _outcome(ax: Any, episode: RecordedEpisode, found: Measures) -> None:
    ax.axis("off")
    outcome = episode.outcome

    def recorded(field: str, show: str = "{:.4f}") -> str:
        try:
            return show.format(float(outcome[field]))
        except (KeyError, ValueError):
            return "-"

    rows = [
        ("reason", outcome.get("reason", "-"), ""),
        ("actions", recorded("actions", "{:.0f}"), f"{found.actions}"),
        ("underrun ticks", recorded("underruns", "{:.0f}"), f"{found.underruns}"),
        ("stalls", recorded("stalls", "{:.0f}"), f"{found.stalls}"),
        ("duty cycle", recorded("duty_cycle", "{:.1%}"), f"{found.duty_cycle:.1%}"),
        ("max seam jump", recorded("max_seam_jump"), f"{found.max_seam_jump:.4f}"),
        ("max seam step", recorded("max_seam_step"), f"{found.max_seam_step:.4f}"),
        ("max step (any)", "-", f"{found.max_step:.4f}"),
        ("latency p50", recorded("latency_p50_s", "{:.3f} s"), f"{found.latency_p50_s:.3f} s"),
        ("latency p95", recorded("latency_p95_s", "{:.3f} s"), f"{found.latency_p95_s:.3f} s"),
        ("dropped (recorder)", "-", "-" if found.dropped is None else f"{found.dropped}"),
    ]
    if had_takeovers(episode):
        rows += [
            ("takeovers", recorded("takeovers", "{:.0f}"), f"{found.takeovers}"),
            ("time taken over", recorded("takeover_s", "{:.3f} s"), f"{found.takeover_s:.3f} s"),
            ("max resume time", recorded("max_resume_s", "{:.3f} s"),
             f"{found.max_resume_s:.3f} s"),
            ("max resume jump", recorded("max_resume_jump", "{:.2f}"), "-"),
            ("operator commands", "-", f"{episode.operator_t.size}"),
        ]  # fmt: skip
    lines = [f"{'':22}{'outcome':>14}{'from the bag':>16}"]
    lines += [f"{name:22}{mine:>14}{theirs:>16}" for name, mine, theirs in rows]
    half = (len(lines) + 1) // 2
    for column, chunk in enumerate((lines[:half], [lines[0], *lines[half:]])):
        ax.text(0.02 + 0.5 * column, 0.95, "\n".join(chunk), va="top", family="monospace",
                fontsize=10, transform=ax.transAxes)  # fmt: skip
