"""Fault matrix: every way the gateway or the network can fail, in the middle of ``run()``.

Each case runs a real episode against the simulator with one injected fault and checks the
same invariants (see faultkit): the right typed error or a clean completion, hold exactly
once on an early stop and never on completion, only finite right-sized actions reach
``act()``, consistent counters, the key in no log or error text, and no thread, socket or
file descriptor left behind after close(). Faults the simulator produces for real (closed
port, wrong key, credit, cold start...) are in test_faults_real.py.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from support import TEST_KEY
from support.faultkit import (
    DIM,
    HORIZON,
    LATENCY_S,
    MAX_ACTIONS,
    MODEL,
    PERSISTENT,
    Episode,
    assert_key_absent,
    assert_outcome_consistent,
    assert_safe_actions,
    harness,
    key_free_texts,
    wait_until,
)
from support.statuses import EXPECTED

from sequence_ai_core import (
    InvalidResponse,
    OutOfCredit,
    SequencesError,
    Unavailable,
)
from sequence_ai_core.limits import MAX_STEPS
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import connect
from sequence_ai_sim import CATALOGUE, Fault, GatewaySimulator

__all__ = ["harness"]  # the fixture, imported for pytest to find


@dataclass(frozen=True)
class Case:
    fault: Fault
    error: type[SequencesError] | None  # None: the episode completes
    times: int = 1
    after: int = 1  # inject after this many actions; 0: before the run starts
    warming: bool | None = None
    retried: bool = False
    status: int | None = None
    sim_options: dict[str, Any] = field(default_factory=dict)
    connect_options: dict[str, Any] = field(default_factory=dict)
    run_options: dict[str, Any] = field(default_factory=dict)


def act_body(values: list[list[float]], **chunk: Any) -> dict[str, Any]:
    """A 200 body the simulator sends raw (Fault.status(200, body=...))."""
    fields: dict[str, Any] = {
        "steps": [{"index": i, "values": row} for i, row in enumerate(values)],
        "robot": "ur5e",
        "action_space": "joint_velocity",
        "action_dim": len(values[0]) if values and values[0] else DIM,
        "control_frequency_hz": 30.0,
    }
    fields.update(chunk)
    return {"id": "act-raw", "model": CATALOGUE[MODEL].id, "action_chunk": fields}


ROWS = [[0.01 * j for j in range(DIM)] for _ in range(HORIZON)]
# The status table of docs/architecture.md §2, written once (test_client_errors): transient
# ones may be retried.
TRANSIENT_STATUS = tuple(code for code, error in EXPECTED.items() if error is Unavailable)
FATAL_STATUS = {code: error for code, error in EXPECTED.items() if error is not Unavailable}
TRANSIENT_FAULTS = {
    **{f"status-{code}": Fault.status(code) for code in TRANSIENT_STATUS},
    "reset": Fault.reset(),
    "html-502": Fault.html(502),
    "html-503": Fault.html(503),
    "older-shape-503": Fault.status(503, body={"detail": "upstream overloaded"}),
}
BODY_FAULTS = {
    "not-json": Fault.not_json(),
    "html-200": Fault.html(200),
    "text-200": Fault.status(200, body="OK"),
    "json-list-200": Fault.status(200, body=[1, 2, 3]),
    "empty-object-200": Fault.status(200, body={}),
    "empty-steps": Fault.empty_steps(),
    "ragged": Fault.ragged(),
    "nan": Fault.nan(),
    "infinity": Fault.status(200, body=act_body([*ROWS[:2], [math.inf] * DIM, *ROWS[3:]])),
    "overflow-1e999": Fault.status(200, body=b'{"action_chunk": {"steps": [[1e999]]}}'),
    "non-numeric": Fault.non_numeric(),
    "null-value": Fault.status(200, body=act_body([[None] * DIM])),  # type: ignore[list-item]
    "bool-value": Fault.status(200, body=act_body([[True] * DIM])),
    "dim-mismatch": Fault.dim_mismatch(),
    "zero-frequency": Fault.zero_frequency(),
    "negative-frequency": Fault.status(200, body=act_body(ROWS, control_frequency_hz=-30.0)),
    "zero-steps": Fault.steps(0),
    "unknown-action-space": Fault.status(200, body=act_body(ROWS, action_space="torque")),
    # A well-formed chunk that disagrees with the first chunk of the run.
    "dim-changes-mid-run": Fault.status(200, body=act_body([[0.0] * (DIM + 1)] * HORIZON)),
    "space-changes-mid-run": Fault.status(200, body=act_body(ROWS, action_space="joint_absolute")),
    **{
        f"missing-{name}": Fault.missing_field(name)
        for name in (
            "action_chunk",
            "steps",
            "action_dim",
            "control_frequency_hz",
            "action_space",
            "robot",
        )
    },
}
# Shuffle the indexes of one body so the "index" field disagrees with the position.
_shuffled = act_body(ROWS)
_shuffled["action_chunk"]["steps"][0]["index"] = 1
_shuffled["action_chunk"]["steps"][1]["index"] = 0
BODY_FAULTS["steps-out-of-order"] = Fault.status(200, body=_shuffled)
BODY_FAULTS["steps-past-the-cap"] = Fault.steps(MAX_STEPS + 1)

BENIGN_FAULTS = {
    "missing-id": Fault.missing_field("id"),
    "missing-perf": Fault.missing_field("perf"),
    "missing-covers_seconds": Fault.missing_field("covers_seconds"),
    "chunk-at-the-steps-cap": Fault.steps(MAX_STEPS),
    "chunk-of-one-step": Fault.steps(1),
    "slow-body": Fault.slow_body(0.3),
}


def cases() -> Iterator[Any]:
    for code, error in FATAL_STATUS.items():
        yield pytest.param(Case(Fault.status(code), error, status=code), id=f"{code}-mid-run")
    for code in (401, 402, 403, 422, 500):
        case = Case(Fault.status(code), FATAL_STATUS[code], after=0, status=code)
        yield pytest.param(case, id=f"{code}-before-first-action")
    older_402 = Fault.status(402, body={"detail": "budget gone", "code": "budget_exhausted"})
    yield pytest.param(Case(older_402, OutOfCredit, status=402), id="402-budget-exhausted")
    for name, fault in TRANSIENT_FAULTS.items():
        # 0.4 s of plan per chunk: the retry must fit in what is left to play even when a
        # loaded machine delays it (0.1 s chunks did not, one run in a few under load)
        roomy = {"options": {"action_horizon": 4 * HORIZON}, "max_actions": 12 * HORIZON}
        once = Case(fault, None, retried=True, run_options=roomy)
        yield pytest.param(once, id=f"{name}-once-mid-run-retried")
        lasting = Case(fault, Unavailable, times=PERSISTENT, warming=False)
        yield pytest.param(lasting, id=f"{name}-persistent-mid-run")
    for code in TRANSIENT_STATUS:
        before = Case(Fault.status(code), Unavailable, after=0, warming=False, status=code)
        yield pytest.param(before, id=f"{code}-before-first-action")
    yield from timeout_cases()
    yield from warming_cases()
    for name, fault in BODY_FAULTS.items():
        yield pytest.param(Case(fault, InvalidResponse), id=f"{name}-mid-run")
    for name in ("not-json", "nan", "empty-steps", "dim-mismatch"):
        case = Case(BODY_FAULTS[name], InvalidResponse, after=0)
        yield pytest.param(case, id=f"{name}-before-first-action")
    for name, fault in BENIGN_FAULTS.items():
        yield pytest.param(Case(fault, None), id=f"{name}-completes")
    yield pytest.param(
        Case(Fault.steps(1), None, times=PERSISTENT), id="one-step-chunks-persistent-completes"
    )


def timeout_cases() -> Iterator[Any]:
    short = {"timeout_s": 0.1}
    yield pytest.param(
        Case(Fault.timeout(0.4), Unavailable, after=0, warming=False, connect_options=short),
        id="read-timeout-before-first-action",
    )
    yield pytest.param(
        Case(Fault.timeout(0.4), Unavailable, times=PERSISTENT, connect_options=short),
        id="read-timeout-persistent-mid-run",
    )
    yield pytest.param(
        Case(Fault.slow_body(3.0), Unavailable, times=PERSISTENT, connect_options=short),
        id="slow-body-past-read-timeout-mid-run",
    )
    retry_later = Fault.status(429, headers={"Retry-After": "30"})
    yield pytest.param(
        Case(retry_later, Unavailable, warming=False, status=429),
        id="429-retry-after-beyond-plan-mid-run",
    )


def warming_cases() -> Iterator[Any]:
    startup = {"startup_timeout_s": 5.0}
    yield pytest.param(
        Case(Fault.warming(0.05), None, times=2, after=0, retried=True, run_options=startup),
        id="503-warming-before-first-action-waited",
    )
    older = Fault.status(503, body={"detail": {"status": "warming_up", "retry_after_s": 0.05}})
    yield pytest.param(
        Case(older, None, times=2, after=0, retried=True, run_options=startup),
        id="503-warming-older-shape-waited",
    )
    yield pytest.param(
        Case(Fault.warming(0.05), Unavailable, after=0, warming=True, status=503),
        id="503-warming-before-first-action-no-startup-timeout",
    )
    yield pytest.param(
        Case(
            Fault.warming(118.0),
            Unavailable,
            times=PERSISTENT,
            after=0,
            warming=True,
            run_options={"startup_timeout_s": 0.2},
        ),
        id="503-warming-outlasts-startup-timeout",
    )
    yield pytest.param(
        Case(Fault.warming(0.05), Unavailable, warming=True, status=503, run_options=startup),
        id="503-warming-after-first-action",
    )


def check_error(outcome: RunOutcome, case: Case) -> None:
    error = outcome.error
    assert type(error) is case.error, repr(error)
    assert isinstance(error, SequencesError)
    if case.status is not None:
        assert error.status == case.status
        assert error.request_id is not None and re.fullmatch(r"r-[0-9a-f]{8}", error.request_id)
    if case.warming is not None:
        assert isinstance(error, Unavailable) and error.warming == case.warming
    if case.fault.kind == "status" and case.fault.headers.get("Retry-After") == "30":
        assert isinstance(error, Unavailable) and error.retry_after_s == 30.0


@pytest.mark.timing
@pytest.mark.parametrize("case", list(cases()))
def test_fault_mid_run(case: Case, harness: dict[str, Any]) -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=LATENCY_S, **case.sim_options) as sim:
        episode = Episode(sim, case.fault, case.times, case.after)
        policy = connect(MODEL, api_key=TEST_KEY, base_url=sim.url, **case.connect_options)
        with policy:
            outcome = episode.run(policy, **case.run_options)
            assert not [t for t in threading.enumerate() if t.name.startswith("sequence-ai")]
        assert_safe_actions(episode.actions)
        assert_outcome_consistent(
            outcome, episode, case.run_options.get("max_actions", MAX_ACTIONS)
        )
        assert_key_absent(key_free_texts(outcome))
        if case.error is None:
            assert outcome.reason == "completed", outcome.summary()
            assert outcome.retries >= (1 if case.retried else 0)
        else:
            check_error(outcome, case)
            if case.after:
                assert len(episode.actions) >= case.after  # the fault came mid-run
        # a refill still in flight when the run ended was aborted, maybe before it arrived
        assert 0 <= policy.requests_sent - sim.stats()["requests"] <= 3
        assert outcome.requests >= sim.stats()["act_requests"]
        assert wait_until(lambda: sim.stats()["open_connections"] == 0), sim.stats()


def test_fault_case_count() -> None:
    """docs/safety.md quotes this number; keep it honest."""
    assert len(list(cases())) == 85
    json.dumps([p.id for p in cases()])  # ids are plain strings


@pytest.mark.timing
@pytest.mark.parametrize(
    ("fault", "sim_options", "busy"),
    [
        (Fault.busy("gpu_busy"), {}, 1),
        (Fault.busy("queue_timeout"), {}, 1),
        (Fault.busy("draining"), {}, 0),  # a worker going away, not a queue
        (Fault.status(503), {}, 0),  # no reason: a transient failure, not load
        (Fault.busy("gpu_busy"), {"error_shape": "older"}, 0),  # the older shape has none
    ],
    ids=["gpu_busy", "queue_timeout", "draining", "no-reason", "older-shape"],
)
def test_a_busy_reason_in_a_503_is_seen_by_the_load_backoff(
    fault: Fault, sim_options: dict[str, Any], busy: int, harness: dict[str, Any]
) -> None:
    """A 503 whose newer-shape body says ``details: {"reason": "gpu_busy"}`` is the gateway
    saying it is saturated: the run retries it and its load backoff counts a busy answer.
    The reason used to be dropped, so no 503 ever counted."""
    roomy = {"options": {"action_horizon": 4 * HORIZON}, "max_actions": 12 * HORIZON}
    with GatewaySimulator(api_key=TEST_KEY, latency_s=LATENCY_S, **sim_options) as sim:
        episode = Episode(sim, fault, times=1, inject_after=1)
        with connect(MODEL, api_key=TEST_KEY, base_url=sim.url) as policy:
            outcome = episode.run(policy, **roomy)
        assert sim.stats()["status_counts"].get("503") == 1, sim.stats()
    assert outcome.reason == "completed", outcome.summary()
    assert outcome.retries >= 1
    assert outcome.busy_answers == busy
