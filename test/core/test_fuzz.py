"""Property tests: nothing a gateway sends and nothing a caller passes escapes as anything but
a well-formed chunk, a typed ``SequencesError``, or a clear ``ValueError`` raised before a
request leaves the machine.

Deterministic (``derandomize=True``, no example database) and modest in size so ``make test``
stays fast; ``FUZZ_EXAMPLES`` is quoted in docs/safety.md.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import TEST_KEY
from support.fuzzing import DIM, examples, gateway, policy

from sequence_ai_core import (
    AuthError,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    SequencesError,
    Unavailable,
)
from sequence_ai_core.gateway.error_map import error_from_response
from sequence_ai_core.gateway.wire import parse_prediction
from sequence_ai_core.policy import Policy
from sequence_ai_core.types import (
    ACTION_SPACES,
    Observation,
    Prediction,
    Proprioception,
)
from sequence_ai_sim import Fault, GatewaySimulator

__all__ = ["gateway", "policy"]  # the fixtures, imported for pytest to find

#: Examples per property; docs/safety.md quotes the total.
FUZZ_EXAMPLES = {
    "response_bodies": 300,
    "error_bodies": 300,
    "bodies_through_simulator": 60,
    "errors_through_simulator": 60,
}


def fuzz(name: str, table: dict[str, int] = FUZZ_EXAMPLES) -> settings:
    return examples(name, table)


# ------------------------------------------------------------------ strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
BAD_NUMBERS = [math.nan, math.inf, -math.inf, "1.0", None, True, False, [], {}, 10**400]
CHUNK_KEYS = [
    "steps",
    "robot",
    "action_space",
    "action_dim",
    "control_frequency_hz",
    "covers_seconds",
]


@st.composite
def act_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A valid act body, then zero to three mutations of the kind a broken gateway makes."""
    dim = draw(st.integers(1, 9))
    n = draw(st.integers(0, 12))
    number = st.floats(-1e6, 1e6, allow_nan=False) | st.integers(-(10**6), 10**6)
    rows = draw(st.lists(st.lists(number, min_size=dim, max_size=dim), min_size=n, max_size=n))
    flat = draw(st.booleans())
    steps: list[Any] = rows if flat else [{"index": i, "values": r} for i, r in enumerate(rows)]
    chunk: dict[str, Any] = {
        "steps": steps,
        "robot": "ur5e",
        "action_space": draw(st.sampled_from(ACTION_SPACES)),
        "action_dim": dim,
        "control_frequency_hz": draw(st.floats(0.5, 500.0)),
        "covers_seconds": 1.0,
    }
    body: dict[str, Any] = {"id": "act-1", "model": "m", "action_chunk": chunk, "perf": {}}
    for _ in range(draw(st.integers(0, 3))):
        mutate(draw, body)
    return body


def mutate(draw: st.DrawFn, body: dict[str, Any]) -> None:
    chunk = body.get("action_chunk")
    if not isinstance(chunk, dict):
        return
    rows = chunk.get("steps")
    kind = draw(st.sampled_from(["value", "short", "long", "field", "drop", "index", "body"]))
    if kind in ("value", "short", "long", "index") and isinstance(rows, list) and rows:
        i = draw(st.integers(0, len(rows) - 1))
        row = rows[i].get("values") if isinstance(rows[i], dict) else rows[i]
        if kind == "value" and isinstance(row, list) and row:
            row[draw(st.integers(0, len(row) - 1))] = draw(st.sampled_from(BAD_NUMBERS))
        elif kind == "short" and isinstance(row, list) and row:
            row.pop()
        elif kind == "long" and isinstance(row, list):
            row.append(0.5)
        elif kind == "index" and isinstance(rows[i], dict):
            rows[i]["index"] = draw(json_values)
    elif kind == "field":
        chunk[draw(st.sampled_from(CHUNK_KEYS))] = draw(json_values)
    elif kind == "drop":
        chunk.pop(draw(st.sampled_from(CHUNK_KEYS)), None)
    elif kind == "body":
        body[draw(st.sampled_from(["action_chunk", "id", "perf", "warnings"]))] = draw(json_values)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def declared_rows(body: Any) -> list[Any] | None:
    """The step rows as sent, or None when the body has no list of steps at all."""
    chunk = body.get("action_chunk") if isinstance(body, dict) else None
    steps = chunk.get("steps") if isinstance(chunk, dict) else None
    if not isinstance(steps, list):
        return None
    return [s.get("values") if isinstance(s, dict) else s for s in steps]


def steps_are_clean(body: Any) -> bool:
    """Independent oracle for the steps alone: non-empty, rectangular, all finite numbers of
    the declared size. A body failing this must never become a chunk."""
    rows = declared_rows(body)
    dim = body["action_chunk"].get("action_dim") if rows is not None else None
    if rows is None or not rows or not is_number(dim) or isinstance(dim, float):
        return False
    for row in rows:
        if not isinstance(row, list) or len(row) != dim:
            return False
        for value in row:
            if not is_number(value) or not math.isfinite(float(value)):
                return False
    return True


