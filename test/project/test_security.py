"""Security properties across the package: where the API key may go (one header, to one
host) and where it may not (logs, reprs, errors, output, other hosts); the credentials file;
TLS and plain-HTTP refusals; redirects; the simulator's admin endpoint.
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from support import TEST_KEY
from support.faultkit import Episode, assert_key_absent, held_reprs, key_free_texts

from sequence_ai_core import credentials
from sequence_ai_core.errors import SequencesError
from sequence_ai_core.gateway.catalogue import models
from sequence_ai_core.policy import connect
from sequence_ai_core.tools.cli import main
from sequence_ai_core.types import Observation, Proprioception
from sequence_ai_sim import Fault, GatewaySimulator
from sequence_ai_sim import cli as sim_cli

MODEL = "lingbot-vla-v2-6b"
OBSERVATION = Observation(Proprioception([0.0] * 7))


# ------------------------------------------------------------------ the key in text


def test_key_absent_from_every_log_and_output_of_a_busy_session(
    clean_env: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Models, predict, a faulty run, doctor and login, all at DEBUG on every logger."""
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{TEST_KEY}\n"))  # `sequence-ai login < file`
    texts: list[str] = []
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.01) as sim:
        texts += [repr(m) for m in models(base_url=sim.url)]
        with connect(MODEL, base_url=sim.url) as policy:
            prediction = policy.predict(OBSERVATION, seed=1)
            texts += [*held_reprs(policy), repr(prediction), repr(sim)]
            for fault in (Fault.status(401), Fault.reset(), Fault.not_json(), Fault.html(502)):
                sim.inject(fault)
                with pytest.raises(SequencesError) as raised:
                    policy.predict(OBSERVATION)
                texts += [str(raised.value), repr(raised.value), repr(raised.value.__cause__)]
            episode = Episode(sim, Fault.status(403), inject_after=2)
            outcome = episode.run(policy)
            texts += key_free_texts(outcome)
        assert main(["--base-url", sim.url, "doctor", "--samples", "1"]) == 0
        assert main(["login"]) == 0
        with httpx.Client(base_url=sim.url) as http:
            texts.append(http.get("/sim/stats").text)
    out, err = capfd.readouterr()
    texts += [out, err, caplog.text]
    texts += [repr(record.args) for record in caplog.records]
    assert {r.name.split(".")[0] for r in caplog.records} >= {"httpx", "httpcore"}
    assert any(r.name.startswith("sequence_ai_sim") for r in caplog.records)
    assert_key_absent(texts)


def test_key_echoed_by_the_gateway_is_not_repeated(clean_env: Path) -> None:
    """Some gateways quote the key they refused. The client's errors must not carry it on
    into logs and tracebacks."""
    with GatewaySimulator(api_key=TEST_KEY) as sim:
        sim.inject(Fault.status(401, body={"detail": f"key {TEST_KEY} is revoked"}))
        with (
            connect(MODEL, api_key=TEST_KEY, base_url=sim.url) as policy,
            pytest.raises(SequencesError) as raised,
        ):
            policy.predict(OBSERVATION)
    assert "revoked" in str(raised.value)
    assert TEST_KEY not in str(raised.value) + repr(raised.value)


# ------------------------------------------------------------------ where the key goes


