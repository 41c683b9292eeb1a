"""What a first run prints when something goes wrong: why it stopped, where a key was looked
for, what to do about a cold model, and each error once."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import TEST_KEY

import sequence_ai_core as sai
from sequence_ai_sim import Fault, GatewaySimulator, SimulatedArm


def quick_run(
    url: str, *, api_key: str | None = TEST_KEY, max_actions: int = 5, **options: float
) -> sai.RunOutcome:
    arm = SimulatedArm("pi05-droid")
    holds: list[int] = []
    with sai.connect("pi05-droid", api_key=api_key, base_url=url) as policy:
        outcome = policy.run(
            arm.observe,
            arm.act,
            max_actions=max_actions,
            validate=lambda action: True,
            hold=lambda: holds.append(1),
            **options,
        )
    assert holds == ([] if outcome.reason == "completed" else [1])
    return outcome


def test_a_stopped_run_says_why_on_the_line_users_print(sim: GatewaySimulator) -> None:
    sim.inject(Fault.status(402, body={"detail": "credit exhausted; top up at the console"}))
    outcome = quick_run(sim.url)
    text = repr(outcome)
    assert text.startswith("RunOutcome(0 actions over 0 chunks in ")
    assert "raised:OutOfCredit: credit exhausted; top up at the console" in text
    assert "status=402" in text
    assert outcome.summary().splitlines()[0] == text  # said once, not again below


def test_the_key_is_redacted_from_the_reason(sim: GatewaySimulator) -> None:
    sim.inject(Fault.status(401, body={"detail": f"key {TEST_KEY} is not valid"}))
    outcome = quick_run(sim.url)
    assert "raised:AuthError: key *** is not valid" in repr(outcome)
    assert TEST_KEY not in repr(outcome) + outcome.summary()


def test_no_key_stops_before_sending_and_says_where_it_looked(
    sim: GatewaySimulator, clean_env: Path
) -> None:
    outcome = quick_run(sim.url, api_key=None)
    assert outcome.reason == "raised:AuthError"
    assert "$SEQUENCES_API_KEY" in repr(outcome)
    assert str(clean_env / "sequence-ai" / "credentials") in repr(outcome)
    assert sim.stats()["act_requests"] == 0
    assert "no chunk played" in outcome.summary() and "None" not in outcome.summary()


def test_summary_gives_the_seam_its_unit(sim: GatewaySimulator) -> None:
    outcome = quick_run(sim.url, max_actions=40)
    assert outcome.chunks >= 2, outcome
    assert f"max seam jump {outcome.max_seam_jump:.4f} rad/s (joint_velocity)" in outcome.summary()


def test_a_cold_model_says_how_to_wait_for_it(clean_env: Path) -> None:
    with GatewaySimulator(api_key=TEST_KEY, cold_start_s=100.0) as cold:
        outcome = quick_run(cold.url)
    assert outcome.reason == "raised:Unavailable"
    assert "warming up" in repr(outcome)
    assert "pass startup_timeout_s=125 to run() to wait for a cold worker" in repr(outcome)
    assert isinstance(outcome.error, sai.Unavailable) and outcome.error.warming


def test_waiting_for_a_cold_model_logs_progress(
    clean_env: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sequence_ai_core")
    with GatewaySimulator(api_key=TEST_KEY, cold_start_s=1.5, latency_s=0.02) as cold:
        outcome = quick_run(cold.url, startup_timeout_s=30.0)
    assert outcome.reason == "completed", outcome
    waits = [r.getMessage() for r in caplog.records if "warming up; retrying" in r.getMessage()]
    assert waits, caplog.text
    assert "of startup_timeout_s=30 left" in waits[0]


def test_giving_up_on_a_cold_model_says_how_long_it_waited(clean_env: Path) -> None:
    with GatewaySimulator(api_key=TEST_KEY, cold_start_s=100.0) as cold:
        outcome = quick_run(cold.url, startup_timeout_s=0.5)
    assert "still warming after startup_timeout_s=0.5" in repr(outcome)


def test_an_unreachable_gateway_is_reported_once(tmp_path: Path) -> None:
    """No logging configured, as in a first script: the library prints nothing itself, so the
    outcome the script prints is the only report of the failure."""
    script = textwrap.dedent(
        """
        import sequence_ai_core as sai
        from sequence_ai_sim import SimulatedArm
        arm = SimulatedArm("pi05-droid")
        with sai.connect("pi05-droid", api_key="k", base_url="http://127.0.0.1:1") as policy:
            print(policy.run(arm.observe, arm.act, max_actions=3, validate=lambda a: True))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "raised:Unavailable: gateway unreachable" in result.stdout
    assert result.stderr == ""
