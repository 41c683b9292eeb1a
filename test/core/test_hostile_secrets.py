"""The key in no text the package produces, whatever a hostile gateway sends back: a 200
that quotes the Authorization header, error bodies nested past any recursion limit, a key
straddling the point where a body is cut, JSON escapes. And the nesting must not cost an
error its type (a 401 stays ``AuthError``, a warming 503 stays retryable)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import TEST_KEY
from support.faultkit import MODEL, OBSERVATION, harness
from support.fuzzing import examples as fuzz
from support.hostile import (
    HOSTILE_EXAMPLES,
    HostileGateway,
    Request,
    answer,
    chunk_body,
    http_response,
)

from sequence_ai_core import (
    AuthError,
    InvalidRequest,
    InvalidResponse,
    OutOfCredit,
    PermissionDenied,
    SequencesError,
    Unavailable,
    connect,
)
from sequence_ai_core.tools.cli import main
from sequence_ai_sim import CATALOGUE, GatewaySimulator

#: Under faultkit's harness too: the key in no log line or output, nothing left running.
pytestmark = [pytest.mark.timeout(60), pytest.mark.usefixtures("harness")]
__all__ = ["harness"]  # the fixture, imported for pytest to find


def echo(status: int, shape: Any) -> Any:
    """A behaviour answering ``status`` with ``shape(authorization header)`` as the body."""

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        body = shape(request.headers.get("authorization", ""))
        sock.sendall(http_response(status, body))

    return behave


def texts(error: BaseException) -> list[str]:
    """Every text a user or a log could see from an error and its chain."""
    out: list[str] = []
    seen: BaseException | None = error
    while seen is not None:
        out += [str(seen), repr(seen), repr(getattr(seen, "body", None))]
        seen = seen.__cause__ or seen.__context__
    return out


def assert_no_key(found: list[str]) -> None:
    for text in found:
        assert TEST_KEY not in text
        assert TEST_KEY[:8] not in text  # not even the start of it


def predict_error(behaviour: Any) -> SequencesError:
    with (
        HostileGateway(behaviour) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        try:
            policy.predict(OBSERVATION)
        except SequencesError as exc:
            return exc
    raise AssertionError("the gateway's answer was accepted")


def test_a_200_quoting_the_authorization_header_is_redacted_everywhere() -> None:
    """Only 4xx bodies used to be redacted: this one reached the error and summary()."""

    def shape(auth: str) -> Any:
        body = chunk_body(MODEL)
        body["action_chunk"]["robot"] = 7  # invalid, so the body is quoted in the error
        body["echo"] = {"you sent": auth}
        return body

    error = predict_error(echo(200, shape))
    assert type(error) is InvalidResponse
    assert_no_key(texts(error))
    robot_events: list[str] = []
    with (
        HostileGateway(echo(200, shape)) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        outcome = policy.run(
            lambda: OBSERVATION,
            lambda a: robot_events.append("act"),
            max_actions=5,
            validate=lambda a: True,
        )
    assert outcome.reason == "raised:InvalidResponse"
    assert_no_key([outcome.summary(), repr(outcome), *texts(outcome.error or Exception())])


@pytest.mark.parametrize("depth", [600, 5000, 200_000 // 2])
def test_a_deeply_nested_401_stays_an_auth_error_without_the_key(depth: int) -> None:
    """600 levels parse but defeated the recursive redaction; 5000 do not parse at all."""

    def shape(auth: str) -> str:
        return '{"detail": "refused ' + auth + '", "x": ' + "[" * depth + "]" * depth + "}"

    error = predict_error(echo(401, shape))
    assert type(error) is AuthError, repr(error)
    assert_no_key(texts(error))


def test_a_deeply_nested_warming_503_stays_warming() -> None:
    def shape(auth: str) -> str:
        nested = "[" * 600 + "]" * 600
        return (
            '{"detail": {"status": "warming_up", "retry_after_s": 7, "message": "cold '
            + auth
            + '", "trace": '
            + nested
            + "}}"
        )

    error = predict_error(echo(503, shape))
    assert type(error) is Unavailable and error.warming and error.retry_after_s == 7.0
    assert_no_key(texts(error))


def test_a_key_straddling_the_cut_leaves_nothing_behind() -> None:
    """The body used to be cut to 2000 characters first, leaving the key's first ones."""

    def shape(auth: str) -> str:
        return "x" * 1990 + auth.removeprefix("Bearer ") + " trailing text that is not JSON"

    error = predict_error(echo(500, shape))
    assert type(error) is SequencesError
    assert_no_key(texts(error))


def test_a_key_hidden_behind_json_escapes_is_redacted() -> None:
    escaped = "".join(f"\\u{ord(c):04x}" for c in TEST_KEY)

    def shape(auth: str) -> str:
        return '{"detail": "bad key ' + escaped + '"}'

    error = predict_error(echo(401, shape))
    assert type(error) is AuthError
    assert_no_key(texts(error))


