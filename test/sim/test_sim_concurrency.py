"""The simulator's shared state under load: counters, faults, credit and the request log
agree with what many concurrent clients sent and saw.

Two levels: real HTTP from many threads with kept-alive connections (the whole path, handler
included), and ``SimState`` itself. Both run with the interpreter switching threads every
microsecond instead of every 5 ms, so that a read-modify-write outside the lock loses
updates or breaks a snapshot: with the lock replaced by a no-op, the HTTP test lost one
status count in each of two runs and the state test 455-526 of 12,000, or raised
"dictionary changed size during iteration" from a snapshot.
"""

from __future__ import annotations

import socket
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from support import TEST_KEY
from support.gateway_requests import act_request

from sequence_ai_sim import CATALOGUE, Fault, GatewaySimulator
from sequence_ai_sim.state import SimSettings, SimState

THREADS = 12
ROUNDS = 10  # per thread: one act request, one with a wrong key, one GET, per round
INJECTED = 15  # 503s handed to whichever act requests come first
CREDIT = 80  # fewer than the act requests that reach the credit check: some get 402


def _in_threads(count: int, work: Callable[[int], None]) -> None:
    """Run ``work(i)`` on ``count`` threads started together; re-raise the first failure."""
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            work(index)
        except BaseException as error:  # reported below, on the test's thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    if failures:
        raise failures[0]


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every microsecond (default 5 ms), so unlocked updates interleave."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def test_counters_and_log_agree_with_what_concurrent_clients_saw(
    clean_env: Any, fast_switching: None
) -> None:
    seen: list[tuple[int, str, str, int, str | None]] = []  # thread, kind, rid, status, id
    seen_lock = threading.Lock()
    snapshots: list[int] = []
    body = act_request()

    with GatewaySimulator(api_key=TEST_KEY, workers=4, credit=CREDIT) as sim:
        sim.inject(Fault.status(503), times=INJECTED)
        stop_reading = threading.Event()

        def read_log() -> None:  # reads the log and the counters while they change
            while not stop_reading.is_set():
                snapshots.append(len(sim.received))
                sim.stats()

        reader = threading.Thread(target=read_log)
        reader.start()

        def client(index: int) -> None:
            auth = {"Authorization": f"Bearer {TEST_KEY}"}
            with httpx.Client(base_url=sim.url, timeout=30.0) as http:
                for n in range(ROUNDS):
                    rid = f"r-{index:02d}{n:02d}"
                    ok = http.post("/v1/act", json=body, headers={**auth, "X-Seq-Request-Id": rid})
                    wrong = http.post(
                        "/v1/act",
                        json=body,
                        headers={"Authorization": "Bearer nope", "X-Seq-Request-Id": rid + "x"},
                    )
                    listing = http.get("/v1/models", headers={"X-Seq-Request-Id": rid + "g"})
                    answer_id = ok.json().get("id") if ok.status_code == 200 else None
                    with seen_lock:
                        seen.append((index, "act", rid, ok.status_code, answer_id))
                        seen.append((index, "wrong_key", rid + "x", wrong.status_code, None))
                        seen.append((index, "models", rid + "g", listing.status_code, None))

        try:
            _in_threads(THREADS, client)
        finally:
            stop_reading.set()
            reader.join(timeout=10)
        stats = sim.stats()
        received = sim.received

    acts = [s for s in seen if s[1] == "act"]
    assert len(seen) == THREADS * ROUNDS * 3
    # An injected fault answers the next POST /v1/act before its key is looked at.
    assert {s[3] for s in seen if s[1] == "wrong_key"} <= {401, 503}
    assert {s[3] for s in seen if s[1] == "models"} == {200}
    assert sum(s[3] == 503 for s in seen) == INJECTED  # each fault answered one request
    statuses = Counter(s[3] for s in acts)
    assert statuses[200] == CREDIT  # credit charged exactly once per answered request
    assert statuses[402] == THREADS * ROUNDS - statuses[503] - CREDIT
    assert set(statuses) <= {200, 402, 503}

    # Counters: every request counted once, on the connection it came on.
    assert stats["requests"] == len(seen)
    assert stats["act_requests"] == 2 * THREADS * ROUNDS
    assert stats["connections"] == THREADS  # one kept-alive connection per client
    assert sorted(stats["requests_per_connection"]) == [3 * ROUNDS] * THREADS
    assert stats["status_counts"] == {
        str(code): count for code, count in sorted(Counter(s[3] for s in seen).items())
    }
    assert (stats["charged"], stats["credit_remaining"]) == (CREDIT, 0)
    assert (stats["faults_pending"], stats["in_flight"]) == (0, 0)
    assert 1 <= stats["max_in_flight"] <= 4

    # The log: exactly the act requests that passed auth and reached the gateway (not the
    # injected 503s, which a proxy in front of it answers), each with the status its client saw.
    expected = {s[2]: s[3] for s in acts if s[3] != 503}
    assert len(received) == len(expected)
    assert {r["request_id"]: r["status"] for r in received} == expected
    # Requests on one connection are logged in the order its client sent them.
    for connection in {r["connection"] for r in received}:
        rids = [r["request_id"] for r in received if r["connection"] == connection]
        assert rids == sorted(rids)
    assert all("anchor_wall" in r for r in received if r["status"] == 200)
    # Answer ids come from one counter: unique and without gaps.
    ids = sorted(s[4] for s in acts if s[4] is not None)
    assert ids == [f"act-{n:08x}" for n in range(1, CREDIT + 1)]
    assert snapshots == sorted(snapshots)  # the log only grows while it is read
    assert snapshots and snapshots[-1] <= len(expected)


