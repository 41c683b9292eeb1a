"""Every injected fault is observable on the wire, and only for the next `times` act requests."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
from support import TEST_KEY
from support.gateway_requests import act_request, client

from sequence_ai_sim import Fault, GatewaySimulator


def post(sim: GatewaySimulator, http: httpx.Client, **options: Any) -> httpx.Response:
    return http.post("/v1/act", json=act_request(**options), headers={"X-Seq-Request-Id": "r-42"})


def chunk_of(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(response.content)  # Python's parser accepts NaN
    chunk: dict[str, Any] = body["action_chunk"]
    return chunk


def test_status_fault_uses_newer_shape_and_applies_times(sim: GatewaySimulator) -> None:
    sim.inject(Fault.status(502), times=2)
    with client(sim) as http:
        statuses = [post(sim, http).status_code for _ in range(3)]
        assert sim.stats()["faults_pending"] == 0
    assert statuses == [502, 502, 200]


def test_status_fault_body_and_headers(sim: GatewaySimulator) -> None:
    older = {"detail": {"status": "warming_up", "retry_after_s": 118, "message": "cold"}}
    sim.inject(Fault.status(503, body=older, headers={"Retry-After": "118"}))
    sim.inject(Fault.status(429))
    sim.inject(Fault.status(500, body="plain text failure"))
    with client(sim) as http:
        warming, busy, plain = (post(sim, http) for _ in range(3))
    assert (warming.status_code, warming.json()) == (503, older)
    assert warming.headers["Retry-After"] == "118"
    assert busy.json() == {
        "detail": "injected fault",
        "code": "busy",
        "retryable": True,
        "request_id": "r-42",
    }
    assert busy.headers["X-Seq-Request-Id"] == "r-42"
    assert (plain.status_code, plain.text) == (500, "plain text failure")


def test_status_fault_answers_before_auth() -> None:
    with GatewaySimulator(api_key=TEST_KEY) as server:
        server.inject(Fault.status(504))
        assert httpx.post(f"{server.url}/v1/act", json=act_request()).status_code == 504


def test_reset_drops_the_connection_mid_response(sim: GatewaySimulator) -> None:
    sim.inject(Fault.reset())
    with client(sim) as http:
        with pytest.raises(httpx.TransportError):
            post(sim, http)
        assert post(sim, http).status_code == 200  # a new connection works
    assert sim.stats()["connections"] == 2


def test_slow_body_spreads_the_answer(sim: GatewaySimulator) -> None:
    sim.inject(Fault.slow_body(0.4))
    with client(sim) as http, http.stream("POST", "/v1/act", json=act_request()) as response:
        pieces = [piece for piece in response.iter_raw() if piece]
    assert response.status_code == 200
    assert len(pieces) > 1
    assert len(json.loads(b"".join(pieces))["action_chunk"]["steps"]) == 15


def test_slow_body_trips_a_client_read_timeout(sim: GatewaySimulator) -> None:
    sim.inject(Fault.slow_body(3.0))
    with client(sim) as http, pytest.raises(httpx.ReadTimeout):
        http.post("/v1/act", json=act_request(), timeout=httpx.Timeout(10.0, read=0.05))


def test_timeout_fault_delays_the_answer(sim: GatewaySimulator) -> None:
    sim.inject(Fault.timeout(2.0))
    with client(sim) as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/v1/act", json=act_request(), timeout=httpx.Timeout(10.0, read=0.1))
        assert post(sim, http).status_code == 200


def test_not_json_and_html(sim: GatewaySimulator) -> None:
    sim.inject(Fault.not_json())
    sim.inject(Fault.html(502))
    with client(sim) as http:
        garbage, page = post(sim, http), post(sim, http)
    assert garbage.status_code == 200
    assert garbage.headers["Content-Type"] == "application/json"
    with pytest.raises(ValueError):
        garbage.json()
    assert page.status_code == 502
    assert page.headers["Content-Type"].startswith("text/html")
    assert "<html>" in page.text


def test_nan_ragged_non_numeric(sim: GatewaySimulator) -> None:
    for fault in (Fault.nan(), Fault.ragged(), Fault.non_numeric()):
        sim.inject(fault)
    with client(sim) as http:
        nan, ragged, text = (chunk_of(post(sim, http)) for _ in range(3))
    assert any(math.isnan(v) for step in nan["steps"] for v in step["values"])
    assert sorted({len(step["values"]) for step in ragged["steps"]}) == [7, 8]
    assert any(isinstance(v, str) for step in text["steps"] for v in step["values"])


def test_shape_faults(sim: GatewaySimulator) -> None:
    for fault in (Fault.empty_steps(), Fault.dim_mismatch(), Fault.zero_frequency()):
        sim.inject(fault)
    sim.inject(Fault.steps(3))
    with client(sim) as http:
        empty, wide, zero, three = (chunk_of(post(sim, http)) for _ in range(4))
    assert empty["steps"] == []
    assert wide["action_dim"] == 8
    assert {len(step["values"]) for step in wide["steps"]} == {9}
    assert zero["control_frequency_hz"] == 0
    assert len(three["steps"]) == 3
    assert three["covers_seconds"] == pytest.approx(0.2)


@pytest.mark.parametrize("name", ["action_chunk", "perf", "action_dim", "steps"])
def test_missing_field(sim: GatewaySimulator, name: str) -> None:
    sim.inject(Fault.missing_field(name))
    with client(sim) as http:
        body = post(sim, http).json()
    assert name not in body and name not in body.get("action_chunk", {})


def test_body_faults_leave_errors_alone() -> None:
    with GatewaySimulator(api_key=TEST_KEY) as server:
        server.inject(Fault.nan())
        response = httpx.post(f"{server.url}/v1/act", json=act_request())
    assert response.status_code == 401
    assert server.stats()["faults_pending"] == 0


def test_faults_hit_only_act_requests(sim: GatewaySimulator) -> None:
    sim.inject(Fault.status(500))
    with client(sim) as http:
        assert http.get("/v1/models").status_code == 200
        assert post(sim, http).status_code == 500
    assert sim.stats()["faults_pending"] == 0


def test_warming_fault_looks_like_a_cold_worker(sim: GatewaySimulator) -> None:
    sim.inject(Fault.warming(118.0))
    with client(sim) as http:
        response = post(sim, http)
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "118"
    body = response.json()
    assert (body["code"], body["retryable"], body["retry_after_s"]) == ("warming", True, 118.0)
    assert body["request_id"] == "r-42"
