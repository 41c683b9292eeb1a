"""What ``bench/seams.py`` measures on one episode's commands (``_seam_clock.Record``).

Gripper dimensions (the simulator's last) are left out of every figure here. A *seam* is the
first command of a chunk after another one; its *window* runs to the last command before the
next seam that differs from the plan (what a hand-over touched; without one, the seam's own
command), and its steps are those into each command of the window and the one back onto the
plan after it. Figures:

- seam step: the largest change between two consecutive commands in a window, over the
  largest step within any chunk the episode received (1.00x: the arm sees no seam);
- jerk (the third difference of the commanded position over the period cubed; velocity
  commands integrated, delta commands summed) at seams, against the largest within a chunk;
- lag: periods from a seam until the command stays within 10 % of the seam's offset (the
  new plan against the previous one at the same time) of the new plan, until the next seam
  (a hand-over not settled by then counts as that long);
- off plan: the largest distance, in position, between where the commands take the arm and
  where the played plan would (velocity commands integrated, delta commands summed): a
  hand-over that does not pay back what it took leaves this growing;
- max_step: would a per-step change limit have ended the episode (the node's check; from
  rest for velocity models, as after a hold), and would the chunks' own steps or the
  commands outside every seam's window (a late tick skips a step) alone have ended it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sequence_ai_core.action_spaces import kind_of
from sequence_ai_core.playback.blends import rows_from
from sequence_ai_core.types import FloatArray

from ._seam_clock import Record

#: config/pi05_droid.yaml: max_step 0.5 rad/s per step on the arm joints.
VELOCITY_MAX_STEP = 0.5
#: Absolute models: twice the model's largest in-chunk step.
ABSOLUTE_MAX_STEP_FACTOR = 2.0
SETTLED = 0.1
STEADY_AFTER = 5


@dataclass(frozen=True)
class Measured:
    in_chunk_step: float
    seam_steps: list[float]  # per seam, over in_chunk_step
    seam_jerk: float  # over the in-chunk jerk
    lags: list[int]  # periods, per seam
    requests_per_chunk: float
    #: Chunks per chunk-length of motion after the first ``STEADY_AFTER`` seams.
    steady_requests_per_chunk: float
    duty: float
    #: Per command, how far (position, largest joint) from where the played plan puts the arm.
    off_plan: list[float]
    #: A per-step limit of ``threshold`` would have ended the episode (commands; chunks).
    ended: bool
    ended_in_chunk: bool
    threshold: float
    #: The outcome's own figures (after hand-over, over the in-chunk step).
    outcome_step: float
    outcome_jump: float


def positions(values: FloatArray, space: str, period_s: float) -> FloatArray:
    """Commanded positions: velocity commands integrated, delta commands summed."""
    kind = kind_of(space)
    if kind == "velocity":
        result: FloatArray = np.cumsum(values, axis=0) * period_s
        return result
    if kind == "delta":
        summed: FloatArray = np.cumsum(values, axis=0)
        return summed
    return values


def _jerk(values: FloatArray, space: str, period_s: float) -> FloatArray:
    """Per command (from the fourth), the largest |jerk| over the arm dimensions."""
    where = positions(values, space, period_s)
    if len(where) < 4:
        return np.zeros(0)
    third = np.diff(where, n=3, axis=0) / period_s**3
    result: FloatArray = np.max(np.abs(third), axis=1)
    return result


def windows(record: Record, sent: FloatArray, raw: FloatArray) -> list[tuple[int, int]]:
    """(first, last) command of each seam's window."""
    seams = [t for t, new in enumerate(record.new_chunk) if new and t > 0]
    ends = [*seams[1:], len(sent)]
    out = []
    for seam, following in zip(seams, ends, strict=True):
        touched = [t for t in range(seam, following) if np.any(sent[t] != raw[t])]
        out.append((seam, max([seam, *touched])))
    return out


def _lag(record: Record, sent: FloatArray, raw: FloatArray, seam: int, following: int) -> int:
    previous = record.chunks[record.seq[seam - 1] - 1]
    arm = record.model.joint_count
    expected = rows_from(list(previous), record.index[seam - 1] + 1, 1)[0]
    offset = float(np.max(np.abs(raw[seam] - expected[:arm])))
    if offset <= 1e-9:
        return 0
    off = np.max(np.abs(sent[seam:following] - raw[seam:following]), axis=1) > SETTLED * offset
    outside = np.nonzero(off)[0]
    return 0 if len(outside) == 0 else int(outside[-1]) + 1


def measure(record: Record) -> Measured:
    model, outcome = record.model, record.outcome
    assert outcome is not None
    arm, period = model.joint_count, 1.0 / model.control_hz
    sent = np.array(record.sent)[:, :arm]
    raw = np.array(record.raw)[:, :arm]
    chunks = [c[:, :arm] for c in record.chunks]
    in_chunk = max(float(np.max(np.abs(np.diff(c, axis=0)))) for c in chunks)
    steps = np.max(np.abs(np.diff(sent, axis=0)), axis=1)  # steps[t - 1]: into command t
    spans = windows(record, sent, raw)
    # into each command of the window and back onto the plan after it
    seam_steps = [float(np.max(steps[s - 1 : e + 1])) / in_chunk for s, e in spans]
    jerk = _jerk(sent, model.action_space, period)  # jerk[t - 3]: ending at command t
    near = [float(np.max(jerk[max(0, s - 3) : e])) for s, e in spans if e >= 3]
    own = max(float(np.max(_jerk(c, model.action_space, period), initial=0.0)) for c in chunks)
    ends = [s for s, _ in spans[1:]] + [len(sent)]
    lags = [_lag(record, sent, raw, s, f) for (s, _), f in zip(spans, ends, strict=True)]
    threshold = _threshold(model.action_space, in_chunk)
    start = np.abs(sent[0]) if kind_of(model.action_space) == "velocity" else np.zeros(1)
    motion_chunks = len(sent) * period / model.covers_seconds
    later = [s for s, _ in spans[STEADY_AFTER:]]
    steady = len(later) - 1
    spacing = (later[-1] - later[0]) * period / steady if steady > 0 else float("nan")
    off = positions(sent - raw, model.action_space, period)
    return Measured(
        in_chunk_step=in_chunk,
        seam_steps=seam_steps,
        seam_jerk=max(near, default=0.0) / own if own > 0 else float("nan"),
        lags=lags,
        requests_per_chunk=(outcome.chunks + outcome.wasted_requests) / motion_chunks,
        steady_requests_per_chunk=model.covers_seconds / spacing,
        duty=outcome.duty_cycle,
        off_plan=np.max(np.abs(off), axis=1).tolist(),
        ended=bool(max(float(np.max(steps)), float(np.max(start))) > threshold),
        ended_in_chunk=max(in_chunk, _outside(steps, spans)) > threshold,
        threshold=threshold,
        outcome_step=outcome.max_seam_step / in_chunk,
        outcome_jump=outcome.max_seam_jump / in_chunk,
    )


def _outside(steps: FloatArray, spans: list[tuple[int, int]]) -> float:
    """The largest step sent outside every seam's window (a late tick's skip, say)."""
    inside = np.zeros(len(steps), dtype=bool)
    for first, last in spans:
        inside[first - 1 : last + 1] = True
    outside = steps[~inside]
    return float(np.max(outside, initial=0.0))


def _threshold(space: str, in_chunk: float) -> float:
    if kind_of(space) == "absolute":
        return ABSOLUTE_MAX_STEP_FACTOR * in_chunk
    return VELOCITY_MAX_STEP