def test_state_updates_are_atomic_under_contention(fast_switching: None) -> None:
    threads, per_thread = 8, 1500
    settings = SimSettings(models=dict(CATALOGUE), credit=threads * per_thread // 2)
    state = SimState(settings, latency_s=0.0, jitter=0.0, seed=0)
    state.begin()
    sockets = [socket.socket() for _ in range(threads)]
    connections = [state.open_connection(sock) for sock in sockets]
    state.add_faults(Fault.status(500), threads * per_thread // 3)
    outcomes: list[Counter[str]] = [Counter() for _ in range(threads)]
    response_ids: list[list[str]] = [[] for _ in range(threads)]
    snapshot_sizes: list[int] = []

    def hammer(index: int) -> None:
        mine = outcomes[index]
        for n in range(per_thread):
            state.count_request(connections[index], act=n % 2 == 0)
            state.count_status(200 + n % 3)
            serial = state.record({"request_id": f"{index}-{n}", "status": None})
            state.update_record(serial, status=200 + n % 3)
            mine["fault"] += state.take_fault() is not None
            mine["charged"] += state.reserve_credit()
            response_ids[index].append(state.next_response_id())
            if n % 100 == 0:  # a reader's snapshot while every other thread writes
                snapshot_sizes.append(len(state.received()))

    try:
        _in_threads(threads, hammer)
    finally:
        for sock in sockets:
            sock.close()

    total = threads * per_thread
    stats = state.stats()
    assert stats["requests"] == total
    assert stats["act_requests"] == total // 2
    assert stats["requests_per_connection"] == [per_thread] * threads
    assert sum(stats["status_counts"].values()) == total
    assert stats["status_counts"] == {"200": total // 3, "201": total // 3, "202": total // 3}
    assert sum(c["fault"] for c in outcomes) == total // 3
    assert stats["faults_pending"] == 0
    assert sum(c["charged"] for c in outcomes) == stats["charged"] == total // 2
    assert stats["credit_remaining"] == 0
    all_ids = [rid for ids in response_ids for rid in ids]
    assert len(set(all_ids)) == total
    log = state.received()
    assert len(log) == total
    assert len({entry["request_id"] for entry in log}) == total
    assert all(entry["status"] == 200 + int(entry["request_id"].split("-")[1]) % 3 for entry in log)
    assert snapshot_sizes and max(snapshot_sizes) <= total
