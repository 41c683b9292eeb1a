"""TLS with a throwaway self-signed certificate, and the simulator as a command."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support import TEST_KEY
from support.gateway_requests import act_request, start_sim_cli

from sequence_ai_sim import GatewaySimulator
from sequence_ai_sim.certificates import self_signed_cert
from sequence_ai_sim.cli import add_arguments

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(cert, key) PEM paths for CN=localhost with a 127.0.0.1 SAN, made with openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    return self_signed_cert(tmp_path_factory.mktemp("tls"), common_name="localhost")


def test_tls_serves_https_and_keeps_alive(certificate: tuple[str, str]) -> None:
    cert, key = certificate
    with GatewaySimulator(api_key=TEST_KEY, tls_cert=cert, tls_key=key) as server:
        assert server.url.startswith("https://127.0.0.1:")
        headers = {"Authorization": f"Bearer {TEST_KEY}"}
        trust = ssl.create_default_context(cafile=cert)
        with httpx.Client(base_url=server.url, verify=trust, headers=headers) as http:
            statuses = [http.post("/v1/act", json=act_request()).status_code for _ in range(3)]
        with pytest.raises(httpx.ConnectError):  # not trusted by default
            httpx.get(f"{server.url}/v1/models")
        stats = server.stats()
    assert statuses == [200, 200, 200]
    assert stats["requests_per_connection"][0] == 3


def test_tls_needs_cert_and_key_together(certificate: tuple[str, str]) -> None:
    with pytest.raises(ValueError):
        GatewaySimulator(tls_cert=certificate[0])


def test_cli_serves_until_sigterm() -> None:
    process = start_sim_cli("--latency", "0.01", env={"SEQUENCES_SIM_API_KEY": TEST_KEY})
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("gateway simulator on http://127.0.0.1:")
        url = banner.split()[3]
        listed = [process.stdout.readline() for _ in range(9)]
        assert listed[:3] == [
            "point a client at it, in another shell:\n",
            f"  export SEQUENCES_BASE_URL={url}\n",
            '  export SEQUENCES_API_KEY="$SEQUENCES_SIM_API_KEY"\n',
        ]
        assert any(line.split()[:1] == ["pi05-droid"] for line in listed)
        assert listed[-1] == "stop with Ctrl-C (or SIGTERM)\n"
        headers = {"Authorization": f"Bearer {TEST_KEY}"}
        act = httpx.post(f"{url}/v1/act", json=act_request(), headers=headers, timeout=10.0)
        assert act.status_code == 200
        stats = httpx.get(f"{url}/sim/stats", timeout=10.0).json()
        assert stats["act_requests"] == 1
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20.0)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert "stopped" in out
    assert TEST_KEY not in out + err + banner


def test_cli_sigint_is_a_clean_exit_too() -> None:
    process = start_sim_cli("--api-key", TEST_KEY)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("gateway simulator on")
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=20.0)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0


def test_cli_refuses_to_run_without_a_key() -> None:
    env = {key: value for key, value in os.environ.items() if key != "SEQUENCES_SIM_API_KEY"}
    result = subprocess.run(
        [sys.executable, "-m", "sequence_ai_sim", "--port", "0"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    assert "--api-key" in result.stderr


@pytest.mark.parametrize("shape", ["both", "newer", "older"])
def test_cli_answers_a_cold_worker_in_the_error_shape_asked_for(shape: str) -> None:
    """0.1.0 reads only the older warming object: ``sequence-ai sim --cold-start`` sends it
    by default (beside the newer fields), and each shape alone when asked."""
    extra = () if shape == "both" else ("--error-shape", shape)
    process = start_sim_cli("--api-key", TEST_KEY, "--cold-start", "60", "--latency", "0", *extra)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("gateway simulator on http://127.0.0.1:"), banner
        assert ("error bodies only" in banner) == (shape != "both")
        assert (f"{shape} error bodies" in banner) == (shape != "both")
        url = banner.split()[3]
        headers = {"Authorization": f"Bearer {TEST_KEY}"}
        act = httpx.post(f"{url}/v1/act", json=act_request(), headers=headers, timeout=10.0)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=20.0)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert act.status_code == 503 and 0 < int(act.headers["Retry-After"]) <= 60
    body = act.json()
    if shape == "older":
        assert set(body) == {"detail"}
    else:
        assert body["code"] == "warming" and body["retryable"] is True
        assert 0 < body["retry_after_s"] <= 60 and body["request_id"]
    if shape == "newer":
        assert isinstance(body["detail"], str) and "warming up" in body["detail"]
    else:
        detail = body["detail"]
        assert detail["status"] == "warming_up" and 0 < detail["retry_after_s"] <= 60
        assert detail["warming_job_id"] and "warming up" in detail["message"]


def test_cli_arguments_match_the_documented_command() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        shlex.split(
            "--host 127.0.0.1 --port 8765 --api-key KEY --latency 0.79 --jitter 0.3 "
            "--cold-start 5 --connect-delay 0.1 --workers 2 --seed 3 "
            "--tls-cert c.pem --tls-key k.pem"
        )
    )
    assert (args.host, args.port, args.api_key) == ("127.0.0.1", 8765, "KEY")
    assert (args.latency, args.jitter, args.cold_start, args.connect_delay) == (0.79, 0.3, 5, 0.1)
    assert (args.workers, args.seed, args.tls_cert, args.tls_key) == (2, 3, "c.pem", "k.pem")
