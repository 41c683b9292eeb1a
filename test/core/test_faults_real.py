"""Faults the simulator produces for real rather than by injection: a closed port, a gateway
that goes away mid-run, a wrong key, credit running out, an unknown model, an oversized
body, a request the gateway refuses, a cold worker. Same invariants as test_faults.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import TEST_KEY
from support.faultkit import (
    HORIZON,
    LATENCY_S,
    MAX_ACTIONS,
    MODEL,
    Episode,
    assert_key_absent,
    assert_outcome_consistent,
    assert_safe_actions,
    free_port,
    harness,
    key_free_texts,
    wait_until,
)

from sequence_ai_core import SequencesError, Unavailable
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import connect
from sequence_ai_sim import GatewaySimulator

__all__ = ["harness"]  # the fixture, imported for pytest to find


def run_against(sim: GatewaySimulator, episode: Episode, **kwargs: Any) -> RunOutcome:
    with connect(MODEL, api_key=kwargs.pop("api_key", TEST_KEY), base_url=sim.url) as policy:
        outcome = episode.run(policy, **kwargs)
    assert wait_until(lambda: sim.stats()["open_connections"] == 0), sim.stats()
    assert_safe_actions(episode.actions)
    assert_outcome_consistent(outcome, episode, MAX_ACTIONS)
    assert_key_absent(key_free_texts(outcome))
    return outcome


def test_connection_refused_before_first_action(harness: dict[str, Any]) -> None:
    episode = Episode()
    with connect(MODEL, api_key=TEST_KEY, base_url=f"http://127.0.0.1:{free_port()}") as policy:
        outcome = episode.run(policy)
    assert outcome.reason == "raised:Unavailable"
    assert isinstance(outcome.error, Unavailable) and not outcome.error.warming
    assert (outcome.actions, episode.holds, outcome.requests) == (0, 1, 1)


# A second 3-step chunk must be in hand when the simulator stops: under the side-by-side
# suites' load it can still be in flight at the third action, and then nothing is left to
# retry within, so the simulator stops at the first action from the third on after it
# answered twice.
@pytest.mark.timing
def test_simulator_stops_mid_run(harness: dict[str, Any]) -> None:
    sim = GatewaySimulator(api_key=TEST_KEY, latency_s=LATENCY_S).start()

    def stop_with_a_chunk_in_hand(actions: int) -> None:
        stats = sim.stats()  # every request but the acts is a catalogue lookup, answered 200
        lookups = stats["requests"] - stats["act_requests"]
        if actions >= 3 and stats["status_counts"].get("200", 0) - lookups >= 2:
            sim.stop()

    try:
        episode = Episode(on_action=stop_with_a_chunk_in_hand)
        outcome = run_against(sim, episode)
    finally:
        sim.stop()
    assert outcome.reason == "raised:Unavailable"
    assert len(episode.actions) >= 3
    assert outcome.retries >= 1  # refused reconnects were retried while the plan lasted


def test_wrong_key_is_auth_error(harness: dict[str, Any]) -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=LATENCY_S) as sim:
        episode = Episode()
        outcome = run_against(sim, episode, api_key="sk-wrong-key-0000")
    assert outcome.reason == "raised:AuthError"
    assert (outcome.actions, episode.holds) == (0, 1)
    assert isinstance(outcome.error, SequencesError) and outcome.error.status == 401


def test_credit_runs_out_mid_run(harness: dict[str, Any]) -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=LATENCY_S, credit=1) as sim:
        episode = Episode()
        outcome = run_against(sim, episode)
    assert outcome.reason == "raised:OutOfCredit"
    assert 1 <= outcome.actions <= HORIZON and episode.holds == 1


def test_unknown_model_is_invalid_request(harness: dict[str, Any]) -> None:
    with (
        GatewaySimulator(api_key=TEST_KEY) as sim,
        connect("no-such-model", api_key=TEST_KEY, base_url=sim.url) as policy,
    ):
        episode = Episode()
        outcome = episode.run(policy)
    assert outcome.reason == "raised:InvalidRequest"
    assert isinstance(outcome.error, SequencesError) and outcome.error.status == 404
    assert episode.holds == 1 and not episode.actions


def test_body_too_large_is_invalid_request(harness: dict[str, Any]) -> None:
    with GatewaySimulator(api_key=TEST_KEY, max_body_bytes=64) as sim:
        episode = Episode()
        outcome = run_against(sim, episode)
    assert outcome.reason == "raised:InvalidRequest"
    assert isinstance(outcome.error, SequencesError) and outcome.error.status == 413


def test_option_refused_by_gateway_is_invalid_request(harness: dict[str, Any]) -> None:
    """Options pass through to the gateway unchecked; the simulator refuses a non-integer
    seed with 422."""
    with GatewaySimulator(api_key=TEST_KEY) as sim:
        episode = Episode()
        outcome = run_against(sim, episode, options={"seed": "forty-two"})
    assert outcome.reason == "raised:InvalidRequest"
    assert isinstance(outcome.error, SequencesError) and outcome.error.status == 422
    assert episode.holds == 1 and not episode.actions


def test_cold_start_waited_before_first_action(harness: dict[str, Any]) -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=LATENCY_S, cold_start_s=0.3) as sim:
        episode = Episode()
        outcome = run_against(sim, episode, startup_timeout_s=10.0)
        warmed = sim.stats()["status_counts"].get("503", 0)
    assert outcome.reason == "completed"
    assert warmed >= 1 and outcome.retries == warmed


def test_cold_start_without_startup_timeout_stops(harness: dict[str, Any]) -> None:
    with GatewaySimulator(api_key=TEST_KEY, cold_start_s=30.0) as sim:
        episode = Episode()
        outcome = run_against(sim, episode)
    error = outcome.error
    assert isinstance(error, Unavailable) and error.warming
    assert error.retry_after_s is not None and 0 < error.retry_after_s <= 30.0
    assert episode.holds == 1 and not episode.actions
