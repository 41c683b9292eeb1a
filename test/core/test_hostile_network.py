"""The client against a hostile gateway (``hostile.HostileGateway``, raw sockets on
loopback): silent, trickling, desynchronising, compressing, oversized. Whatever the server
does, every request ends by its deadline with a typed error, ``close()`` and the
interpreter are not held up, nothing unbounded is decoded, and nothing stale is played."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import TEST_KEY
from support.faultkit import MODEL, OBSERVATION, harness, wait_until
from support.fuzzing import examples as fuzz
from support.hostile import (
    HOSTILE_EXAMPLES,
    HostileGateway,
    Request,
    answer,
    chunk_body,
    http_response,
    silent_after,
    stacked_gzip,
    trickle,
)

from sequence_ai_core import InvalidResponse, SequencesError, Unavailable, connect
from sequence_ai_core.errors import Stalled
from sequence_ai_core.limits import MAX_BODY_BYTES, MAX_STEPS
from sequence_ai_sim import CATALOGUE, GatewaySimulator

HZ = CATALOGUE[MODEL].control_hz
#: Every test also runs under faultkit's harness: no thread or socket outlives it, and the
#: key is in no log line or output.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("harness")]
__all__ = ["harness"]  # the fixture, imported for pytest to find


def raised(call: Any, *args: Any) -> BaseException:
    try:
        call(*args)
    except BaseException as exc:
        return exc
    raise AssertionError("no error raised")


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.actions: list[np.ndarray[Any, Any]] = []

    def act(self, action: np.ndarray[Any, Any]) -> None:
        self.events.append("act")
        self.actions.append(action)

    def hold(self) -> None:
        self.events.append("hold")

    def underrun(self, gap: float) -> None:
        self.events.append("underrun")

    def run(self, policy: Any, **kwargs: Any) -> Any:
        return policy.run(
            lambda: OBSERVATION,
            self.act,
            validate=lambda a: True,
            hold=self.hold,
            on_underrun=self.underrun,
            **{"max_actions": 10_000, **kwargs},
        )


# ------------------------------------------------------------------ silence and trickles


@pytest.mark.timing
def test_silent_gateway_mid_run_holds_when_the_plan_runs_out_and_ends_typed() -> None:
    """Today's failure: 29.7 s with a velocity arm still moving. Now: hold on the first
    empty tick, then ``Stalled`` once the plan stayed empty past ``stall_timeout_s`` (long
    before the request's own 300 s deadline)."""
    robot = Recorder()
    body = chunk_body(MODEL)
    for step in body["action_chunk"]["steps"]:  # each step's values are its index
        step["values"] = [float(step["index"])] * len(step["values"])
    with (
        HostileGateway(silent_after(1, MODEL, body)) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url, timeout_s=300) as policy,
    ):
        outcome = robot.run(policy, stall_timeout_s=0.5)
    assert isinstance(outcome.error, Stalled), outcome.summary()
    # Steps of the one chunk, from its first, in order, none twice (the tick after a late one
    # sends nothing: test_engine_late_tick). Unloaded, all 15; under load a late tick passes
    # steps over (counted skipped_late) or finds the plan's time over before its last steps.
    played = [int(action[0]) for action in robot.actions]
    assert played[0] == 0 and played == sorted(set(played))
    assert played[-1] < CATALOGUE[MODEL].action_horizon and outcome.actions == len(played)
    assert outcome.stopped_early and outcome.skipped_late == played[-1] + 1 - len(played)
    first_empty = robot.events.index("underrun")
    assert robot.events[first_empty + 1] == "hold"  # on the very tick the plan ran out
    assert robot.events.count("hold") == 1 and "act" not in robot.events[first_empty:]


def test_trickled_answer_ends_by_the_request_deadline() -> None:
    """One byte every 50 ms never trips a per-read timeout; the request deadline ends it."""
    payload = http_response(200, chunk_body(MODEL))
    with (
        HostileGateway(trickle(payload, 0.05)) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url, timeout_s=0.5) as policy,
    ):
        error = raised(policy.predict, OBSERVATION)
    assert type(error) is Unavailable and "deadline" in str(error), error


