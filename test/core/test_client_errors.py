"""Every gateway failure becomes its typed error, against the real simulator."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from support import TEST_KEY
from support.statuses import EXPECTED

from sequence_ai_core.errors import (
    AuthError,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    SequencesError,
    Unavailable,
)
from sequence_ai_core.policy import Policy, connect
from sequence_ai_core.types import Observation, Proprioception
from sequence_ai_sim import Fault, GatewaySimulator

OBS = Observation(Proprioception([0.0] * 7))


@pytest.fixture
def policy(sim: GatewaySimulator) -> Iterator[Policy]:
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, timeout_s=5.0) as handle:
        yield handle


def _raised(policy: Policy) -> SequencesError:
    with pytest.raises(SequencesError) as info:
        policy.predict(OBS)
    return info.value


@pytest.mark.parametrize(
    "shape",
    ["newer", "older"],
)
@pytest.mark.parametrize("status", sorted(EXPECTED))
def test_status_maps_to_error_class(
    sim: GatewaySimulator, policy: Policy, status: int, shape: str
) -> None:
    body = None if shape == "newer" else {"detail": f"older shape says {status}"}
    sim.inject(Fault.status(status, body=body))
    error = _raised(policy)
    assert type(error) is EXPECTED[status]
    assert error.status == status
    assert re.fullmatch(r"r-[0-9a-f]{8}", error.request_id or "")
    if shape == "older":
        assert error.message == f"older shape says {status}"
    else:
        assert "injected fault" in error.message
    if isinstance(error, Unavailable):
        assert error.warming is False


WARMING_BODIES: list[dict[str, Any]] = [
    {"detail": "warming", "code": "warming", "retryable": True, "retry_after_s": 118},
    {
        "detail": {
            "status": "warming_up",
            "retry_after_s": 118,
            "warming_job_id": "job-1",
            "message": "worker is starting",
        }
    },
]


BOTH_SHAPES: dict[str, Any] = {
    "detail": {"status": "warming_up", "retry_after_s": 118, "message": "worker is starting"},
    "code": "warming",
    "retryable": True,
    "retry_after_s": 118,
}
WARMING_BODIES.append(BOTH_SHAPES)


@pytest.mark.parametrize("body", WARMING_BODIES, ids=["newer", "older", "both"])
def test_warming_reads_retry_after_from_body(
    sim: GatewaySimulator, policy: Policy, body: dict[str, Any]
) -> None:
    sim.inject(Fault.status(503, body=body, headers={"Retry-After": "5"}))
    error = _raised(policy)
    assert isinstance(error, Unavailable)
    assert error.warming is True
    assert error.retry_after_s == 118.0


@pytest.mark.parametrize(
    "body",
    [{"detail": "warming", "code": "warming"}, {"detail": {"status": "warming_up"}}],
    ids=["newer", "older"],
)
def test_warming_falls_back_to_retry_after_header(
    sim: GatewaySimulator, policy: Policy, body: dict[str, Any]
) -> None:
    sim.inject(Fault.status(503, body=body, headers={"Retry-After": "7"}))
    error = _raised(policy)
    assert isinstance(error, Unavailable)
    assert error.warming is True
    assert error.retry_after_s == 7.0


@pytest.mark.parametrize(
    ("newer", "warming", "code", "retry_after_s"),
    [
        ({"code": "warming", "retry_after_s": 118}, True, "warming", 118.0),
        ({"code": "unavailable"}, False, "unavailable", 90.0),  # busy: the wait is the older's
        ({"code": 7, "retry_after_s": 5}, True, "warming_up", 5.0),  # a code that is not text
        ({}, True, "warming_up", 90.0),
    ],
    ids=["agree", "newer-says-busy", "code-not-text", "older-alone"],
)
def test_a_body_of_both_shapes_is_read_by_its_newer_fields(
    sim: GatewaySimulator,
    policy: Policy,
    newer: dict[str, Any],
    warming: bool,
    code: str,
    retry_after_s: float,
) -> None:
    older = {"status": "warming_up", "retry_after_s": 90, "message": "worker is starting"}
    sim.inject(Fault.status(503, body={"detail": older, **newer}))
    error = _raised(policy)
    assert isinstance(error, Unavailable)
    assert (error.warming, error.code, error.retry_after_s) == (warming, code, retry_after_s)
    assert error.message == "worker is starting"


def test_cold_start_is_warming(clean_env: object) -> None:
    with (
        GatewaySimulator(api_key=TEST_KEY, cold_start_s=60.0) as cold,
        connect("pi05-droid", api_key=TEST_KEY, base_url=cold.url) as handle,
    ):
        error = _raised(handle)
    assert isinstance(error, Unavailable)
    assert error.warming is True and error.code == "warming"  # the newer field, by default
    assert error.retry_after_s is not None and 0 < error.retry_after_s <= 60


def test_real_rejections_from_the_simulator(sim: GatewaySimulator) -> None:
    with connect("pi05-droid", api_key="wrong", base_url=sim.url) as handle:
        assert type(_raised(handle)) is AuthError
    with connect("not-a-model", api_key=TEST_KEY, base_url=sim.url) as handle:
        error = _raised(handle)
        assert type(error) is InvalidRequest and error.status == 404
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as handle:
        with pytest.raises(InvalidRequest) as info:
            handle.predict(OBS, action_horizon=0)
        assert info.value.status == 422


def test_out_of_credit(clean_env: object) -> None:
    with (
        GatewaySimulator(api_key=TEST_KEY, credit=1) as limited,
        connect("pi05-droid", api_key=TEST_KEY, base_url=limited.url) as handle,
    ):
        handle.predict(OBS)
        error = _raised(handle)
    assert type(error) is OutOfCredit
    assert error.code == "insufficient_credit"


def test_body_too_large(clean_env: object) -> None:
    big = Observation(Proprioception(np.zeros(500).tolist()))
    with (
        GatewaySimulator(api_key=TEST_KEY, max_body_bytes=2000) as small,
        connect("pi05-droid", api_key=TEST_KEY, base_url=small.url) as handle,
        pytest.raises(InvalidRequest) as info,
    ):
        handle.predict(big)
    assert info.value.status == 413


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (Fault.nan(), "not finite"),
        (Fault.ragged(), "ragged"),
        (Fault.empty_steps(), "empty"),
        (Fault.dim_mismatch(), "action_dim is 8 but steps have 9"),
        (Fault.missing_field("action_chunk"), "action_chunk missing"),
        (Fault.missing_field("steps"), "steps missing"),
        (Fault.missing_field("action_dim"), "action_dim"),
        (Fault.missing_field("control_frequency_hz"), "control_frequency_hz"),
        (Fault.missing_field("action_space"), "action_space"),
        (Fault.zero_frequency(), "control_frequency_hz must be in"),
        (Fault.non_numeric(), "not a number"),
        (Fault.not_json(), "not JSON"),
        (Fault.status(200, body=[1, 2, 3]), "not a JSON object"),
    ],
)
def test_invalid_responses(
    sim: GatewaySimulator, policy: Policy, fault: Fault, message: str
) -> None:
    sim.inject(fault)
    error = _raised(policy)
    assert type(error) is InvalidResponse
    assert message in str(error)
    assert error.request_id and error.request_id.startswith("r-")
    # the handle stays usable: the next answer is good again
    assert policy.predict(OBS).action_chunk.steps.shape == (15, 8)


def test_next_action_buffer_stays_empty_after_invalid_response(
    sim: GatewaySimulator, policy: Policy
) -> None:
    sim.inject(Fault.nan())
    with pytest.raises(InvalidResponse):
        policy.next_action(OBS)
    assert policy.buffered == 0


@pytest.mark.parametrize(
    "fault", [Fault.reset(), Fault.html(502), Fault.html(504)], ids=["reset", "html502", "html504"]
)
def test_transport_failures_are_unavailable(
    sim: GatewaySimulator, policy: Policy, fault: Fault
) -> None:
    sim.inject(fault)
    error = _raised(policy)
    assert type(error) is Unavailable
    assert error.warming is False
    assert error.request_id and error.request_id.startswith("r-")


def test_read_timeout_is_unavailable(sim: GatewaySimulator) -> None:
    sim.inject(Fault.timeout(3.0))
    with connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url, timeout_s=0.3) as handle:
        error = _raised(handle)
    assert type(error) is Unavailable and not error.warming
    assert f"from {sim.url} within the 0.3 s request deadline" in str(error)


def test_connection_refused_is_unavailable(clean_env: object) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with connect("pi05-droid", api_key=TEST_KEY, base_url=f"http://127.0.0.1:{port}") as handle:
        error = _raised(handle)
    assert type(error) is Unavailable
    assert error.warming is False
    assert "ConnectError" in str(error)


def test_absurdly_nested_json_is_invalid_response(sim: GatewaySimulator, policy: Policy) -> None:
    sim.inject(Fault.status(200, body="[" * 100_000 + "]" * 100_000))
    error = _raised(policy)
    assert type(error) is InvalidResponse


def test_hostile_error_body_still_becomes_a_typed_error(
    sim: GatewaySimulator, policy: Policy
) -> None:
    huge = '{"detail": "busy", "code": "busy", "retry_after_s": 1' + "0" * 400 + "}"
    sim.inject(Fault.status(503, body=huge))
    error = _raised(policy)
    assert error.status == 503
    assert re.fullmatch(r"r-[0-9a-f]{8}", error.request_id or "")


@pytest.mark.parametrize("status", [503, 429])
def test_details_reason_is_kept_on_the_error(
    sim: GatewaySimulator, policy: Policy, status: int
) -> None:
    sim.inject(Fault.busy("gpu_busy", status=status, retry_after_s=2.0))
    error = _raised(policy)
    assert isinstance(error, Unavailable) and not error.warming
    assert error.reason == "gpu_busy" and error.retry_after_s == 2.0
    assert error.code == ("busy" if status == 429 else "unavailable")
    assert "reason=gpu_busy" in str(error)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            {"detail": "busy", "code": "unavailable", "details": {"reason": "queue_timeout"}},
            "queue_timeout",
        ),
        ({"detail": "busy", "details": {"reason": ["gpu_busy"]}}, None),  # not text
        ({"detail": "busy", "details": "gpu_busy"}, None),  # not an object
        ({"detail": {"status": "warming_up", "retry_after_s": 3}}, None),  # the older shape
        (
            '{"detail": "busy", "details": {"reason": "draining"}, "x": '
            + "[" * 5000
            + "]" * 5000
            + "}",
            "draining",
        ),
    ],
    ids=["newer", "reason-not-text", "details-not-an-object", "older", "past-the-parser-depth"],
)
def test_details_reason_as_sent(
    sim: GatewaySimulator, policy: Policy, body: Any, reason: str | None
) -> None:
    sim.inject(Fault.status(503, body=body))
    error = _raised(policy)
    assert isinstance(error, Unavailable) and error.reason == reason


def test_the_older_shape_of_a_busy_503_is_text_not_warming(clean_env: object) -> None:
    """The older shape has no ``details``; a busy 503 with a wait is not a cold worker."""
    with (
        GatewaySimulator(api_key=TEST_KEY, error_shape="older") as older,
        connect("pi05-droid", api_key=TEST_KEY, base_url=older.url) as handle,
    ):
        older.inject(Fault.busy(retry_after_s=2.0))
        error = _raised(handle)
    assert isinstance(error, Unavailable) and not error.warming and error.reason is None
    assert error.body == {"detail": "every model slot is busy"}


def test_plain_text_error_body_is_passed_through(sim: GatewaySimulator, policy: Policy) -> None:
    sim.inject(Fault.status(500, body="database on fire"))
    error = _raised(policy)
    assert type(error) is SequencesError
    assert error.message == "database on fire"
    assert error.body == "database on fire"


def test_every_error_class_is_exported_from_the_package() -> None:
    """``except sai.Stalled`` must work without knowing the module layout."""
    import inspect

    import sequence_ai_core as sai
    from sequence_ai_core import errors

    classes = [
        value
        for _, value in inspect.getmembers(errors, inspect.isclass)
        if issubclass(value, SequencesError) and value.__module__ == errors.__name__
    ]
    assert {cls.__name__ for cls in classes} >= {"Stalled", "TLSError", "ConfigurationError"}
    for cls in classes:
        assert getattr(sai, cls.__name__) is cls
        assert cls.__name__ in sai.__all__
    assert issubclass(sai.Stalled, sai.Unavailable)
    assert issubclass(sai.ConfigurationError, ValueError)


def test_the_hierarchy_drawn_in_errors_is_the_classes() -> None:
    """errors.py's docstring draws its classes as a tree: every class it defines is drawn,
    under the class it derives from."""
    from sequence_ai_core import errors

    drawn: dict[str, str | None] = {}
    parents: list[str] = []  # the class drawn last at each depth
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^(?P<indent>[ │]*)(?:[├└]── )?(?P<name>[A-Z]\w+)\s{2,}", line)
        if found is None or not hasattr(errors, found["name"]):
            continue
        depth = (len(found["indent"]) - 4) // 4 + (1 if "──" in line else 0)
        del parents[depth:]
        drawn[found["name"]] = parents[-1] if parents else None
        parents.append(found["name"])
    defined = {
        name: next((b.__name__ for b in cls.__bases__ if issubclass(b, SequencesError)), None)
        for name, cls in vars(errors).items()
        if isinstance(cls, type) and issubclass(cls, SequencesError)
    }
    assert drawn == defined