def assert_well_formed(prediction: Prediction, body: dict[str, Any]) -> None:
    chunk = prediction.action_chunk
    steps = chunk.steps
    assert isinstance(steps, np.ndarray) and steps.dtype == np.float64
    assert steps.ndim == 2 and steps.shape[0] >= 1 and steps.shape[1] == chunk.action_dim >= 1
    assert np.all(np.isfinite(steps))
    assert math.isfinite(chunk.control_frequency_hz) and chunk.control_frequency_hz > 0
    assert chunk.action_space in ACTION_SPACES
    rows = declared_rows(body)
    assert rows is not None and np.array_equal(steps, np.array(rows, dtype=np.float64))


# ------------------------------------------------------------------ response bodies (pure)


@fuzz("response_bodies")
@given(body=act_bodies() | json_values)
def test_response_body_is_a_clean_chunk_or_invalid_response(body: Any) -> None:
    original = copy.deepcopy(body)
    try:
        prediction = parse_prediction(body, request_id="r-0000fuzz", latency_s=0.1)
    except InvalidResponse as error:
        assert error.request_id == "r-0000fuzz" and error.status == 200
        assert str(error) and repr(error)
        return
    assert steps_are_clean(original), "a malformed chunk was accepted"
    assert_well_formed(prediction, original)


# ------------------------------------------------------------------ error bodies (pure)

STATUSES = st.integers(100, 199) | st.integers(300, 599)


@st.composite
def error_bodies(draw: st.DrawFn) -> Any:
    newer = st.fixed_dictionaries(
        {},
        optional={
            "detail": json_values,
            "code": st.sampled_from(["warming", "busy", "unauthenticated", "forbidden"])
            | json_values,
            "retryable": json_values,
            "retry_after_s": json_values | st.sampled_from(["inf", "1e999", "-1", "nan", "12"]),
            "request_id": json_values,
            "hint": json_values,
        },
    )
    older = st.fixed_dictionaries(
        {
            "detail": st.fixed_dictionaries(
                {}, optional={k: json_values for k in ("status", "retry_after_s", "message")}
            )
        }
    )
    return draw(newer | older | json_values | st.text(max_size=40))


def allowed_classes(status: int) -> tuple[type[SequencesError], ...]:
    """The contract table; a body ``code`` may only move an error to auth or credit."""
    if status in (401, 403):
        return (AuthError,)
    if status == 402:
        return (OutOfCredit, AuthError)
    if status in (400, 404, 409, 410, 413, 422):
        return (InvalidRequest, AuthError, OutOfCredit)
    if status in (429, 502, 503, 504):
        return (Unavailable, AuthError, OutOfCredit)
    return (SequencesError,)


@fuzz("error_bodies")
@given(
    status=STATUSES,
    body=error_bodies(),
    retry_after=st.none()
    | st.sampled_from(["5", "inf", "nan", "-3", "Wed, 21 Oct 2015 07:28:00 GMT", "soon"]),
)
def test_error_body_becomes_a_typed_error(status: int, body: Any, retry_after: str | None) -> None:
    headers = {} if retry_after is None else {"retry-after": retry_after}
    error = error_from_response(status, body, headers=headers, request_id="r-0000fuzz")
    assert isinstance(error, allowed_classes(status)), (status, type(error))
    assert error.status == status and error.body is body
    assert isinstance(str(error), str) and isinstance(repr(error), str)
    if isinstance(error, Unavailable):
        assert error.warming is False or status == 503
        wait = error.retry_after_s
        # A controller sleeps on this number: it must be a real, finite wait.
        assert wait is None or (math.isfinite(wait) and wait >= 0), wait
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, str) and detail.strip():
        assert detail in str(error)  # the server's message passes through untouched


# ------------------------------------------------------------------ through the simulator


OBSERVATION = Observation(Proprioception(joint_positions=[0.0] * DIM))


@fuzz("bodies_through_simulator")
@given(body=act_bodies() | json_values | st.binary(max_size=64))
def test_raw_bodies_through_the_simulator(
    body: Any, gateway: GatewaySimulator, policy: Policy
) -> None:
    payload = body if isinstance(body, (dict, list, str, bytes)) else [body]
    gateway.inject(Fault.status(200, body=payload))
    original = copy.deepcopy(body)
    try:
        prediction = policy.predict(OBSERVATION)
    except InvalidResponse:
        return
    assert isinstance(original, dict) and steps_are_clean(original)
    assert_well_formed(prediction, original)


@fuzz("errors_through_simulator")
@given(status=st.integers(400, 599), body=error_bodies() | st.binary(max_size=64))
def test_error_answers_through_the_simulator(
    status: int, body: Any, gateway: GatewaySimulator, policy: Policy
) -> None:
    payload = body if isinstance(body, (dict, list, str, bytes)) else [body]
    gateway.inject(Fault.status(status, body=payload))
    with pytest.raises(SequencesError) as raised:
        policy.predict(OBSERVATION)
    error = raised.value
    assert isinstance(error, allowed_classes(status)), (status, type(error))
    assert error.status == status
    assert error.request_id is not None and error.request_id.startswith("r-")
    assert TEST_KEY not in str(error) + repr(error)


def test_fuzz_example_total() -> None:
    """docs/safety.md quotes this total (with test_fuzz_inputs.INPUT_EXAMPLES)."""
    assert sum(FUZZ_EXAMPLES.values()) == 720
