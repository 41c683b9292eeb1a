"""The report of episodes the recorder really wrote: run() on the simulator, for every action
space, with chunks that disagree (real seams) and with stalls. What the report counts from
the bag's streams must be what the episode's RunOutcome counted."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from PIL import Image
from support import TEST_KEY
from support.recorded import record_episode

from sequence_ai_core.action_spaces import ACTION_SPACES
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_core.recording.episode_log import read_episode
from sequence_ai_core.recording.measures import Measures, measure
from sequence_ai_core.recording.plot import plot
from sequence_ai_core.recording.summary import summary
from sequence_ai_core.tools.cli import main
from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.catalogue import SimModel

pytest.importorskip("matplotlib")

COUNTS = ("actions", "chunks", "requests", "underruns", "stalls", "blended_seams")
COUNTS += ("skipped_stale", "skipped_late", "early_ticks")
AMOUNTS = ("max_seam_jump", "max_seam_step", "seam_step_p95", "underrun_s", "duty_cycle")
AMOUNTS += ("max_gap_s", "latency_p50_s", "latency_p95_s", "staleness_p50_s")


def _agree(measures: Measures, outcome: RunOutcome) -> None:
    for name in COUNTS:
        assert getattr(measures, name) == getattr(outcome, name), name
    for name in AMOUNTS:
        counted, returned = getattr(measures, name), getattr(outcome, name)
        if math.isnan(returned):
            assert math.isnan(counted), name
        else:
            # epoch seconds as floats in the bag resolve 0.24 µs
            assert counted == pytest.approx(returned, rel=1e-6, abs=2e-6), name


@pytest.mark.parametrize("space", ACTION_SPACES)
def test_the_report_of_a_recorded_episode_counts_what_the_outcome_counted(
    clean_env: Path, tmp_path: Path, space: str
) -> None:
    model = SimModel(f"rep-{space}", "sim", "droid", space, 7, 30.0, 12, ("front",))
    with GatewaySimulator(
        api_key=TEST_KEY, latency_s=0.05, models=[model], disagreement="calibrated"
    ) as server:
        episode = record_episode(server.url, model, RecordConfig(tmp_path), max_actions=90)
    outcome = episode.outcome
    assert outcome.chunks >= 5 and outcome.recording_dropped == 0
    recorded = read_episode(episode.bag)
    measures = measure(recorded)
    _agree(measures, outcome)
    assert measures.dropped == 0 and measures.unattributed == 0 and measures.starts_recorded
    assert "differs" not in summary(recorded, measures)
    png = tmp_path / "report.png"
    plot(recorded, png)
    with Image.open(png) as image:
        assert image.format == "PNG" and image.width >= 1000
    assert png.stat().st_size > 20_000


def test_stalls_and_their_holds_are_in_the_report_as_the_outcome_counted(
    clean_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Chunks of 0.2 s behind a 0.35 s round trip, strictly closed loop: a stall a chunk."""
    model = SimModel("rep-stall", "sim", "droid", "joint_absolute", 7, 30.0, 6, ("front",))
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.35, models=[model]) as server:
        episode = record_episode(
            server.url, model, RecordConfig(tmp_path), max_actions=30, prefetch=False
        )
    outcome = episode.outcome
    assert outcome.stalls >= 3 and episode.holds == outcome.stalls
    recorded = read_episode(episode.bag)
    measures = measure(recorded)
    _agree(measures, outcome)
    assert measures.holds == {"underrun": outcome.stalls}
    assert main(["report", str(episode.bag)]) == 0
    printed = capsys.readouterr().out
    assert "differs" not in printed and f"underrun x{outcome.stalls}" in printed
    assert (episode.bag / "report.png").stat().st_size > 20_000