_EXPECTED = {
    200: InvalidResponse,
    400: InvalidRequest,
    401: AuthError,
    402: OutOfCredit,
    403: PermissionDenied,
    422: InvalidRequest,
    429: Unavailable,
    500: SequencesError,
    502: Unavailable,
    503: Unavailable,
}
_LEAF = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.just("KEY"))
_NESTED = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@pytest.fixture
def echoing() -> Any:
    state: dict[str, Any] = {}

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        auth = request.headers.get("authorization", "")
        text = json.dumps(state["body"]).replace('"KEY"', json.dumps(auth))
        text = "[" * state["depth"] + text + "]" * state["depth"]
        sock.sendall(http_response(state["status"], text))

    with (
        HostileGateway(behave) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        yield state, policy


@fuzz("echoed_bodies", HOSTILE_EXAMPLES)
@given(
    status=st.sampled_from(sorted(_EXPECTED)),
    body=st.one_of(_NESTED, st.fixed_dictionaries({"detail": _NESTED, "code": _LEAF})),
    depth=st.sampled_from([0, 1, 400, 1500]),
)
def test_any_echoing_body_yields_its_typed_error_without_the_key(
    echoing: Any, status: int, body: Any, depth: int
) -> None:
    state, policy = echoing
    state.update(status=status, body=body, depth=depth)
    with pytest.raises(SequencesError) as raised:
        policy.predict(OBSERVATION)
    assert isinstance(raised.value, _EXPECTED[status]), repr(raised.value)
    assert_no_key(texts(raised.value))


def test_a_key_quoted_in_a_malformed_header_is_not_carried_by_the_error_chain() -> None:
    """h11 quotes an illegal header name in its exception; a server can fill it with the
    Authorization header it received."""

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        name = request.headers.get("authorization", "").replace(" ", "(")
        sock.sendall(f"HTTP/1.1 200 OK\r\n{name}: x\r\nContent-Length: 2\r\n\r\n{{}}".encode())

    error = predict_error(behave)
    assert type(error) is Unavailable
    assert_no_key(texts(error))


def test_a_key_echoed_in_a_response_header_is_not_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """httpcore's DEBUG trace prints response headers."""
    caplog.set_level(logging.DEBUG)

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        echo = {"X-Echo": request.headers.get("authorization", "")}
        sock.sendall(http_response(200, chunk_body(MODEL), echo))

    with (
        HostileGateway(behave) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        policy.predict(OBSERVATION)
    assert any(r.name.startswith("httpcore") for r in caplog.records)
    assert_no_key([caplog.text, *(r.getMessage() for r in caplog.records)])


def test_log_redaction_lasts_while_any_transport_with_the_key_is_open() -> None:
    from sequence_ai_core.redaction import LOG_REDACTION

    before = LOG_REDACTION.users(TEST_KEY)  # other tests may leave handles open
    first = connect(MODEL, api_key=TEST_KEY, base_url="http://127.0.0.1:1")
    second = connect(MODEL, api_key=TEST_KEY, base_url="http://127.0.0.1:1")
    first.close()
    assert LOG_REDACTION.users(TEST_KEY) == before + 1
    assert TEST_KEY in LOG_REDACTION.secrets
    second.close()
    assert LOG_REDACTION.users(TEST_KEY) == before


# ------------------------------------------------------------- redaction is for outward text


@pytest.mark.parametrize("key", ["k", "a", "_", "0"])
def test_a_one_character_key_gets_a_valid_chunk(key: str) -> None:
    """Answers used to be redacted before they were parsed: with the key ``k``,
    ``"action_chunk"`` read ``"action_chun***"`` and a valid answer was refused."""
    with (
        GatewaySimulator(api_key=key) as sim,
        connect(MODEL, api_key=key, base_url=sim.url) as policy,
    ):
        assert policy.describe().short_id == MODEL  # the catalogue is parsed as sent too
        prediction = policy.predict(OBSERVATION)
    chunk = prediction.action_chunk
    assert chunk.action_dim == CATALOGUE[MODEL].action_dim
    assert chunk.action_space == CATALOGUE[MODEL].action_space
    assert prediction.model == CATALOGUE[MODEL].id and prediction.id.startswith("act-")


@pytest.mark.parametrize("key", ["n", "w"])
def test_a_short_key_does_not_change_what_an_error_means(key: str) -> None:
    """A warming 503 is read from the body as sent: redacted first, ``"warming"`` no longer
    read as one with the key ``n``. Only the texts the error carries are redacted."""
    with (
        GatewaySimulator(api_key=key, cold_start_s=60.0) as sim,
        connect(MODEL, api_key=key, base_url=sim.url) as policy,
        pytest.raises(Unavailable) as raised,
    ):
        policy.predict(OBSERVATION)
    assert raised.value.warming and raised.value.retry_after_s is not None
    assert key not in raised.value.message and key not in str(raised.value.code)


def test_a_key_inside_a_valid_answer_reaches_the_caller_unchanged() -> None:
    """The answer is the caller's data: a key the server puts into it (plain, or behind JSON
    escapes) is delivered as sent, and still reaches no log (the harness checks)."""
    escaped = "".join(f"\\u{ord(c):04x}" for c in TEST_KEY)

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        body = chunk_body(MODEL)
        body.update(id=key, usage={"key": key}, warnings=[f"key {key} expires soon", "ESCAPED"])
        text = json.dumps(body).replace('"ESCAPED"', f'"{escaped}"')
        sock.sendall(http_response(200, text))

    with (
        HostileGateway(behave) as gateway,
        connect(MODEL, api_key=TEST_KEY, base_url=gateway.url) as policy,
    ):
        prediction = policy.predict(OBSERVATION)
    assert prediction.id == TEST_KEY
    assert prediction.warnings == (f"key {TEST_KEY} expires soon", TEST_KEY)
    assert prediction.usage == {"key": TEST_KEY}


def _escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


@pytest.mark.parametrize(
    "place",
    [
        "action_space",  # quoted whole: unknown action_space '...'
        "control_frequency_hz",  # quoted cut to 40 characters: not a number: '...'
        "action_dim",
        "step_value",
        "step_index",
        "object_key",  # a key of the body, kept on the error
    ],
)
@pytest.mark.parametrize("escape", [False, True], ids=["plain", "json-escaped"])
def test_an_invalid_answer_quoting_the_key_is_redacted_before_it_is_cut(
    place: str, escape: bool
) -> None:
    """A bad answer's values are quoted in the error: redacted first, then cut, so a key
    past the 40th character of a value leaves not even its first characters."""

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        value = "x" * 30 + "KEY"
        body = chunk_body(MODEL)
        chunk = body["action_chunk"]
        if place == "step_value":
            chunk["steps"][1]["values"][0] = value
        elif place == "step_index":
            chunk["steps"][1]["index"] = value
        elif place == "object_key":
            chunk["KEY"] = 1
            chunk["robot"] = 7
        else:
            chunk[place] = value
        text = json.dumps(body).replace("KEY", _escaped(key) if escape else key)
        sock.sendall(http_response(200, text))

    error = predict_error(behave)
    assert type(error) is InvalidResponse
    assert_no_key(texts(error))


def test_an_error_quoting_the_key_behind_escapes_is_redacted_before_it_is_cut() -> None:
    """Message, hint, code, request id and the kept body quote the server's text: each is
    redacted after the JSON escapes are decoded, and before it is cut."""

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        key = _escaped(request.headers.get("authorization", "").removeprefix("Bearer "))
        body = {
            "detail": "m" * 490 + "KEY",  # the message is cut to 500 characters
            "hint": "h" * 195 + "KEY",  # the hint to 200
            "code": "KEY",
            "request_id": "KEY",
            "details": {"reason": "KEY", "KEY": "KEY"},
        }
        text = json.dumps(body).replace("KEY", key)
        sock.sendall(http_response(503, text))

    error = predict_error(behave)
    assert type(error) is Unavailable and not error.warming
    assert_no_key([*texts(error), str(error.code), str(error.body)])


def test_a_key_echoed_in_a_refused_header_is_not_quoted() -> None:
    """A body refused for its Content-Encoding used to quote the header, key and all."""

    def behave(request: Request, sock: Any, gateway: HostileGateway) -> None:
        auth = request.headers.get("authorization", "")
        headers = {"Content-Type": "application/json", "Content-Encoding": "x" * 20 + auth}
        sock.sendall(http_response(200, chunk_body(MODEL), headers))

    error = predict_error(behave)
    assert type(error) is InvalidResponse and "content encoding" in error.message
    assert_no_key(texts(error))


def test_sequence_ai_models_does_not_print_a_key_the_catalogue_quotes(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The catalogue is parsed as sent; the table printed from it is outward text."""

    def catalogue(request: Request, sock: Any, gateway: HostileGateway) -> None:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        entries = [model.catalogue_entry() for model in CATALOGUE.values()]
        for entry in entries:
            entry["robot"] = f"arm-{key}"
        sock.sendall(http_response(200, {"data": entries}))

    monkeypatch.setenv("SEQUENCES_API_KEY", TEST_KEY)
    with HostileGateway(answer(chunk_body(MODEL)), catalogue=catalogue) as gateway:
        assert main(["--base-url", gateway.url, "models"]) == 0
    out, err = capfd.readouterr()
    assert "arm-***" in out
    assert_no_key([out, err])
