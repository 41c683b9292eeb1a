"""Policy against the real simulator: connection reuse, buffering, guard, close, secrecy."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from support import TEST_KEY
from support.faultkit import held_reprs
from support.hostile import HostileGateway, answer, chunk_body

from sequence_ai_core import __version__
from sequence_ai_core.credentials import save_api_key
from sequence_ai_core.errors import (
    AuthError,
    ChunkExhausted,
    InvalidRequest,
    SequencesError,
    Unavailable,
)
from sequence_ai_core.images import encode_image
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import FloatArray, Observation, Proprioception
from sequence_ai_sim import Fault, GatewaySimulator


def observation(views: tuple[str, ...] = ("exterior_1", "wrist_left")) -> Observation:
    frame = np.full((48, 64, 3), 80, dtype=np.uint8)
    images = [encode_image(frame, view=view, size=(64, 48)) for view in views]
    return Observation(Proprioception([0.0] * 7, gripper=0.5), images=images, instruction="wave")


@pytest.fixture
def policy(sim: GatewaySimulator) -> Iterator[Policy]:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as handle:
        yield handle


def test_connect_sends_nothing(sim: GatewaySimulator) -> None:
    handle = connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url)
    handle.close()
    assert sim.stats()["requests"] == 0
    assert handle.requests_sent == 0


def test_predictions_reuse_one_connection(sim: GatewaySimulator, policy: Policy) -> None:
    for _ in range(8):
        prediction = policy.predict(observation())
        assert prediction.action_chunk.steps.shape == (15, 8)
        assert prediction.request_id.startswith("r-") and len(prediction.request_id) == 10
    stats = sim.stats()
    assert stats["connections"] == 1
    assert stats["requests_per_connection"] == [8]
    assert policy.requests_sent == 8


def test_every_request_carries_its_own_request_id_and_client_headers(
    sim: GatewaySimulator, policy: Policy
) -> None:
    first = policy.predict(observation())
    second = policy.predict(observation())
    assert [r["request_id"] for r in sim.received] == [first.request_id, second.request_id]
    assert first.request_id != second.request_id


def test_every_request_carries_the_client_headers_on_the_wire() -> None:
    with (
        HostileGateway(answer(chunk_body("pi05-droid"))) as gateway,
        connect("pi05-droid", api_key=TEST_KEY, base_url=gateway.url) as handle,
    ):
        handle.predict(observation())
    acts = [r.headers for r in gateway.requests if r.path == "/v1/act"]
    assert len(acts) == 1
    assert acts[0]["user-agent"] == f"sequence-ai-ros/{__version__}"
    assert acts[0]["content-type"] == "application/json"
    assert acts[0]["authorization"] == f"Bearer {TEST_KEY}"


def test_request_carries_model_observation_and_options(
    sim: GatewaySimulator, policy: Policy
) -> None:
    prediction = policy.predict(observation(), seed=7, action_horizon=5, temperature=None)
    record = sim.received[-1]
    assert record["model"] == "accounts/sequences/models/pi05-droid"
    assert record["options"] == {"seed": 7, "action_horizon": 5}
    assert record["observation"]["proprioception"] == {
        "joint_positions": [0.0] * 7,
        "gripper": 0.5,
    }
    assert [image["view"] for image in record["observation"]["images"]] == [
        "exterior_1",
        "wrist_left",
    ]
    assert len(prediction.action_chunk) == 5


def test_concurrent_fetches_from_worker_threads(sim: GatewaySimulator, policy: Policy) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: policy.fetch(observation(), {}), range(12)))
    assert len({r.request_id for r in results}) == 12
    assert policy.requests_sent == 12
    stats = sim.stats()
    assert stats["act_requests"] == 12
    assert 1 <= stats["connections"] <= 4


def test_next_action_buffers_one_chunk_per_request(sim: GatewaySimulator, policy: Policy) -> None:
    first = policy.next_action(observation())
    assert first.shape == (8,)
    assert policy.buffered == 14
    rest = [policy.next_action() for _ in range(14)]
    assert policy.buffered == 0
    assert sim.stats()["act_requests"] == 1
    assert all(np.isfinite(action).all() for action in rest)
    with pytest.raises(ChunkExhausted):
        policy.next_action()
    policy.next_action(observation())
    assert sim.stats()["act_requests"] == 2


def test_describe_fetches_catalogue_once(sim: GatewaySimulator, policy: Policy) -> None:
    model = policy.describe()
    assert model.short_id == "pi05-droid"
    assert model.action_dim == 8
    assert model.camera_views == ("exterior_1", "wrist_left")
    assert policy.describe() is model
    assert sim.stats()["requests"] == 1


def test_describe_unknown_model_is_invalid_request(sim: GatewaySimulator) -> None:
    with connect("no-such-model", api_key=TEST_KEY, base_url=sim.url) as handle:
        with pytest.raises(InvalidRequest, match="not in the gateway's act catalogue"):
            handle.describe()
        with pytest.raises(InvalidRequest) as info:
            handle.predict(observation())
        assert info.value.status == 404


def test_second_thread_is_refused_while_another_drives(policy: Policy) -> None:
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def drive() -> None:
        with policy.guard.driving():
            entered.set()
            release.wait(10)

    driver = threading.Thread(target=drive)
    driver.start()
    assert entered.wait(10)
    try:
        with pytest.raises(SequencesError, match="another thread"):
            policy.predict(observation())
        with pytest.raises(SequencesError, match="another thread"):
            policy.next_action(observation())
    except BaseException as exc:  # keep the driver thread from hanging on failure
        errors.append(exc)
    finally:
        release.set()
        driver.join(10)
    assert not errors
    assert policy.requests_sent == 0
    policy.predict(observation())  # free again once the driver left
    assert policy.requests_sent == 1


def test_same_thread_may_reenter_the_guard(policy: Policy) -> None:
    with policy.guard.driving(), policy.guard.driving():
        policy.predict(observation())
    assert policy.requests_sent == 1


def test_close_is_idempotent_and_later_calls_raise(sim: GatewaySimulator) -> None:
    handle = connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url)
    handle.predict(observation())
    handle.close()
    handle.close()
    for call in (
        lambda: handle.predict(observation()),
        lambda: handle.next_action(observation()),
        lambda: handle.fetch(observation(), {}),
        handle.describe,
    ):
        with pytest.raises(SequencesError, match="closed"):
            call()
    assert "closed" in repr(handle)
    assert sim.stats()["requests"] == 1


def test_close_under_an_in_flight_fetch_reports_closed(sim: GatewaySimulator) -> None:
    handle = connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url)
    handle.predict(observation())
    sim.inject(Fault.timeout(1.0))
    outcome: list[object] = []

    def fetch() -> None:
        try:
            outcome.append(handle.fetch(observation(), {}))
        except SequencesError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=fetch)
    worker.start()
    while sim.stats()["requests"] < 2:  # the request reached the server
        threading.Event().wait(0.01)
    handle.close()
    worker.join(10)
    assert len(outcome) == 1
    assert isinstance(outcome[0], SequencesError)
    assert "closed" in str(outcome[0])


def test_invalid_observation_is_refused_before_sending(
    sim: GatewaySimulator, policy: Policy
) -> None:
    with pytest.raises(ValueError, match="joint_positions"):
        policy.predict(Observation(Proprioception([])))
    assert sim.stats()["requests"] == 0


def test_key_from_credentials_file_is_used(sim: GatewaySimulator) -> None:
    save_api_key(TEST_KEY)
    with connect("pi05-droid", base_url=sim.url) as handle:
        assert handle.predict(observation()).action_chunk.action_dim == 8


def test_no_key_is_refused_before_sending_and_says_where_it_looked(clean_env: Path) -> None:
    with (
        HostileGateway(answer(chunk_body("pi05-droid"))) as gateway,
        connect("pi05-droid", base_url=gateway.url) as handle,
    ):
        assert handle.describe().short_id == "pi05-droid"  # the public catalogue needs none
        with pytest.raises(AuthError) as info:
            handle.predict(observation())
    assert info.value.status is None
    message = str(info.value)
    assert "$SEQUENCES_API_KEY" in message
    assert str(clean_env / "sequence-ai" / "credentials") in message
    assert "sequence-ai login" in message
    assert [r.path for r in gateway.requests if r.method == "POST"] == []  # nothing was sent
    assert gateway.requests and all("authorization" not in r.headers for r in gateway.requests)


def test_control_hz_override_is_stored_and_checked(sim: GatewaySimulator) -> None:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=10.0) as handle:
        assert handle.control_hz == 10.0
    with pytest.raises(ValueError, match="control_hz"):
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, control_hz=0.0)


def test_key_never_appears_in_reprs_errors_or_logs(
    sim: GatewaySimulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # root: includes httpx and httpcore request logging
    for name in ("httpx", "httpcore", "sequence_ai_core"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    texts: list[str] = []
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as handle:
        texts += [*held_reprs(handle), str(handle)]
        handle.predict(observation())
        handle.describe()
        for fault in (Fault.status(401), Fault.reset(), Fault.nan(), Fault.status(503)):
            sim.inject(fault)
            with pytest.raises(SequencesError) as info:
                handle.predict(observation())
            texts += [str(info.value), repr(info.value), repr(info.value.body)]
    with connect("pi05-droid", api_key="wrong-" + TEST_KEY, base_url=sim.url) as handle:
        with pytest.raises(AuthError) as auth:
            handle.predict(observation())
        texts += [str(auth.value), repr(auth.value), repr(auth.value.body)]
    records = [record.getMessage() for record in caplog.records]
    assert any(record.name.startswith("httpx") for record in caplog.records)
    assert any(record.name.startswith("httpcore") for record in caplog.records)
    everything = "\n".join(texts + records + [caplog.text])
    assert TEST_KEY not in everything
    assert "Bearer" not in everything


def test_transport_errors_carry_the_request_id_in_logs(
    sim: GatewaySimulator, policy: Policy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sequence_ai_core")
    sim.inject(Fault.reset())
    with pytest.raises(Unavailable) as info:
        policy.predict(observation())
    assert info.value.request_id is not None
    assert info.value.request_id in caplog.text


def test_run_delegates_to_the_engine_and_holds_the_handle(sim: GatewaySimulator) -> None:
    played: list[FloatArray] = []
    refused: list[str] = []

    def act(action: FloatArray) -> None:
        if not played:  # while run() drives, another thread must be refused
            worker = threading.Thread(target=lambda: refused.append(_try_predict(handle)))
            worker.start()
            worker.join(10)
        played.append(action)

    with connect("lingbot-vla-v2-6b", api_key=TEST_KEY, base_url=sim.url) as handle:
        outcome = handle.run(
            lambda: observation(("front", "wrist")),
            act,
            max_actions=6,
            validate=lambda action: bool(np.all(np.abs(action) < 10)),
        )
    assert outcome.actions == 6
    assert len(played) == 6
    assert all(action.shape == (7,) for action in played)
    assert refused == ["refused"]


def _try_predict(handle: Policy) -> str:
    try:
        handle.predict(observation(("front", "wrist")))
    except SequencesError:
        return "refused"
    return "accepted"
