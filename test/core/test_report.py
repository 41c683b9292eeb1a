"""``sequence-ai report BAG``: a recorded episode read back, counted again, summarised, drawn.

The bags are written here with rosbags as ``recording.topics`` specifies (``recorded_bags``):
by hand, with every number known, for each kind of action space; and from the real playback
engine on the exact fake clock, whose own ``RunOutcome`` the report's numbers must equal. No
assertion is about wall time.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rosbags")

from support.engine_clock import Clock, NoHttp
from support.recorded_bags import EpisodeBag, record_engine
from support.seam_rig import HZ, STEPS, Scripted, ramp

from sequence_ai_core.errors import Stalled
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.handover import Handover
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_core.recording.episode_log import read_episode
from sequence_ai_core.recording.measures import measure
from sequence_ai_core.recording.recorder import FlightRecorder
from sequence_ai_core.recording.summary import summary
from sequence_ai_core.tools.cli import main
from sequence_ai_core.types import FloatArray, Observation, Proprioception

ROOT = Path(__file__).resolve().parents[2]
PERIOD = 0.1
#: One space of each kind: positions, velocities, deltas (played step by step).
KINDS = ("joint_absolute", "joint_velocity", "ee_delta")
#: Seam jump of the second seam on the arm dims (chunk 3 is offset by 0.3, plus one step).
ARM_JUMP = 0.4
GRIPPER_JUMP = 1.0


def _rows(anchor: float, offset: float, gripper: float, steps: int = 10) -> FloatArray:
    """A ramp: each arm dim at its step's time plus ``offset``; a gripper column last."""
    times = anchor + np.arange(steps) * PERIOD
    return np.column_stack([times + offset, times, np.full(steps, gripper)])


def known_episode(
    space: str, gripper_dims: tuple[int, ...] | None = (2,), outcome_actions: int = 25
) -> EpisodeBag:
    """Three chunks, 25 commands: chunk 1 plays out (0.8-1.7 s), two underrun ticks (one
    spell, one hold), chunk 2 starts at once on arrival (seam 0.3 on the arm), chunk 3 takes
    over at its anchor (2.5 s: seam 0.4 on the arm, 1.0 on the gripper), then a stop."""
    bag = EpisodeBag(gripper_dims)
    plan = [  # received, observed, anchor, offset, gripper, commands played (from step 0)
        (0.8, 0.0, 0.8, 0.0, 0.0, 10),
        (2.0, 1.0, 2.0, 0.0, 0.0, 5),
        (2.2, 1.5, 2.5, 0.3, 1.0, 10),
    ]
    for request, (_, observed, *_) in enumerate(plan, start=1):
        bag.observation(observed, [observed], request=request)
    for seq, (received, observed, anchor, offset, gripper, played) in enumerate(plan, start=1):
        rows = _rows(anchor, offset, gripper)
        bag.chunk(received, rows, anchor=anchor, space=space, request=seq, seq=seq,
                  observed_at=observed, model="pi05-droid")  # fmt: skip
        for i in range(played):
            bag.command(round(anchor + i * PERIOD, 9), rows[i], space)
    bag.event(1.8, "underrun")
    bag.hold(1.8, "underrun")
    bag.event(1.9, "underrun")
    bag.hold(3.5, "stopped")
    bag.dropped = 2
    bag.outcome(3.5, KNOWN_OUTCOME | {"actions": outcome_actions, "action_space": space})
    return bag


#: What the engine would have counted for ``known_episode`` (its rules, by hand).
KNOWN_OUTCOME: dict[str, object] = {
    "reason": "stopped", "actions": 25, "chunks": 3, "requests": 3, "underruns": 2,
    "stalls": 1, "underrun_s": 0.2, "duty_cycle": 2.5 / 2.7, "max_gap_s": 0.3,
    "max_seam_jump": ARM_JUMP, "max_seam_step": ARM_JUMP, "seam_step_p95": 0.395,
    "blended_seams": 0, "latency_p50_s": 0.8, "latency_p95_s": 0.98, "skipped_stale": 0,
    "skipped_late": 0, "early_ticks": 0, "elapsed_s": 3.5, "error": None,
}  # fmt: skip


def _ages() -> list[float]:
    return (
        [0.8 + i * PERIOD for i in range(10)]
        + [1.0 + i * PERIOD for i in range(5)]
        + [1.0 + i * PERIOD for i in range(10)]
    )


