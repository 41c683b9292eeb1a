"""The report of an episode a person took over: the takeover spans, the arm's readings and
the operator's commands read back, the hand-back counted (resume time, no seam or gap across
a takeover), the label shown; and bags without takeovers (older bags too) read as before.

The bags are written here with rosbags as ``recording.topics`` specifies (``recorded_bags``),
with every number known.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from support.recorded_bags import EpisodeBag

from sequence_ai_core.recording.episode_log import read_episode
from sequence_ai_core.recording.measures import measure
from sequence_ai_core.recording.summary import summary
from sequence_ai_core.recording.takeovers import Takeover, takeovers
from sequence_ai_core.types import FloatArray

PERIOD = 0.1
SPACE = "joint_absolute"
SOURCE = "/spacemouse/command"


def _rows(anchor: float, offset: float, steps: int = 10) -> FloatArray:
    times = anchor + np.arange(steps) * PERIOD
    return np.column_stack([times + offset, times])


def taken_over(*, still_taken_at: float | None = None) -> EpisodeBag:
    """Chunk 1 plays 8 commands (0.0-0.7 s), two underrun ticks (0.8, 0.9: one spell, one
    hold), a person takes the arm at 1.0 s: 10 joint readings at 10 Hz, 20 operator
    commands at 20 Hz. Released at 2.0 s (a release hold, a fresh request); chunk 2, far
    from chunk 1 (offset 5), arrives at 2.3 s and plays 10 commands (2.3-3.2 s). Stopped at
    3.3 s, labelled a success; with ``still_taken_at``, taken over again then until 3.8 s."""
    bag = EpisodeBag(())
    bag.observation(0.0, [0.0, 0.0], request=1)
    first, second = _rows(0.0, 0.0), _rows(2.3, 5.0)
    bag.chunk(0.0, first, anchor=0.0, space=SPACE, request=1, seq=1, observed_at=0.0)
    bag.event(0.0, "started", seq=1, step=0, anchor_s=repr(1_700_000_000 + 0.0))
    for i in range(8):
        bag.command(round(i * PERIOD, 9), first[i], SPACE)
    bag.event(0.8, "underrun")
    bag.hold(0.8, "underrun")
    bag.event(0.9, "underrun")
    bag.event(1.0, "takeover")
    for i in range(10):
        bag.human(round(1.0 + i * PERIOD, 9), [1.0 + i, -1.0])
    for i in range(20):
        bag.operator(round(1.0 + i * 0.05, 9), [0.01 * i, 0.0, 0.0], SOURCE)
    bag.event(2.0, "release", takeover_s=1.0)
    bag.hold(2.0, "release")
    bag.observation(2.0, [9.0, -1.0], request=2)
    bag.chunk(2.3, second, anchor=2.3, space=SPACE, request=2, seq=2, observed_at=2.0)
    bag.event(2.3, "started", seq=2, step=0, anchor_s=repr(1_700_000_000 + 2.3))
    for i in range(10):
        bag.command(round(2.3 + i * PERIOD, 9), second[i], SPACE)
    end, open_s = 3.3, 0.0
    if still_taken_at is not None:
        bag.event(still_taken_at, "takeover")
        bag.human(still_taken_at, [20.0, -1.0])
        end, open_s = 3.8, 3.8 - still_taken_at
    bag.hold(end, "stopped")
    bag.outcome(end, OUTCOME | {"takeovers": 1 + (open_s > 0), "takeover_s": 1.0 + open_s})
    return bag


#: What the engine's rules count for ``taken_over``: the takeover is no gap and the resume
#: no seam; the underrun spell ends at the takeover as a command would end it (0.2 s open
#: then, less the period).
OUTCOME: dict[str, object] = {
    "reason": "stopped", "actions": 18, "chunks": 2, "requests": 2, "underruns": 2,
    "stalls": 1, "underrun_s": 0.1, "duty_cycle": 1.8 / 1.9, "max_gap_s": 0.1,
    "max_seam_jump": 0.0, "max_seam_step": 0.0, "blended_seams": 0, "latency_p50_s": 0.15,
    "latency_p95_s": 0.285, "skipped_stale": 0, "skipped_late": 0, "early_ticks": 0,
    "error": None, "action_space": SPACE, "takeovers": 1, "takeover_s": 1.0,
    "max_resume_s": 0.3, "max_resume_jump": 0.4, "label": "success",
}  # fmt: skip


def _row(text: str, label: str) -> list[str]:
    """The row of the summary's table that starts with ``label``: its words after it."""
    (line,) = [line for line in text.splitlines() if line.strip().startswith(label)]
    return line.strip()[len(label) :].split()


