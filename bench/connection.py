"""Connection cost: one kept-alive Policy against a new connection per call.

The real gateway costs ~185 ms of TCP+TLS handshake per new connection (measured), so the
plain-HTTP half runs the simulator with ``connect_delay_s=0.185``. The TLS half runs a real
TLS server on loopback with a throwaway self-signed certificate and no simulated delay: what
it shows is the handshake and SSL-context cost this machine actually pays.
"""

from __future__ import annotations

import ssl
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench._common import BENCH_KEY, machine_note, mean, ms, quantile, ratio
from bench._common import table as markdown_table
from sequence_ai_core.gateway.wire import encode_act_request
from sequence_ai_core.policy import connect
from sequence_ai_core.types import Observation, full_model_id
from sequence_ai_sim import GatewaySimulator, SimulatedArm
from sequence_ai_sim.certificates import self_signed_cert

MODEL = "pi05-droid"
#: TCP+TLS setup per new connection, measured against the real gateway.
HANDSHAKE_S = 0.185

Verify = bool | str
Approach = Callable[[str, Verify, Observation], None]


def kept_alive_policy(url: str, verify: Verify, obs: Observation, calls: int) -> list[float]:
    """The library's way: one Policy, one pooled connection, reused for every call."""
    times = []
    with connect(MODEL, api_key=BENCH_KEY, base_url=url, verify=verify) as policy:
        for _ in range(calls):
            start = time.perf_counter()
            policy.predict(obs)
            times.append(time.perf_counter() - start)
    return times


def new_policy_per_call(url: str, verify: Verify, obs: Observation) -> None:
    with connect(MODEL, api_key=BENCH_KEY, base_url=url, verify=verify) as policy:
        policy.predict(obs)


def _request(obs: Observation) -> tuple[dict[str, Any], dict[str, str]]:
    body = encode_act_request(full_model_id(MODEL), obs, {})
    return body, {"Authorization": f"Bearer {BENCH_KEY}"}


def _httpx_verify(verify: Verify) -> bool | ssl.SSLContext:
    # A CA path becomes a fresh context per call, as a per-call client builds one anyway.
    return ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify


def new_client_per_call(url: str, verify: Verify, obs: Observation) -> None:
    body, headers = _request(obs)
    with httpx.Client(verify=_httpx_verify(verify), timeout=30.0) as client:
        client.post(url + "/v1/act", json=body, headers=headers).raise_for_status()


def plain_httpx_post(url: str, verify: Verify, obs: Observation) -> None:
    body, headers = _request(obs)
    response = httpx.post(
        url + "/v1/act", json=body, headers=headers, verify=_httpx_verify(verify), timeout=30.0
    )
    response.raise_for_status()


def _per_call(
    approach: Approach, url: str, verify: Verify, obs: Observation, calls: int
) -> list[float]:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        approach(url, verify, obs)
        times.append(time.perf_counter() - start)
    return times


def measure(sim: GatewaySimulator, verify: Verify, calls: int) -> list[dict[str, Any]]:
    """One row per approach: latencies and what the server saw (connections, requests)."""
    obs = SimulatedArm(MODEL).observe(instruction="pick up the cup")

    def per_call(approach: Approach) -> Callable[[], list[float]]:
        return lambda: _per_call(approach, sim.url, verify, obs, calls)

    runs: list[tuple[str, Callable[[], list[float]]]] = [
        (
            "kept-alive `Policy` (this library)",
            lambda: kept_alive_policy(sim.url, verify, obs, calls),
        ),
        ("new `Policy` per call", per_call(new_policy_per_call)),
        ("new `httpx.Client` per call", per_call(new_client_per_call)),
        ("`httpx.post` per call", per_call(plain_httpx_post)),
    ]
    rows = []
    for name, run_calls in runs:
        before = sim.stats()
        times = run_calls()
        after = sim.stats()
        rows.append(
            {
                "name": name,
                "times": times,
                "connections": after["connections"] - before["connections"],
                "requests": after["requests"] - before["requests"],
            }
        )
    return rows


def render(rows: list[dict[str, Any]], calls: int) -> str:
    baseline = mean(rows[-1]["times"])  # httpx.post per call: what one writes by hand
    return markdown_table(
        [
            "approach",
            "p50 ms/call",
            "mean ms/call",
            "p95 ms/call",
            "connections per 100 calls",
            "HTTP requests per 100 calls",
            "mean vs `httpx.post`",
        ],
        [
            [
                row["name"],
                ms(quantile(row["times"], 0.5)),
                ms(mean(row["times"])),
                ms(quantile(row["times"], 0.95)),
                f"{100 * row['connections'] / calls:.0f}",
                f"{100 * row['requests'] / calls:.0f}",
                ratio(mean(row["times"]), baseline),
            ]
            for row in rows
        ],
    )


def run(full: bool) -> str:
    # quick: 10 calls (each new connection costs the 185 ms setup, 3 approaches of 4 pay it)
    calls = 100 if full else 6
    with GatewaySimulator(api_key=BENCH_KEY, connect_delay_s=HANDSHAKE_S) as sim:
        plain = measure(sim, True, calls)
    with tempfile.TemporaryDirectory() as tmp:
        cert, key = self_signed_cert(Path(tmp))
        with GatewaySimulator(api_key=BENCH_KEY, tls_cert=cert, tls_key=key) as sim:
            tls = measure(sim, cert, calls)
    return "\n\n".join(
        [
            "## Connection cost",
            machine_note(full=full, sizes=f"{calls} calls per approach"),
            f"{calls} calls of `POST /v1/act` ({MODEL}, zero model latency, so only the "
            "connection cost differs). Ratios are against `httpx.post` per call."
            + (
                ""
                if full
                else f" Quick run: the kept-alive `Policy`'s one connection setup is "
                f"1 of {calls} calls (its mean and ratio read high), and a p95 of {calls} calls "
                "is near their largest."
            ),
            f"### HTTP with the gateway's measured {HANDSHAKE_S * 1000:.0f} ms connection setup",
            render(plain, calls),
            "### HTTPS on loopback: real TLS handshake (self-signed, no simulated delay)",
            render(tls, calls),
        ]
    )
