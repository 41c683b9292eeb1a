"""Each mistake a new user makes with ``sequence-ai`` gives one actionable line on stderr and a
non-zero exit, never a traceback; and the simulator's banner is enough to point a client at it.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support import TEST_KEY

import sequence_ai_core as sai
from sequence_ai_core.credentials import credentials_path
from sequence_ai_core.tools.cli import main
from sequence_ai_sim import GatewaySimulator, SimulatedArm
from sequence_ai_sim.cli import MEASURED_LATENCY_S, add_arguments

CLI = [sys.executable, "-m", "sequence_ai_core.tools.cli"]


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


# ------------------------------------------------------------------ gateway flags


@pytest.mark.parametrize("where", ["before", "after"])
def test_gateway_flags_go_before_or_after_the_command(
    sim: GatewaySimulator, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    flags = ["--base-url", sim.url]
    argv = [*flags, "models"] if where == "before" else ["models", *flags]
    assert main(argv) == 0
    assert "pi05-droid" in capsys.readouterr().out


def test_a_flag_after_the_command_does_not_undo_one_before_it(
    sim: GatewaySimulator, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--base-url", sim.url, "models", "--endpoint", "act"]) == 0
    assert "lingbot-va-5b" in capsys.readouterr().out


def test_insecure_http_refusal_names_the_cli_flag(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "--base-url", "http://gateway.example"]) == 1
    line = one_line(capsys.readouterr().err)
    assert "--allow-insecure-http" in line
    assert "allow_insecure_http=True" not in line


def test_base_url_ending_in_v1_works(
    sim: GatewaySimulator, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "--base-url", f"{sim.url}/v1/"]) == 0
    assert "pi05-droid" in capsys.readouterr().out
    with sai.connect("pi05-droid", api_key=TEST_KEY, base_url=f"{sim.url}/v1") as policy:
        assert policy.base_url == sim.url
        assert policy.describe().action_dim == 8


def test_unknown_endpoint_fails_and_lists_the_served_ones(
    sim: GatewaySimulator, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["models", "--base-url", sim.url, "--endpoint", "bogus"]) == 1
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert "'bogus'" in line and "endpoints served: act" in line
    assert captured.out == ""


def test_an_unreachable_gateway_is_one_line_not_two(clean_env: Path) -> None:
    """Before the library's logger had a NullHandler, its warning reached stderr as well."""
    result = subprocess.run(
        [*CLI, "models", "--base-url", "http://127.0.0.1:1"], capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "gateway unreachable" in one_line(result.stderr)


# ------------------------------------------------------------------ doctor


def test_doctor_with_an_unknown_model_is_not_ready(
    sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    assert main(["doctor", "--base-url", sim.url, "--model", "bogus", "--samples", "1"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] model: bogus is not in the gateway's act catalogue (available: pi05-droid" in out
    assert "NOT ready (model)" in out
    assert "verdict: ready" not in out
    assert sim.stats()["act_requests"] == 0


def test_doctor_latency_times_the_chosen_model(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.15) as slow:
        assert main(["doctor", "--base-url", slow.url, "--model", "lingbot-va-5b"]) == 0
        models = {record["model"] for record in slow.received}
    out = capsys.readouterr().out
    found = re.search(r"latency: lingbot-va-5b act, median of 3: ([\d.]+) ms on one kept", out)
    assert found is not None, out
    assert float(found.group(1)) >= 150.0  # the model's time is in it; a catalogue call has none
    assert models == {"accounts/sequences/models/lingbot-va-5b"}


# ------------------------------------------------------------------ login


def test_login_with_stdin_closed_is_one_line(clean_env: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(clean_env)}
    result = subprocess.run(
        [*CLI, "login"], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
        timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "no key entered; nothing saved" in one_line(result.stderr)
    assert not credentials_path().exists()


def test_login_reads_a_piped_key(clean_env: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(clean_env)}
    result = subprocess.run(
        [*CLI, "login"], input=f"{TEST_KEY}\n", capture_output=True, text=True, env=env,
        timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert credentials_path().read_text().strip() == TEST_KEY
    assert TEST_KEY not in result.stdout + result.stderr


def test_ctrl_c_at_the_login_prompt_says_nothing_was_saved(clean_env: Path) -> None:
    """A real terminal (a pty), the hidden prompt, then SIGINT as Ctrl-C sends it."""
    leader, follower = pty.openpty()
    env = {**os.environ, "XDG_CONFIG_HOME": str(clean_env)}
    process = subprocess.Popen(
        [*CLI, "login"], stdin=follower, stdout=follower, stderr=follower, env=env,
        start_new_session=True,
    )  # fmt: skip
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while b"hidden" not in seen and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.5)[0]:
                seen += os.read(leader, 1024)
        assert b"hidden" in seen, seen
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
        while select.select([leader], [], [], 0.5)[0]:
            try:
                chunk = os.read(leader, 1024)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(leader)
    text = seen.decode(errors="replace")
    assert "interrupted; nothing saved" in text
    assert "Traceback" not in text
    assert not credentials_path().exists()


# ------------------------------------------------------------------ sim


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--port", "99999"], "--port: '99999' is not a port number"),
        (["--port", "-1"], "--port"),
        (["--latency", "-0.5"], "--latency: '-0.5' is not a number of seconds >= 0"),
        (["--latency", "nan"], "--latency"),
        (["--jitter", "-1"], "--jitter"),
        (["--cold-start", "-3"], "--cold-start"),
        (["--connect-delay", "-1"], "--connect-delay"),
        (["--credit", "-2"], "--credit"),
        (["--workers", "0"], "--workers"),
        (["--ms-per-kb", "-16"], "--ms-per-kb"),
        (["--no-auth"], "contradict"),
        (["--tls-cert", "c.pem"], "go together"),
        (["--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"],
         "--tls-cert file not found: /nonexistent/c.pem"),
    ],
)  # fmt: skip
def test_sim_mistakes_are_one_line_and_exit_2(
    clean_env: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert main(["sim", "--api-key", "k", *argv]) == 2
    assert expected in one_line(capsys.readouterr().err)


def test_sim_refuses_a_port_in_use_in_one_line(
    sim: GatewaySimulator, capsys: pytest.CaptureFixture[str]
) -> None:
    port = sim.url.rsplit(":", 1)[1]
    assert main(["sim", "--api-key", "k", "--port", port]) == 1
    assert f"cannot start the simulator on 127.0.0.1:{port}" in one_line(capsys.readouterr().err)


def test_sim_defaults_to_the_measured_gateway_latency() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).latency == MEASURED_LATENCY_S == 0.79


def test_banner_exports_take_the_quick_start_to_the_simulator(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Zero to simulator as the README walks it: start `sequence-ai sim`, paste the two
    exports it prints, run the quick start's loop; the outcome says what happened."""
    process = subprocess.Popen(
        [*CLI, "sim", "--port", "0", "--api-key", "sim-secret", "--latency", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        banner = [process.stdout.readline() for _ in range(10)]
        assert "model latency 0.2 s median" in banner[0]
        exports = dict(re.findall(r"^\s+export (\w+)=(\S+)$", "".join(banner), re.M))
        assert set(exports) == {"SEQUENCES_BASE_URL", "SEQUENCES_API_KEY"}
        assert any("Ctrl-C" in line for line in banner)
        for name, value in exports.items():
            monkeypatch.setenv(name, value)
        holds: list[int] = []
        arm = SimulatedArm("pi05-droid")
        with sai.connect("pi05-droid") as policy:
            outcome = policy.run(
                arm.observe,
                arm.act,
                max_actions=20,
                validate=lambda action: bool(np.all(np.abs(action[:7]) < 0.5)),
                hold=lambda: holds.append(1),
            )
        assert outcome.reason == "completed", outcome
        assert outcome.actions == 20 and holds == []
        assert repr(outcome).endswith("completed)")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()
