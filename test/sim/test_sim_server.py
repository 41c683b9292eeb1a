"""The simulated gateway over real HTTP on loopback: §3 bodies, checks, counting, lifecycle."""

from __future__ import annotations

import base64
import logging
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from support import TEST_KEY
from support.gateway_requests import PI05, act_request, client

from sequence_ai_core.types import MODEL_PREFIX
from sequence_ai_sim import GatewaySimulator


def test_act_answers_the_documented_body(sim: GatewaySimulator) -> None:
    with client(sim) as http:
        response = http.post("/v1/act", json=act_request(), headers={"X-Seq-Request-Id": "r-0a1b"})
    assert response.status_code == 200
    assert response.headers["X-Seq-Request-Id"] == "r-0a1b"
    body = response.json()
    assert set(body) == {"id", "model", "action_chunk", "perf", "usage", "warnings"}
    assert body["model"] == PI05
    chunk = body["action_chunk"]
    assert chunk["robot"] == "droid_franka"
    assert chunk["action_space"] == "joint_velocity"
    assert (chunk["action_dim"], chunk["control_frequency_hz"]) == (8, 15.0)
    assert chunk["covers_seconds"] == pytest.approx(1.0)
    assert [step["index"] for step in chunk["steps"]] == list(range(15))
    assert all(len(step["values"]) == 8 for step in chunk["steps"])
    assert body["perf"]["inference_ms"] >= 0 and body["perf"]["ttfa_ms"] >= 0
    assert body["warnings"] == []


def test_keep_alive_requests_share_one_connection(sim: GatewaySimulator) -> None:
    with client(sim) as http:
        for _ in range(5):
            assert http.post("/v1/act", json=act_request()).status_code == 200
        assert http.get("/v1/models").status_code == 200
    with client(sim) as other:
        assert other.post("/v1/act", json=act_request()).status_code == 200
    stats = sim.stats()
    assert stats["connections"] == 2
    assert stats["requests_per_connection"] == [6, 1]
    assert (stats["requests"], stats["act_requests"]) == (7, 6)
    assert [entry["connection"] for entry in sim.received] == [0, 0, 0, 0, 0, 1]


def test_stats_endpoint_serves_stats(sim: GatewaySimulator) -> None:
    with client(sim) as http:
        http.post("/v1/act", json=act_request())
        stats = http.get("/sim/stats").json()
    assert stats["act_requests"] == 1
    assert stats["requests"] == 2
    assert stats["status_counts"] == {"200": 1}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-key"}])
def test_missing_or_wrong_key_is_401(sim: GatewaySimulator, headers: dict[str, str]) -> None:
    response = httpx.post(f"{sim.url}/v1/act", json=act_request(), headers=headers)
    assert response.status_code == 401
    assert response.json()["code"] == "unauthenticated"
    assert response.json()["retryable"] is False
    assert sim.received == ()


def test_no_key_configured_means_no_auth() -> None:
    with GatewaySimulator(api_key=None) as server:
        assert httpx.post(f"{server.url}/v1/act", json=act_request()).status_code == 200


def test_credit_runs_out_with_402() -> None:
    with GatewaySimulator(api_key=TEST_KEY, credit=2) as server, client(server) as http:
        statuses = [http.post("/v1/act", json=act_request()).status_code for _ in range(4)]
        last = http.post("/v1/act", json=act_request()).json()
    assert statuses == [200, 200, 402, 402]
    assert last["code"] == "insufficient_credit"
    assert server.stats()["credit_remaining"] == 0


def test_oversized_body_is_413_and_connection_stays_usable() -> None:
    with GatewaySimulator(api_key=TEST_KEY, max_body_bytes=2000) as server, client(server) as http:
        response = http.post("/v1/act", json=act_request(padding="x" * 5000))
        assert response.status_code == 413
        assert response.json()["code"] == "payload_too_large"
        small = act_request()
        small["observation"]["images"] = []
        assert http.post("/v1/act", json=small).status_code == 200
        assert server.stats()["connections"] == 1


def test_unknown_model_is_404_and_short_id_gets_a_hint(sim: GatewaySimulator) -> None:
    with client(sim) as http:
        unknown = http.post("/v1/act", json=act_request(MODEL_PREFIX + "no-such-model"))
        short = http.post("/v1/act", json=act_request("pi05-droid"))
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "model_not_found"
    assert short.status_code == 404
    assert PI05 in short.json()["hint"]