@pytest.mark.parametrize("space", KINDS)
def test_the_numbers_are_counted_from_the_streams(space: str, tmp_path: Path) -> None:
    episode = read_episode(known_episode(space).write(tmp_path / "bag"))
    assert episode.commands.shape == (25, 3) and len(episode.chunks) == 3
    np.testing.assert_allclose(episode.chunks[2].steps, _rows(2.5, 0.3, 1.0))
    assert episode.chunks[1].anchor_t == pytest.approx(2.0)
    assert episode.chunks[2].observed_at_t == pytest.approx(1.5)
    found = measure(episode)
    assert found.starts_recorded is False and found.unattributed == 0
    assert found.seam_dims == (0, 1)
    expected = {k: v for k, v in KNOWN_OUTCOME.items() if k not in ("reason", "error")}
    for field, value in expected.items():
        assert getattr(found, field) == pytest.approx(value), field
    assert (found.seams, found.chunks_received) == (2, 3)
    assert found.max_step == pytest.approx(0.4)
    assert found.holds == {"underrun": 1, "stopped": 1}
    assert found.dropped == 2
    assert found.staleness_p50_s == pytest.approx(np.quantile(_ages(), 0.5))
    assert found.staleness_p95_s == pytest.approx(np.quantile(_ages(), 0.95))


@pytest.mark.parametrize("space", KINDS)
def test_the_summary_names_each_number_beside_the_outcome_s(space: str, tmp_path: Path) -> None:
    text = summary(read_episode(known_episode(space).write(tmp_path / "bag")))
    lines = {line.split("  ")[1].strip(): line for line in text.splitlines() if "   " in line}
    assert "<- differs" not in text, text
    assert lines["commands played"].split()[-2:] == ["25", "25"]
    assert lines["underrun ticks"].split()[-2:] == ["2", "2"]
    assert lines["stalls (underrun spells)"].split()[-2:] == ["1", "1"]
    seam = next(line for label, line in lines.items() if label.startswith("max seam jump"))
    assert "arm dims" in seam and seam.split()[-2:] == ["0.4000", "0.4000"]
    assert "holds: 2 (stopped x1, underrun x1)" in text
    assert "recording: " in text and "2 dropped" in text
    assert "model pi05-droid" in text and space in text and "grippers 2" in text


def test_a_number_that_disagrees_with_the_outcome_is_marked(tmp_path: Path) -> None:
    bag = known_episode("joint_absolute", outcome_actions=26).write(tmp_path / "bag")
    marked = [line for line in summary(read_episode(bag)).splitlines() if "<- differs" in line]
    assert len(marked) == 1 and marked[0].split()[:2] == ["commands", "played"]


def test_without_gripper_dims_the_seams_are_over_all_dims_and_say_so(tmp_path: Path) -> None:
    bag = known_episode("joint_absolute", gripper_dims=None).write(tmp_path / "bag")
    episode = read_episode(bag)
    found = measure(episode)
    assert found.seam_dims is None and found.max_seam_jump == pytest.approx(GRIPPER_JUMP)
    text = summary(episode, found)
    seam = next(line for line in text.splitlines() if "max seam jump" in line)
    assert "all dims: the bag names no gripper dims" in seam and "<- differs" in seam
    assert "grippers unknown" in text


#: Refill times that run the plan dry twice, reorder answers and waste a request.
UNEVEN = (0.5, 1.4, 0.9, 2.1, 0.3, 1.2)
COMPARED = (
    "actions", "chunks", "requests", "underruns", "stalls", "underrun_s", "duty_cycle",
    "max_gap_s", "max_seam_jump", "max_seam_step", "seam_step_p95", "blended_seams",
    "latency_p50_s", "latency_p95_s", "staleness_p50_s", "staleness_p95_s", "skipped_stale",
    "skipped_late", "early_ticks", "elapsed_s",
)  # fmt: skip


def _agree(found: object, outcome: object) -> list[str]:
    wrong = []
    for field in COMPARED:
        mine, theirs = float(getattr(found, field)), float(getattr(outcome, field))
        same = (math.isnan(mine) and math.isnan(theirs)) or math.isclose(
            mine, theirs, rel_tol=1e-6, abs_tol=1e-6
        )
        if not same:
            wrong.append(f"{field}: {mine} from the bag, {theirs} in the outcome")
    return wrong


def _disagreeing(n: int) -> FloatArray:
    return np.array([0.3 * (-1) ** n, 0.05 * n])