@pytest.mark.parametrize("where", ["status line", "headers", "body"])
def test_a_trickle_starting_anywhere_in_the_answer_ends_by_the_deadline(where: str) -> None:
    payload = http_response(200, chunk_body(MODEL))
    split = {"status line": 4, "headers": payload.index(b"\r\n") + 6, "body": len(payload) - 9}
    head, tail = payload[: split[where]], payload[split[where] :]

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        sock.sendall(head)
        trickle(tail, 0.1)(request, sock, gateway)

    with (
        HostileGateway(behave) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url, timeout_s=0.5) as policy,
    ):
        error = raised(policy.predict, OBSERVATION)
    assert type(error) is Unavailable and "deadline" in str(error), error


def test_close_aborts_a_request_in_flight_at_once() -> None:
    payload = http_response(200, chunk_body(MODEL))
    with HostileGateway(trickle(payload, 0.5)) as gateway:
        policy = connect(MODEL, api_key=TEST_KEY, base_url=gateway.url, timeout_s=600)
        errors: list[BaseException] = []
        worker = threading.Thread(target=lambda: errors.append(raised(policy.predict, OBSERVATION)))
        worker.start()
        assert wait_until(lambda: bool(gateway.requests))
        policy.close()
        worker.join(10)  # hang guard: the request's own deadline is 600 s
        assert not worker.is_alive()
    assert type(errors[0]) is SequencesError and "closed" in str(errors[0])


def test_a_trickled_catalogue_does_not_keep_run_from_starting() -> None:
    catalogue = json.dumps({"data": [CATALOGUE[MODEL].catalogue_entry()]})
    slow = trickle(http_response(200, catalogue), 0.3)  # minutes for the whole catalogue
    with (
        HostileGateway(answer(chunk_body(MODEL)), catalogue=slow) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url, timeout_s=0.5) as policy,
    ):
        outcome = Recorder().run(policy, max_actions=5)
    assert outcome.reason == "completed", outcome.summary()


_EXIT_SCRIPT = """
import sys
sys.path.insert(0, {test_dir!r})
from support.faultkit import MODEL, OBSERVATION
from sequence_ai_core import connect
with connect(MODEL, api_key="sk-test-0123456789abcdef", base_url={url!r}, timeout_s=600) as p:
    outcome = p.run(lambda: OBSERVATION, lambda a: None, max_actions=1000,
                    validate=lambda a: True, stall_timeout_s=0.3)
print(outcome.reason, flush=True)
"""


def test_a_hung_request_does_not_keep_the_interpreter_alive() -> None:
    """A worker stuck on a trickled refill used to keep the process from exiting."""
    good = {"n": 0}
    body = http_response(200, chunk_body(MODEL))

    def first_then_trickle(request: Request, sock: Any, gateway: HostileGateway) -> None:
        good["n"] += 1
        if good["n"] == 1:
            sock.sendall(body)
        else:
            trickle(body, 1.0)(request, sock, gateway)

    with HostileGateway(first_then_trickle) as gateway:
        script = _EXIT_SCRIPT.format(test_dir=str(Path(__file__).parents[1]), url=gateway.url)
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=45
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "raised:Stalled"


# ------------------------------------------------------------------ rates


@pytest.mark.parametrize("hz", [0.001, 1e-300, 2000.0, HZ * 2, HZ * 0.9])
def test_a_chunk_rate_out_of_range_or_off_catalogue_is_refused(hz: float) -> None:
    """0.001 Hz used to sleep 1000 s after one velocity step; 1e-300 Hz raised
    OverflowError; a rate the catalogue does not list played the model at the wrong speed."""
    robot = Recorder()
    with (
        HostileGateway(answer(chunk_body(MODEL, control_frequency_hz=hz))) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        outcome = robot.run(policy, max_actions=50)
    assert outcome.reason == "raised:InvalidResponse", outcome.summary()
    assert "control_frequency_hz" in str(outcome.error)
    assert robot.actions == [] and robot.events == ["hold"]


def test_close_from_another_thread_ends_a_run_at_once() -> None:
    """A run paced on one thread used to ignore ``close()`` from another until its plan ran
    out (2 s of motion on this model)."""
    model = "cosmos3-edge-policy-droid"
    entry = CATALOGUE[model]
    frames = tuple(f for f in _frames(model))
    observation = type(OBSERVATION)(
        type(OBSERVATION.proprioception)(joint_positions=[0.0] * (entry.action_dim - 1)),
        images=frames,
    )
    acted: list[int] = []
    holds: list[int] = []
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.01) as sim:
        policy = connect(model, api_key=TEST_KEY, base_url=sim.url)

        def act(action: Any) -> None:
            acted.append(1)
            if len(acted) == 3:
                threading.Thread(target=policy.close).start()

        outcome = policy.run(
            lambda: observation,
            act,
            max_actions=1000,
            validate=lambda a: True,
            hold=lambda: holds.append(1),
        )
    assert outcome.reason == "raised:SequencesError" and "closed" in str(outcome.error)
    assert len(acted) <= 4 and holds == [1]