class _Recorder(BaseHTTPRequestHandler):
    """A bare server that records request headers and answers a one-model catalogue."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, str]]

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers.items()))  # type: ignore[attr-defined]
        body = json.dumps({"data": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_authorization_header_is_exactly_the_key_or_absent(
    clean_env: Path, recorder: ThreadingHTTPServer
) -> None:
    models(base_url=_url(recorder))
    models(base_url=_url(recorder), api_key=TEST_KEY)
    without, with_key = recorder.seen  # type: ignore[attr-defined]
    assert not {k.lower() for k in without} & {"authorization", "cookie", "x-api-key"}
    assert with_key["Authorization"] == f"Bearer {TEST_KEY}"
    assert sum(TEST_KEY in value for value in with_key.values()) == 1


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed_with_the_key(
    clean_env: Path, recorder: ThreadingHTTPServer, status: int
) -> None:
    """A redirect (hijacked DNS, a misconfigured proxy) must not carry the key elsewhere."""
    elsewhere = f"{_url(recorder)}/v1/act"
    with GatewaySimulator(api_key=TEST_KEY) as sim:
        sim.inject(Fault.status(status, headers={"Location": elsewhere}))
        with (
            connect(MODEL, api_key=TEST_KEY, base_url=sim.url) as policy,
            pytest.raises(SequencesError) as raised,
        ):
            policy.predict(OBSERVATION)
    assert raised.value.status == status
    assert recorder.seen == []  # type: ignore[attr-defined]


# ------------------------------------------------------------------ the credentials file


def _bad_modes(path: Path) -> list[int]:
    """Modes of files in ``path`` that someone other than the owner could read or write."""
    found = []
    for entry in os.scandir(path):
        try:
            mode = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
        except FileNotFoundError:
            continue  # renamed away between listing and stat
        if mode & 0o077:
            found.append(mode)
    return found


def test_credentials_file_never_group_or_world_readable(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under umask 0, every file that ever exists in the credentials folder is 0600: each
    creation asks for 0600 atomically (O_CREAT|O_EXCL), and a watcher never sees otherwise."""
    created: list[tuple[str, int, int]] = []
    real_open = os.open

    def recording_open(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            created.append((str(path), flags, mode))
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", recording_open)  # credentials.py calls os.open
    folder = credentials.credentials_path().parent
    bad: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            if folder.exists():
                bad.extend(_bad_modes(folder))

    watcher = threading.Thread(target=watch, daemon=True)
    old_umask = os.umask(0)
    try:
        watcher.start()
        for i in range(200):
            credentials.save_api_key(f"{TEST_KEY}-{i}")
    finally:
        os.umask(old_umask)
        stop.set()
        watcher.join(timeout=5)
    assert len(created) == 200
    for _, flags, mode in created:
        assert flags & os.O_EXCL and mode == 0o600
    assert bad == []
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert os.listdir(folder) == ["credentials"]


def test_credentials_symlink_is_replaced_not_written_through(clean_env: Path) -> None:
    target = clean_env.parent / "someone-elses-file"
    target.write_text("unchanged\n")
    path = credentials.credentials_path()
    path.parent.mkdir(parents=True, mode=0o700)
    path.symlink_to(target)
    credentials.save_api_key(TEST_KEY)
    assert target.read_text() == "unchanged\n"
    assert not path.is_symlink() and stat.S_IMODE(path.stat().st_mode) == 0o600


# ------------------------------------------------------------------ transport refusals


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1.nip.io",
        "http://localhost.example.com",
        "http://0.0.0.0:8765",
        "http://[::ffff:10.0.0.1]",
        "http://2130706433",
        "HTTP://GATEWAY.EXAMPLE",
    ],
)
def test_plain_http_lookalikes_of_loopback_are_refused(clean_env: Path, url: str) -> None:
    with pytest.raises(ValueError, match="unencrypted"):
        connect(MODEL, api_key=TEST_KEY, base_url=url)


def test_plain_http_from_the_environment_is_refused(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEQUENCES_BASE_URL", "http://gateway.example:8080")
    with pytest.raises(ValueError, match="unencrypted"):
        models()


@pytest.mark.parametrize("verify", [False, 0, None])
def test_verification_cannot_be_switched_off(clean_env: Path, verify: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        connect(MODEL, api_key=TEST_KEY, base_url="https://gateway.example", verify=verify)


# ------------------------------------------------------------------ the simulator


def _non_loopback_address() -> str | None:
    """This machine's address on its default route, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for UDP connect
            address: str = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_simulator_binds_loopback_by_default() -> None:
    assert GatewaySimulator().host == "127.0.0.1"
    import argparse

    parser = argparse.ArgumentParser()
    sim_cli.add_arguments(parser)
    assert parser.parse_args([]).host == "127.0.0.1"


def test_simulator_stats_refused_to_non_loopback_clients() -> None:
    address = _non_loopback_address()
    if address is None:
        pytest.skip("no non-loopback interface on this machine")
    with GatewaySimulator(host="0.0.0.0", api_key=TEST_KEY) as sim:
        port = sim.url.rsplit(":", 1)[1]
        with httpx.Client(timeout=5) as http:
            remote = http.get(f"http://{address}:{port}/sim/stats")
            local = http.get(f"http://127.0.0.1:{port}/sim/stats")
    assert remote.status_code == 403 and "connections" not in remote.text
    assert local.status_code == 200 and "connections" in local.json()
    assert TEST_KEY not in local.text


def test_simulator_never_logs_authorization(
    clean_env: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG, logger="sequence_ai_sim")
    with GatewaySimulator(api_key=TEST_KEY) as sim, httpx.Client(base_url=sim.url) as http:
        for key in (TEST_KEY, "sk-wrong-0000"):
            http.post("/v1/act", json={}, headers={"Authorization": f"Bearer {key}"})
    out, err = capfd.readouterr()
    records = [r for r in caplog.records if r.name.startswith("sequence_ai_sim")]
    assert records  # the simulator does log requests at DEBUG...
    for text in (out, err, caplog.text):
        assert TEST_KEY not in text and "sk-wrong-0000" not in text  # ...but never the key
