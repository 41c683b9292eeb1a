"""The ``sequence-ai`` command against the real simulator."""

from __future__ import annotations

import io
import os
import re
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import TEST_KEY

from sequence_ai_core.credentials import credentials_path, resolve_api_key
from sequence_ai_core.tools.cli import main
from sequence_ai_sim import GatewaySimulator


def test_models_prints_a_table(sim: GatewaySimulator, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--base-url", sim.url, "models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["MODEL", "ROBOT", "ACTION"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == {
        "pi05-droid",
        "cosmos3-edge-policy-droid",
        "lingbot-va-5b",
        "lingbot-vla-v2-6b",
    }
    assert "2.13s" in rows["cosmos3-edge-policy-droid"]
    assert "exterior_1, wrist_left" in rows["pi05-droid"]


def test_models_reads_base_url_from_environment(
    sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQUENCES_BASE_URL", sim.url)
    assert main(["models"]) == 0
    assert "lingbot-va-5b" in capsys.readouterr().out


def test_models_unreachable_gateway_fails(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--base-url", "http://127.0.0.1:1", "models"]) == 1
    assert "unreachable" in capsys.readouterr().err


def test_insecure_base_url_fails_cleanly(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--base-url", "http://gateway.example", "models"]) == 1
    assert "unencrypted" in capsys.readouterr().err


class _Terminal(io.StringIO):
    """stdin as an interactive terminal, so login prompts with getpass."""

    def isatty(self) -> bool:
        return True


def test_login_saves_0600_and_logout_deletes(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts: list[str] = []

    def fake_getpass(prompt: str = "") -> str:
        prompts.append(prompt)
        return f"  {TEST_KEY}\n"

    monkeypatch.setattr("getpass.getpass", fake_getpass)
    monkeypatch.setattr("sys.stdin", _Terminal())
    assert main(["login"]) == 0
    path = credentials_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_api_key() == TEST_KEY
    assert len(prompts) == 1 and "hidden" in prompts[0]
    out = capsys.readouterr().out
    assert str(path) in out and TEST_KEY not in out

    assert main(["login", "--logout"]) == 0
    assert not path.exists()
    assert main(["login", "--logout"]) == 0
    assert "no saved key" in capsys.readouterr().out


def test_login_with_empty_key_saves_nothing(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "   ")
    monkeypatch.setattr("sys.stdin", _Terminal())
    assert main(["login"]) == 1
    assert not credentials_path().exists()


def test_doctor_all_good(
    sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    assert main(["--base-url", sim.url, "doctor", "--samples", "3"]) == 0
    out = capsys.readouterr().out
    assert "[  ok] API key: found in $SEQUENCES_API_KEY" in out
    assert "[  ok] gateway reachable" in out
    assert "[  ok] key valid and credit: one act request on pi05-droid succeeded" in out
    latency = re.search(
        r"\[  ok\] latency: pi05-droid act, median of 3: ([\d.]+) ms on one kept-alive connection, "
        r"([\d.]+) ms on new connections \(([\d.]+|inf)x\)",
        out,
    )
    assert latency is not None, out
    assert out.rstrip().endswith("verdict: ready")
    assert TEST_KEY not in out
    assert "[  ok] model: pi05-droid" in out
    stats = sim.stats()
    # the latency line times the model, not the catalogue:
    # 1 act (credit) + 1 warm-up + 3 reused on one connection + 3 on new ones, all acts
    assert stats["act_requests"] == 8
    assert stats["requests"] == 9  # and 1 catalogue request (reachability)
    assert stats["requests_per_connection"].count(4) == 1


def test_doctor_rejected_key(
    sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", "sk-wrong-key")
    assert main(["--base-url", sim.url, "doctor", "--samples", "1"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] key valid and credit: key rejected" in out
    assert "NOT ready (key valid and credit)" in out
    assert "sk-wrong-key" not in out


def test_doctor_out_of_credit(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    with GatewaySimulator(api_key=TEST_KEY, credit=0) as broke:
        assert main(["--base-url", broke.url, "doctor", "--samples", "1"]) == 1
    assert "out of credit" in capsys.readouterr().out


def test_doctor_without_key_or_gateway(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--base-url", "http://127.0.0.1:1", "doctor"]) == 1
    out = capsys.readouterr().out
    assert "[FAIL] API key: no API key: looked for" in out
    assert "[FAIL] gateway reachable" in out
    assert "[skip] latency" in out


def test_doctor_no_act_skips_the_paid_request(
    sim: GatewaySimulator, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    assert main(["--base-url", sim.url, "doctor", "--no-act", "--samples", "1"]) == 0
    assert "[skip] key valid and credit" in capsys.readouterr().out
    assert sim.stats()["act_requests"] == 0


@pytest.mark.parametrize(
    "argv", [[], ["frobnicate"], ["doctor", "--samples", "x"], ["doctor", "--samples", "0"]]
)
def test_usage_errors_exit_2(clean_env: Path, argv: list[str]) -> None:
    assert main(argv) == 2


def test_help_and_version_exit_0(clean_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert main(["--version"]) == 0
    assert main(["sim", "--help"]) == 0
    assert "--cold-start" in capsys.readouterr().out


def test_sim_command_serves_until_sigint(clean_env: Path) -> None:
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sequence_ai_core.tools.cli",
            "sim",
            "--port",
            "0",
            "--api-key",
            "k",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            url = re.search(r"(http://127\.0\.0\.1:\d+)", first)
            assert url is not None, first
            assert main(["--base-url", url.group(1), "models"]) == 0
            process.send_signal(signal.SIGINT)
            out, _ = process.communicate(timeout=20)
            assert process.returncode == 0
            assert "stopped" in out
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