@pytest.mark.parametrize("space", KINDS)
@pytest.mark.parametrize("handover", ["smooth", "none"])
def test_the_engine_s_outcome_is_counted_again_from_its_bag(
    space: str, handover: Handover, tmp_path: Path
) -> None:
    outcome = record_engine(
        tmp_path / "bag", ramp(_disagreeing), space=space, seconds=12,
        latency=lambda n: UNEVEN[n % len(UNEVEN)], config=EngineConfig(handover=handover),
        gripper_dims=(2,),
    )  # fmt: skip
    assert outcome.stalls >= 1 and outcome.chunks >= 10 and outcome.wasted_requests >= 1
    assert (outcome.blended_seams > 0) == (handover != "none")
    found = measure(read_episode(tmp_path / "bag"))
    assert found.starts_recorded and found.unattributed == 0
    assert _agree(found, outcome) == []
    assert found.holds == {"underrun": outcome.stalls}


@pytest.mark.parametrize("space", KINDS)
def test_without_started_events_the_starts_are_rebuilt_from_the_anchors(
    space: str, tmp_path: Path
) -> None:
    """At a steady refill the recorded anchors are where chunks played."""
    outcome = record_engine(
        tmp_path / "bag", ramp(_disagreeing), space=space, seconds=8, started_events=False,
        config=EngineConfig(prefetch=False), gripper_dims=(2,),
    )  # fmt: skip
    assert outcome.stalls >= 3
    found = measure(read_episode(tmp_path / "bag"))
    assert not found.starts_recorded and found.unattributed == 0
    assert _agree(found, outcome) == []
    assert "rebuilt from the recorded anchors" in summary(read_episode(tmp_path / "bag"))


@pytest.mark.parametrize("space", KINDS)
def test_early_ticks_the_engine_journaled_are_counted_again_from_its_bag(
    space: str, tmp_path: Path
) -> None:
    """``drive`` and the flight recorder on the exact clock, with a loop ticking every half
    period (a clock running fast): one chunk, then silence. Each step's second tick is early
    (none in delta spaces, played in order), in the bag as in the outcome."""
    clock = Clock()
    gateway = Scripted(clock, ramp(_disagreeing), space, lambda n: 0.29 if n == 0 else 1e9)
    config = EngineConfig(expected_covers_s=STEPS / HZ, expected_control_hz=HZ)
    recorder = FlightRecorder(RecordConfig(tmp_path, image_hz=0.0), model="m", clock=clock)
    engine = PlaybackEngine(NoHttp(), config, clock=clock, executor=gateway, journal=recorder)

    def observe() -> Observation:
        return Observation(proprioception=Proprioception(joint_positions=[clock.now]))

    with engine:
        outcome = drive(
            engine, observe, lambda action: None, max_actions=1_000, clock=clock,
            sleep=lambda s: gateway.advance(clock.now + 0.5 / HZ), stall_timeout_s=0.5,
            journal=recorder,
        )  # fmt: skip
    assert recorder.close() and recorder.dropped == 0
    assert isinstance(outcome.error, Stalled) and outcome.actions == STEPS
    assert outcome.early_ticks == (0 if space == "ee_delta" else STEPS)
    episode = read_episode(recorder.path)
    found = measure(episode)
    assert (found.early_ticks, found.actions) == (outcome.early_ticks, outcome.actions)
    (row,) = [line for line in summary(episode, found).splitlines() if "early ticks" in line]
    assert row.split()[-2:] == [str(outcome.early_ticks)] * 2


def test_other_mcap_readers_read_the_bag_as_ros_2_messages(tmp_path: Path) -> None:
    reader = pytest.importorskip("mcap_ros2.reader")
    bag = known_episode("joint_absolute").write(tmp_path / "bag")
    (mcap,) = bag.glob("*.mcap")
    topics = [message.channel.topic for message in reader.read_ros2_messages(str(mcap))]
    assert topics.count("/command") == 25 and topics[-1] == "/recording"


def test_a_bag_that_is_no_episode_is_refused_by_path(tmp_path: Path) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    with Writer(tmp_path / "chatter", version=8, storage_plugin=StoragePlugin.MCAP) as writer:
        conn = writer.add_connection("/chatter", "std_msgs/msg/String", typestore=store)
        hello = store.types["std_msgs/msg/String"](data="hello")
        writer.write(conn, 1, store.serialize_cdr(hello, "std_msgs/msg/String"))
    with pytest.raises(ValueError, match="holds no topic of a recorded episode") as refused:
        read_episode(tmp_path / "chatter")
    assert str(tmp_path / "chatter") in str(refused.value) and "/chatter" in str(refused.value)
    (tmp_path / "plain").mkdir()
    with pytest.raises(ValueError, match=r"no metadata\.yaml"):
        read_episode(tmp_path / "plain")
    with pytest.raises(ValueError, match="no such bag"):
        read_episode(tmp_path / "missing")


