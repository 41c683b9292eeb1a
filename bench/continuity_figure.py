"""The continuity figure: one joint's commanded position against time, per refill strategy.

Runs the three strategies of ``bench/continuity.py`` on lingbot-va-5b (absolute joint
positions, 0.64 s chunks, shorter than the 0.79 s refill) and draws joint 0 over the
simulator's reference trajectory, with the stalls (no command for more than 1.5 periods)
shaded, over the first 12 s of each run. Writes ``continuity.png`` beside its table. The runs
are those of ``bench/freshness.py`` when both run in one process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench._common import machine_note, ratio, results_dir
from bench._common import table as markdown_table
from bench.continuity import MEDIAN_S, STRATEGIES
from bench.freshness import FULL_SECONDS, QUICK_SECONDS, Recording, record_strategies
from sequence_ai_sim import CATALOGUE, reference_position
from sequence_ai_sim.catalogue import SimModel

MODEL = "lingbot-va-5b"
JOINT = 0
FIGURE = "continuity.png"
#: A gap longer than this many periods between two commands is drawn as a stall.
STALL_PERIODS = 1.5
#: Seconds drawn: enough for a dozen chunks, short enough to see each seam.
WINDOW_S = 12.0


def stalls(recording: Recording, period_s: float) -> list[tuple[float, float]]:
    """(start, end) seconds since the first command of every stall."""
    times = np.array([c.monotonic for c in recording.commands])
    if times.size < 2:
        return []
    t = times - times[0]
    gaps = np.diff(t)
    return [(t[i] + period_s, t[i + 1]) for i in np.flatnonzero(gaps > STALL_PERIODS * period_s)]


def trailing_s(recording: Recording, entry: SimModel) -> float:
    """How far the commands trail the reference in time: the shift that best lines them up."""
    wall = np.array([c.wall for c in recording.commands])
    sent = np.array([c.action[JOINT] for c in recording.commands])
    shifts = np.arange(0.0, 2.0, 0.01)
    errors = [
        np.mean(np.abs(sent - [reference_position(entry, w - shift)[JOINT] for w in wall]))
        for shift in shifts
    ]
    return float(shifts[int(np.argmin(errors))])


CAPTION = (
    "reference now: where the simulator's trajectory is at that moment. command: what the "
    "client sent. seam: the jump between the last command\nof one chunk and the first of the "
    "next. Red: no command for more than {stall} periods (the arm stalls). Every run trails the "
    "reference:\na chunk is computed from an observation taken when its request left and "
    "arrives a refill later. (a) and (b) then play it from its first step\nand stall while the "
    "next one is in flight; (c) plays it by the clock with requests overlapping, so it neither "
    "stalls nor jumps back, but a {covers:.2f} s\nchunk cannot be played on time at a {refill} s "
    "refill, so (c) trails too. Same number of commands per run, so faster runs end sooner."
)


def draw(recordings: list[Recording], path: Path) -> None:
    # Imported here so that listing or running the other benchmarks needs no matplotlib.
    import matplotlib

    matplotlib.use("Agg")  # no display on CI machines; must precede pyplot
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    entry = CATALOGUE[MODEL]
    period = 1.0 / entry.control_hz
    fig, axes = plt.subplots(len(recordings), 1, figsize=(8, 7.8), sharex=True, sharey=True)
    # a quick run's commands end before the window does
    longest = max(r.commands[-1].monotonic - r.commands[0].monotonic for r in recordings)
    handles: list[Any] = []
    for ax, rec in zip(np.atleast_1d(axes), recordings, strict=True):
        wall = np.array([c.wall for c in rec.commands])
        t = np.array([c.monotonic for c in rec.commands])
        t -= t[0]
        dense = np.linspace(wall[0], wall[-1], 400)
        reference = [reference_position(entry, w)[JOINT] for w in dense]
        (ref_line,) = ax.plot(dense - wall[0], reference, color="0.55", lw=1, ls="--")
        (cmd_line,) = ax.step(t, [c.action[JOINT] for c in rec.commands], where="post", lw=1.3)
        for start, end in stalls(rec, period):
            ax.axvspan(start, end, color="tab:red", alpha=0.2, lw=0)
        handles = [ref_line, cmd_line, Patch(color="tab:red", alpha=0.2)]
        o = rec.outcome
        ax.set_title(
            f"{STRATEGIES[rec.strategy]}: duty {o.duty_cycle:.0%}, "
            f"{len(stalls(rec, period))} stalls, "
            f"max seam {o.max_seam_jump:.3f} rad, trails the reference by "
            f"{trailing_s(rec, entry):.2f} s",
            fontsize=9,
            loc="left",
        )
        ax.set_ylabel(f"joint {JOINT} (rad)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.set_xlim(0, min(WINDOW_S, longest))
    fig.legend(
        handles,
        ["reference now", "command", f"stall (> {STALL_PERIODS:g} periods without a command)"],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.955),
        ncol=3,
        fontsize=8,
        frameon=False,
    )
    axes[-1].set_xlabel("seconds since the first command", fontsize=8)
    fig.suptitle(f"{MODEL}: {entry.covers_seconds:.2f} s chunks, {MEDIAN_S} s refill", fontsize=10)
    caption = CAPTION.format(stall=STALL_PERIODS, covers=entry.covers_seconds, refill=MEDIAN_S)
    fig.text(0.01, 0.01, caption, fontsize=7, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.12, 1, 0.93))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def run(full: bool) -> str:
    seconds = FULL_SECONDS if full else QUICK_SECONDS
    recordings = [r for r in record_strategies(MODEL, seconds) if r.strategy in STRATEGIES]
    draw(recordings, results_dir(full) / FIGURE)
    period = 1.0 / CATALOGUE[MODEL].control_hz
    stalled = {r.strategy: sum(end - start for start, end in stalls(r, period)) for r in recordings}
    rows = [
        [
            STRATEGIES[r.strategy],
            len(stalls(r, period)),
            f"{stalled[r.strategy]:.2f}",
            ratio(stalled[r.strategy], stalled["a"]),
            f"{r.outcome.max_seam_jump:.3f}",
            ratio(r.outcome.max_seam_jump, recordings[0].outcome.max_seam_jump),
        ]
        for r in recordings
    ]
    headers = ["strategy", "stalls drawn", "stalled s", "vs (a)", "max seam rad", "vs (a)"]
    return "\n\n".join(
        [
            "## Continuity figure",
            machine_note(full=full, sizes=f"{seconds:g} s of motion per strategy"),
            f"![joint {JOINT} of {MODEL} against time for three refill strategies]({FIGURE})",
            markdown_table(headers, rows),
        ]
    )