def _break(request: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set (or delete, when value is ...) the field at a dotted path."""
    keys = path.split(".")
    target: Any = request
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if value is ...:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return request


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("observation.proprioception.joint_positions", ...),
        ("observation.proprioception.joint_positions", [0.1, "a"]),
        ("observation.proprioception.joint_positions", [True, 0.2]),
        ("observation.proprioception.joint_positions", "0.1"),
        ("observation.proprioception", [0.1]),
        ("observation.proprioception.gripper", "open"),
        ("observation.proprioception.end_effector_pose", [0.0] * 6),
        ("observation.images", {"view": "x"}),
        ("observation.images.0.view", ...),
        ("observation.images.0.data", ...),
        ("observation.images.0.data", "not base64 !!"),
        ("observation.images.0.data", base64.b64encode(b"raw pixels").decode()),
        ("observation.images.0.data", "https://example.com/cam.jpg"),
        ("observation.images.0.timestamp_ms", "yesterday"),
        ("observation.instruction", 3),
        ("observation", "picture"),
        ("action_horizon", 0),
        ("action_horizon", 2.5),
        ("action_horizon", "15"),
        ("seed", "seven"),
    ],
)
def test_malformed_request_is_422(sim: GatewaySimulator, path: str, value: Any) -> None:
    with client(sim) as http:
        response = http.post("/v1/act", json=_break(act_request(), path, value))
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"


def test_non_json_body_is_400(sim: GatewaySimulator) -> None:
    with client(sim) as http:
        response = http.post("/v1/act", content=b"{nope", headers={"X-Seq-Request-Id": "r-1"})
    assert response.status_code == 400
    assert response.json()["request_id"] == "r-1"


def test_cold_start_answers_503_warming_then_serves() -> None:
    with GatewaySimulator(api_key=TEST_KEY, cold_start_s=0.6) as server, client(server) as http:
        first = http.post("/v1/act", json=act_request(), headers={"X-Seq-Request-Id": "r-9"})
        body = first.json()
        assert first.status_code == 503
        assert body["code"] == "warming" and body["retryable"] is True
        assert 0 < body["retry_after_s"] <= 0.6
        assert body["request_id"] == "r-9"
        assert first.headers["Retry-After"] == "1"
        deadline = time.monotonic() + 10.0
        status = 503
        while status == 503 and time.monotonic() < deadline:
            time.sleep(0.1)
            status = http.post("/v1/act", json=act_request()).status_code
        assert status == 200


def test_options_are_honoured_and_recorded(sim: GatewaySimulator) -> None:
    with client(sim) as http:
        short = http.post("/v1/act", json=act_request(action_horizon=4, seed=7, style="calm"))
    steps = short.json()["action_chunk"]["steps"]
    assert len(steps) == 4
    assert short.json()["action_chunk"]["covers_seconds"] == pytest.approx(4 / 15, abs=0.001)
    assert sim.received[0]["options"] == {"action_horizon": 4, "seed": 7, "style": "calm"}
    assert sim.received[0]["status"] == 200


def test_seed_fixes_the_noise() -> None:
    with GatewaySimulator(api_key=TEST_KEY, action_noise=0.05) as server, client(server) as http:
        chunks = [
            http.post("/v1/act", json=act_request(seed=seed)).json()["action_chunk"]["steps"]
            for seed in (1, 1, 2)
        ]
    assert chunks[0] == chunks[1]
    assert chunks[0] != chunks[2]


def test_worker_pool_queues_beyond_its_slots() -> None:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.2, workers=1) as server:
        results: list[int] = []

        def call() -> None:
            with client(server) as http:
                results.append(http.post("/v1/act", json=act_request()).status_code)

        threads = [threading.Thread(target=call) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20.0)
        stats = server.stats()
    assert results == [200, 200, 200]
    assert stats["max_in_flight"] == 1
    assert stats["max_queued"] >= 1
    assert stats["connections"] == 3


def test_api_key_is_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with GatewaySimulator(api_key=TEST_KEY) as server, client(server) as http:
        http.post("/v1/act", json=act_request())
        httpx.post(f"{server.url}/v1/act", json=act_request(), headers={"Authorization": "x"})
    assert "sim" in caplog.text  # the request lines were logged...
    assert TEST_KEY not in caplog.text  # ...but never the key
    assert TEST_KEY not in repr(server)


def test_stop_closes_connections_and_joins_threads() -> None:
    before = set(threading.enumerate())
    server = GatewaySimulator(api_key=TEST_KEY, latency_s=0.01).start()
    http = client(server)
    assert http.post("/v1/act", json=act_request()).status_code == 200
    assert server.stats()["open_connections"] == 1
    port = int(server.url.rsplit(":", 1)[1])
    server.stop()
    server.stop()  # idempotent
    assert set(threading.enumerate()) <= before
    assert server.stats()["open_connections"] == 0
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=2.0):
        pass
    with pytest.raises(httpx.TransportError):
        http.post("/v1/act", json=act_request())
    http.close()


def test_stop_interrupts_a_request_in_model_time() -> None:
    before = set(threading.enumerate())
    server = GatewaySimulator(api_key=TEST_KEY, latency_s=30.0).start()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            with client(server) as http:
                http.post("/v1/act", json=act_request())
        except httpx.TransportError as error:
            errors.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 10.0
    while server.stats()["in_flight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    server.stop()
    caller.join(timeout=10.0)
    assert not caller.is_alive()
    assert len(errors) == 1
    assert set(threading.enumerate()) <= before


def test_connect_delay_is_paid_once_per_connection() -> None:
    with GatewaySimulator(api_key=TEST_KEY, connect_delay_s=0.05) as server, client(server) as h:
        statuses = [h.post("/v1/act", json=act_request()).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]
    assert server.stats()["requests_per_connection"] == [3]


def test_drop_connections_closes_kept_alive_connections(sim: GatewaySimulator) -> None:
    with client(sim) as http:
        assert http.get("/v1/models").status_code == 200
        assert sim.drop_connections() == 1
        deadline = time.monotonic() + 5.0
        while sim.stats()["open_connections"] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sim.stats()["open_connections"] == 0
        assert http.get("/v1/models").status_code == 200  # httpx reconnects
    assert sim.stats()["connections"] == 2