def test_an_episode_without_commands_is_summarised(tmp_path: Path) -> None:
    bag = EpisodeBag()
    bag.outcome(0.5, {"reason": "raised:AuthError", "actions": 0, "error": "bad key"})
    episode = read_episode(bag.write(tmp_path / "bag"))
    text = summary(episode)
    assert "outcome: raised:AuthError (bad key)" in text and "holds: none" in text
    assert measure(episode).actions == 0


# ---------------------------------------------------------------------------- the figure


def _png(path: Path) -> tuple[int, int]:
    from PIL import Image

    assert path.stat().st_size > 20_000
    with Image.open(path) as image:
        assert image.format == "PNG"
        return image.size


@pytest.mark.parametrize("space", KINDS)
def test_the_figure_is_one_png_a_screen_wide(space: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from sequence_ai_core.recording.plot import plot

    episode = read_episode(known_episode(space).write(tmp_path / "bag"))
    width, height = _png(plot(episode, tmp_path / "report.png"))
    assert width >= 1000 and height >= 600


def test_the_figure_draws_at_most_eight_dimensions(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from sequence_ai_core.recording.plot import plot

    sizes = []
    for dims in (8, 12):
        bag = EpisodeBag((dims - 1,))
        rows = np.tile(np.arange(10)[:, None] * PERIOD, (1, dims))
        bag.chunk(0.0, rows, anchor=0.0, space="joint_absolute", request=1, seq=1,
                  observed_at=0.0)  # fmt: skip
        for i in range(10):
            bag.command(i * PERIOD, rows[i], "joint_absolute")
        episode = read_episode(bag.write(tmp_path / f"bag{dims}"))
        sizes.append(_png(plot(episode, tmp_path / f"report{dims}.png")))
    assert sizes[0] == sizes[1]


# ---------------------------------------------------------------------------- the command


def test_the_command_prints_the_summary_and_writes_the_figure_in_the_bag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    bag = known_episode("joint_velocity").write(tmp_path / "bag")
    assert main(["report", str(bag)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"episode {bag}\n") and f"figure: {bag / 'report.png'}" in out
    _png(bag / "report.png")
    (mcap,) = bag.glob("*.mcap")
    assert main(["report", str(mcap), "-o", str(tmp_path / "elsewhere.png")]) == 0
    _png(tmp_path / "elsewhere.png")
    assert main(["report", str(mcap)]) == 0  # beside the .mcap file
    _png(mcap.with_suffix(".report.png"))


def test_no_plot_writes_no_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bag = known_episode("ee_delta").write(tmp_path / "bag")
    assert main(["report", str(bag), "--no-plot"]) == 0
    assert "commands played" in capsys.readouterr().out
    assert not (bag / "report.png").exists()


@pytest.mark.parametrize("where", ["missing", "plain", "file.txt"])
def test_a_bad_path_is_one_line_and_exit_1(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "file.txt").write_text("not a bag")
    assert main(["report", str(tmp_path / where)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("sequence-ai report: ") and str(tmp_path / where) in line


def test_a_figure_that_cannot_be_written_is_one_line_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    bag = known_episode("joint_absolute").write(tmp_path / "bag")
    assert main(["report", str(bag), "-o", str(tmp_path / "no" / "such" / "dir.png")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("sequence-ai report: cannot write the figure")


@pytest.mark.parametrize("missing", ["rosbags", "matplotlib"])
def test_without_the_report_extra_the_command_says_what_to_install(
    missing: str, tmp_path: Path
) -> None:
    bag = known_episode("joint_absolute").write(tmp_path / "bag")
    script = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        "from sequence_ai_core.tools.cli import main\n"
        f"sys.exit(main(['report', {str(bag)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("sequence-ai report: ") and missing in line
    assert line.endswith("pip install 'sequence_ai_ros[report]'")


def test_the_cli_imports_without_the_report_s_dependencies() -> None:
    script = (
        "import sys\n"
        "for name in ('rosbags', 'matplotlib'): sys.modules[name] = None\n"
        "from sequence_ai_core.tools.cli import main\n"
        "assert main(['--help']) == 0\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "report" in done.stdout