def test_the_takeover_the_arm_s_readings_and_the_operator_s_commands_read_back(
    tmp_path: Path,
) -> None:
    episode = read_episode(taken_over().write(tmp_path / "bag"))
    assert takeovers(episode) == (Takeover(pytest.approx(1.0), pytest.approx(2.0)),)
    np.testing.assert_allclose(episode.human_t, 1.0 + np.arange(10) * PERIOD, atol=1e-9)
    np.testing.assert_allclose(episode.operator_t, 1.0 + np.arange(20) * 0.05, atol=1e-9)
    assert episode.operator_sources == (SOURCE,) * 20
    assert episode.commands.shape == (18, 2)  # the operator's are not the policy's
    assert episode.hold_reasons == ("underrun", "release", "stopped")
    assert episode.outcome["label"] == "success" and episode.outcome["takeovers"] == "1"


def test_a_takeover_is_no_gap_no_seam_and_its_hand_back_is_timed(tmp_path: Path) -> None:
    found = measure(read_episode(taken_over().write(tmp_path / "bag")))
    assert (found.takeovers, found.seams, found.unattributed) == (1, 0, 0)
    assert found.takeover_s == pytest.approx(1.0)
    assert found.max_resume_s == pytest.approx(0.3)
    assert found.max_gap_s == pytest.approx(PERIOD)  # not the 1.6 s across the takeover
    assert found.max_seam_jump == 0.0 and found.max_seam_step == 0.0
    assert (found.underruns, found.stalls) == (2, 1)
    assert found.underrun_s == pytest.approx(0.1)  # the spell ends at the takeover
    assert found.duty_cycle == pytest.approx(1.8 / 1.9)
    assert found.holds == {"underrun": 1, "release": 1, "stopped": 1}


def test_the_summary_shows_the_takeovers_beside_the_outcome_and_the_label(
    tmp_path: Path,
) -> None:
    text = summary(read_episode(taken_over().write(tmp_path / "bag")))
    assert "<- differs" not in text, text
    assert _row(text, "takeovers") == ["1", "1"]
    assert _row(text, "time taken over") == ["1.000", "s", "1.000", "s"]
    assert _row(text, "max resume time (release to command)") == ["0.300", "s", "0.300", "s"]
    assert _row(text, "max gap between commands") == ["100", "ms", "100", "ms"]
    assert "labelled success" in text.splitlines()[2]
    assert (
        "while taken over: 10 joint readings, 20 operator commands (from /spacemouse/command);"
        " max resume jump 0.40 in-chunk steps (outcome)" in text
    )
    assert "holds: 3 (release x1, stopped x1, underrun x1)" in text


def test_a_takeover_under_way_at_the_end_runs_to_the_end_of_the_bag(tmp_path: Path) -> None:
    episode = read_episode(taken_over(still_taken_at=3.5).write(tmp_path / "bag"))
    assert takeovers(episode)[-1] == Takeover(pytest.approx(3.5), None)
    found = measure(episode)
    assert found.takeovers == 2 and found.takeover_s == pytest.approx(1.3)
    assert found.max_resume_s == pytest.approx(0.3)  # the open one has no resume
    assert "<- differs" not in summary(episode, found)


def test_a_takeover_the_outcome_counts_but_the_bag_lacks_is_marked(tmp_path: Path) -> None:
    bag = EpisodeBag(())
    bag.command(0.0, [0.0, 0.0], SPACE)
    bag.outcome(1.0, {"reason": "stopped", "actions": 1, "takeovers": 1, "takeover_s": 0.5})
    text = summary(read_episode(bag.write(tmp_path / "bag")))
    marked = [line for line in text.splitlines() if "<- differs" in line]
    assert [line.split()[0] for line in marked] == ["takeovers", "time"]
    assert "while taken over: 0 joint readings, 0 operator commands (from none)" in text


def test_a_bag_without_takeovers_reports_none_and_an_older_one_reads(tmp_path: Path) -> None:
    """An older recorder's bag: no /human topics, an outcome without the takeover fields."""
    bag = EpisodeBag(())
    rows = _rows(0.0, 0.0)
    bag.chunk(0.0, rows, anchor=0.0, space=SPACE, request=1, seq=1, observed_at=0.0)
    for i in range(10):
        bag.command(round(i * PERIOD, 9), rows[i], SPACE)
    bag.outcome(1.0, {"reason": "completed", "actions": 10, "chunks": 1})
    episode = read_episode(bag.write(tmp_path / "bag"))
    assert episode.human_t.size == episode.operator_t.size == 0 and takeovers(episode) == ()
    found = measure(episode)
    assert (found.takeovers, found.takeover_s, found.max_resume_s) == (0, 0.0, 0.0)
    assert found.max_gap_s == pytest.approx(PERIOD)
    text = summary(episode, found)
    assert "taken over" not in text and "resume" not in text and "labelled" not in text


def test_the_figure_draws_an_episode_with_takeovers(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from PIL import Image

    from sequence_ai_core.recording.plot import plot

    episode = read_episode(taken_over(still_taken_at=3.5).write(tmp_path / "bag"))
    path = plot(episode, tmp_path / "report.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width >= 1000
