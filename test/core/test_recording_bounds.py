"""The recorder never stops an arm: a size or duration cap, an unwritable path, a full disk
(/dev/full under the bag's file) and a full queue each stop recording with one warning and a
count of what was dropped, while the episode plays to its end. The key is in no byte."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import TEST_KEY
from support.recorded import only, read_bag, record_episode, values_of

from sequence_ai_core.errors import ConfigurationError
from sequence_ai_core.playback.journal import Journal
from sequence_ai_core.recording import topics
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_core.recording.recorder import FlightRecorder
from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.catalogue import CATALOGUE, reference_chunk
from sequence_ai_sim.responses import act_body, models_body

MODEL = "pi05-droid"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("sequence_ai_core.recording") and r.levelno == logging.WARNING
    ]


@pytest.mark.parametrize(
    "cap", [{"max_bytes": 6000}, {"max_duration_s": 1.0}], ids=["size", "duration"]
)
def test_a_cap_stops_recording_and_the_episode_plays_on(
    sim: GatewaySimulator, tmp_path: Path, caplog: pytest.LogCaptureFixture, cap: Any
) -> None:
    episode = record_episode(sim.url, MODEL, RecordConfig(tmp_path, **cap), max_actions=40)
    assert episode.outcome.reason == "completed" and episode.outcome.actions == 40
    bag = read_bag(episode.bag)
    recorded = len(bag[topics.COMMAND.name])
    assert 0 < recorded < 40
    counts = values_of(only(bag[topics.RECORDING.name]))
    assert "cap" in counts["stopped"]
    assert int(counts["dropped"]) == episode.outcome.recording_dropped >= 40 - recorded
    assert values_of(only(bag[topics.OUTCOME.name]))["actions"] == "40"  # written past it
    (warning,) = _warnings(caplog)
    assert "cap" in warning and "goes on" in warning


def test_an_unwritable_directory_is_a_warning_and_the_episode_plays_on(
    sim: GatewaySimulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    episode = record_episode(sim.url, MODEL, RecordConfig(blocker / "bags"), max_actions=20)
    assert episode.outcome.reason == "completed" and episode.outcome.actions == 20
    assert episode.outcome.recording_dropped >= 20  # every command at least
    assert not episode.bag.exists()
    (warning,) = _warnings(caplog)
    assert "cannot create" in warning and str(blocker) in warning


def test_a_full_disk_is_a_warning_and_the_episode_plays_on(
    sim: GatewaySimulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Once the bag is being written, its file descriptor is pointed at /dev/full: every
    write from then on fails with ENOSPC, as on a full disk."""
    acted: list[np.ndarray] = []
    full = os.open("/dev/full", os.O_WRONLY)

    def act(action: np.ndarray) -> None:
        acted.append(action)
        if len(acted) == 10:
            (fd,) = _open_files(tmp_path, ".mcap")
            os.dup2(full, fd)

    try:
        episode = record_episode(sim.url, MODEL, RecordConfig(tmp_path), max_actions=60, act=act)
    finally:
        os.close(full)
    assert episode.outcome.reason == "completed" and episode.outcome.actions == 60
    # every command after the tenth was queued after the file pointed at /dev/full
    assert episode.outcome.recording_dropped >= 50
    (warning,) = _warnings(caplog)
    assert "write failed: No space left on device" in warning


def _open_files(under: Path, suffix: str) -> list[int]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(under)) and target.endswith(suffix):
            found.append(int(name))
    return found


def test_a_full_queue_drops_and_counts_every_record_it_drops(tmp_path: Path) -> None:
    recorder = FlightRecorder(RecordConfig(tmp_path, queue_limit=3), model=MODEL)
    journal: Journal = recorder
    for i in range(200):  # a burst far faster than the writer's 50 ms poll
        journal.command(float(i), np.full(3, float(i)))
    assert recorder.close()
    bag = read_bag(recorder.path)
    written = len(bag[topics.COMMAND.name])
    assert recorder.dropped > 0 and written + recorder.dropped == 200
    assert values_of(only(bag[topics.RECORDING.name]))["dropped"] == str(recorder.dropped)


class _Hostile(BaseHTTPRequestHandler):
    """A gateway that answers valid chunks with the key in every text it controls."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = models_body({MODEL: CATALOGUE[MODEL]}, None)
        body["data"][0]["architecture"] = f"pi05 {TEST_KEY}"
        self._send(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        model = CATALOGUE[MODEL]
        steps = reference_chunk(model, 0.0, model.action_horizon)
        body = act_body(
            model, steps, response_id=f"id-{TEST_KEY}", inference_ms=5.0, queue_ms=0.0,
            usage={"note": TEST_KEY},
        )  # fmt: skip
        body["model"] = f"{model.id} {TEST_KEY}"
        body["warnings"] = [f"key {TEST_KEY}"]
        self._send(body)

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", TEST_KEY)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def hostile() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_the_key_is_in_no_byte_of_the_bag_whatever_the_server_sends(
    clean_env: Path, hostile: str, tmp_path: Path
) -> None:
    episode = record_episode(
        hostile, MODEL, RecordConfig(tmp_path), max_actions=20, instruction=f"say {TEST_KEY}"
    )
    assert episode.outcome.actions == 20
    assert TEST_KEY in episode.chunks[0].model  # the answer reached the caller as sent
    files = list(episode.bag.iterdir())
    assert len(files) == 2
    for path in files:
        assert TEST_KEY.encode() not in path.read_bytes()
    bag = read_bag(episode.bag)
    assert values_of(bag[topics.CHUNK_INFO.name][0].message)["model"].endswith("***")
    assert values_of(bag[topics.REQUEST.name][0].message)["instruction"] == "say ***"


def test_without_rosbags_record_is_one_configuration_error_before_any_request(
    sim: GatewaySimulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "rosbags.rosbag2", None)  # what a missing package raises
    with pytest.raises(ConfigurationError, match=r"pip install 'sequence_ai_ros\[record\]'"):
        record_episode(sim.url, MODEL, RecordConfig(tmp_path), max_actions=5)
    assert sim.stats()["act_requests"] == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "settings",
    [
        {"directory": ""},
        {"image_hz": -1.0},
        {"image_hz": float("nan")},
        {"image_max_side": 4},
        {"max_bytes": 0},
        {"max_duration_s": 0.0},
        {"queue_limit": True},
    ],
)
def test_bad_record_settings_are_refused_naming_the_setting(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    arguments = {"directory": tmp_path, **settings}
    with pytest.raises(ValueError, match=next(iter(settings))):
        RecordConfig(**arguments)