def _frames(model: str) -> Any:
    from support.faultkit import camera_frames

    return camera_frames(model)


# ------------------------------------------------------------------ desynchronised answers


def _answer_twice(request: Request, sock: Any, gateway: HostileGateway) -> None:
    """The real answer, then an unsolicited one (values 9.0) on the same connection."""
    sock.sendall(
        http_response(200, chunk_body(MODEL, value=0.0))
        + http_response(200, chunk_body(MODEL, value=9.0))
    )


def test_an_unsolicited_answer_on_a_kept_alive_connection_is_never_played() -> None:
    with (
        HostileGateway(_answer_twice) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        first = policy.predict(OBSERVATION)
        second = raised(policy.predict, OBSERVATION)
        third = policy.predict(OBSERVATION)  # a fresh connection
        connections = gateway.connections
    assert np.all(first.action_chunk.steps == 0.0) and np.all(third.action_chunk.steps == 0.0)
    assert type(second) is InvalidResponse and "out of step" in str(second)
    assert connections == 2


def test_an_unsolicited_answer_arriving_on_an_idle_connection_is_never_played() -> None:
    def late_extra(request: Request, sock: Any, gateway: HostileGateway) -> None:
        sock.sendall(http_response(200, chunk_body(MODEL, value=0.0)))
        if not gateway.wait(0.05):
            sock.sendall(http_response(200, chunk_body(MODEL, value=9.0)))

    with (
        HostileGateway(late_extra) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        policy.predict(OBSERVATION)
        time.sleep(0.3)  # the unsolicited answer arrives while the connection is idle
        second = policy.predict(OBSERVATION)
    assert np.all(second.action_chunk.steps == 0.0)


def test_run_never_plays_an_unsolicited_answer() -> None:
    robot = Recorder()
    with (
        HostileGateway(_answer_twice) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        outcome = robot.run(policy, max_actions=200)
    assert all(np.all(a == 0.0) for a in robot.actions)
    assert outcome.reason in ("completed", "raised:InvalidResponse"), outcome.summary()


# ------------------------------------------------------------------ compression and size


def test_the_client_asks_for_no_compression() -> None:
    with (
        HostileGateway(answer(chunk_body(MODEL))) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        policy.predict(OBSERVATION)
    assert gateway.requests[-1].headers["accept-encoding"] == "identity"


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """64 MB of JSON-ish zeros in two gzip layers: a few hundred bytes on the wire."""
    return stacked_gzip(b'{"id": "' + b"0" * 64_000_000 + b'"}', 2)


def test_a_stacked_gzip_bomb_is_refused_within_the_decoded_cap(bomb: bytes) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip, gzip"}
    with (
        HostileGateway(answer(bomb, **headers)) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        tracemalloc.start()
        try:
            error = raised(policy.predict, OBSERVATION)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert len(bomb) < 100_000
    assert type(error) is InvalidResponse and "limit" in str(error), error
    assert peak < 8 * MAX_BODY_BYTES, peak  # not the 64 MB it would decode to


_ENCODINGS = st.lists(
    st.sampled_from(["gzip", "x-gzip", "deflate", "identity", "br", "zstd", "compress"]),
    max_size=4,
)


def _encode(data: bytes, layers: list[str]) -> bytes:
    import zlib

    for layer in layers:
        if layer in ("gzip", "x-gzip"):
            data = gzip.compress(data)
        elif layer == "deflate":
            data = zlib.compress(data)
    return data


@pytest.fixture
def shaped() -> Any:
    state: dict[str, Any] = {}

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        sock.sendall(http_response(200, state["body"], state["headers"]))

    with (
        HostileGateway(behave) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        yield state, policy


@fuzz("encodings", HOSTILE_EXAMPLES)
@given(layers=_ENCODINGS)
def test_any_stack_of_encodings_is_decoded_within_bounds_or_refused(
    shaped: Any, layers: list[str]
) -> None:
    state, policy = shaped
    state["body"] = _encode(json.dumps(chunk_body(MODEL)).encode(), layers)
    state["headers"] = {"Content-Type": "application/json", "Content-Encoding": ", ".join(layers)}
    try:
        prediction = policy.predict(OBSERVATION)
    except InvalidResponse as exc:
        unknown = {"br", "zstd", "compress"} & set(layers)
        assert unknown or len([x for x in layers if x != "identity"]) > 2, exc
        return
    assert len(prediction.action_chunk) == CATALOGUE[MODEL].action_horizon


def test_an_oversized_declared_length_is_refused_without_reading_it() -> None:
    """126 MB declared, nothing sent: refused at once rather than waited for."""
    body = http_response(200, b"{", length=126_000_000)
    with (
        HostileGateway(lambda r, s, g: s.sendall(body)) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url, timeout_s=20) as policy,
    ):
        error = raised(policy.predict, OBSERVATION)
    assert type(error) is InvalidResponse and "limit" in str(error), error


def test_a_body_past_the_cap_without_a_length_is_refused() -> None:
    data = json.dumps(chunk_body(MODEL, steps=MAX_STEPS, note="x" * MAX_BODY_BYTES)).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
    with (
        HostileGateway(lambda r, s, g: (s.sendall(head + data), s.shutdown(1))) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        error = raised(policy.predict, OBSERVATION)
    assert type(error) is InvalidResponse and "limit" in str(error), error


def test_a_chunk_past_the_steps_cap_is_refused() -> None:
    """3 million valid steps took 65 s to parse with the GIL held; the cap refuses them."""
    with (
        HostileGateway(answer(chunk_body(MODEL, steps=MAX_STEPS + 1))) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        error = raised(policy.predict, OBSERVATION)
    assert type(error) is InvalidResponse and "steps" in str(error), error


def test_a_body_of_too_many_json_items_is_refused_before_parsing() -> None:
    body = {"id": "x", "pad": [0] * 20_000}
    with (
        HostileGateway(answer(body)) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        error = raised(policy.predict, OBSERVATION)
    assert type(error) is InvalidResponse and "JSON items" in str(error), error


def test_a_gateway_behind_an_http_proxy_from_the_environment_is_reached_through_it(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client reads proxies itself (its sockets carry the request deadline); a plain
    HTTP proxy sees absolute-form requests for the gateway it forwards to."""
    with HostileGateway(answer(chunk_body(MODEL))) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with connect(
            MODEL, api_key=TEST_KEY, base_url="http://gateway.example", allow_insecure_http=True
        ) as policy:
            prediction = policy.predict(OBSERVATION)
    assert len(prediction.action_chunk) == CATALOGUE[MODEL].action_horizon
    assert proxy.requests[0].path == "http://gateway.example/v1/act"
    assert len(proxy.requests) == 1


def test_proxy_choice_follows_no_proxy_and_never_applies_to_loopback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sequence_ai_core.gateway.connections import proxy_for

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    assert proxy_for("https://api.example", loopback=False) == "http://127.0.0.1:3128"
    assert proxy_for("https://internal.example", loopback=False) is None
    assert proxy_for("https://127.0.0.1:8765", loopback=True) is None


def test_cancel_requests_aborts_what_is_in_flight_and_keeps_the_handle() -> None:
    with (
        HostileGateway(silent_after(0, MODEL)) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url, timeout_s=600) as policy,
    ):
        errors: list[BaseException] = []
        worker = threading.Thread(target=lambda: errors.append(raised(policy.predict, OBSERVATION)))
        worker.start()
        assert wait_until(lambda: bool(gateway.requests))
        assert wait_until(lambda: policy.cancel_requests() == 1 or not worker.is_alive())
        worker.join(10)
        assert not worker.is_alive()
        gateway.behaviour = answer(chunk_body(MODEL))
        prediction = policy.predict(OBSERVATION)  # the handle still works
    assert type(errors[0]) is SequencesError and "aborted" in str(errors[0])
    assert len(prediction.action_chunk) == CATALOGUE[MODEL].action_horizon
