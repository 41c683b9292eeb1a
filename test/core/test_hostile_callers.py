"""Careless callers: ordinary mistakes a new user makes must stop the run with a hold and a
clear, typed reason, never hang, never let an action through unchecked, never escape as an
untyped error (and never echo a credentials file)."""

from __future__ import annotations

import inspect
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import TEST_KEY
from support.faultkit import DIM, MODEL, OBSERVATION, camera_frames
from support.fuzzing import examples as fuzz
from support.hostile import HOSTILE_EXAMPLES

from sequence_ai_core import (
    AuthError,
    ChunkExhausted,
    InvalidRequest,
    Observation,
    Policy,
    Proprioception,
    SequencesError,
    connect,
)
from sequence_ai_core.credentials import resolve_api_key
from sequence_ai_core.errors import ConfigurationError
from sequence_ai_sim import Fault, GatewaySimulator

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def sim() -> Any:
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.01) as server:
        yield server


@pytest.fixture
def policy(sim: GatewaySimulator) -> Any:
    with connect(MODEL, api_key=TEST_KEY, base_url=sim.url) as handle:
        yield handle


class Robot:
    def __init__(self) -> None:
        self.events: list[str] = []

    def act(self, action: Any) -> None:
        self.events.append("act")

    def hold(self) -> None:
        self.events.append("hold")


def run(policy: Policy, robot: Robot, **kwargs: Any) -> Any:
    kwargs.setdefault("validate", lambda a: True)
    observe = kwargs.pop("observe", lambda: OBSERVATION)
    return policy.run(observe, robot.act, hold=robot.hold, **{"max_actions": 30, **kwargs})


# ------------------------------------------------------------------ validate


@pytest.mark.parametrize(
    "verdict", [(False, "too fast"), "False", None, 0, 1, np.array([True]), [True]]
)
def test_validate_must_return_a_real_boolean(policy: Policy, verdict: Any) -> None:
    """``(False, "reason")`` and ``"False"`` are truthy: every action used to reach act()."""
    robot = Robot()
    outcome = run(policy, robot, validate=lambda a: verdict)
    assert outcome.reason == "validate" and robot.events == ["hold"]
    assert isinstance(outcome.error, TypeError) and "True or False" in str(outcome.error)


@pytest.mark.parametrize("verdict", [True, np.bool_(True), np.all(np.ones(3) > 0)])
def test_validate_may_return_bool_or_numpy_bool(policy: Policy, verdict: Any) -> None:
    outcome = run(policy, Robot(), validate=lambda a: verdict, max_actions=5)
    assert outcome.reason == "completed", outcome.summary()


@fuzz("validate_verdicts", HOSTILE_EXAMPLES)
@given(
    verdict=st.one_of(
        st.integers(), st.text(), st.floats(), st.lists(st.booleans()), st.tuples(st.booleans())
    )
)
def test_no_non_boolean_verdict_lets_an_action_through(policy: Policy, verdict: Any) -> None:
    robot = Robot()
    outcome = run(policy, robot, validate=lambda a: verdict, max_actions=3)
    assert "act" not in robot.events and outcome.reason == "validate"


# ------------------------------------------------------------------ observations


def _obs(joints: int, frames: Any) -> Observation:
    return Observation(Proprioception(joint_positions=[0.0] * joints), images=frames)


@pytest.mark.parametrize(
    ("observation", "field"),
    [
        (_obs(DIM - 1, ()), "observation.images is empty"),
        (_obs(DIM - 1, camera_frames("pi05-droid")), "observation.images[0].view"),
        (_obs(DIM - 2, camera_frames(MODEL)), "observation.proprioception.joint_positions"),
        (_obs(DIM + 1, camera_frames(MODEL)), "observation.proprioception.joint_positions"),
    ],
)
def test_observations_the_catalogue_entry_cannot_take_are_refused_before_sending(
    sim: GatewaySimulator, policy: Policy, observation: Observation, field: str
) -> None:
    """No images, a view the model does not have, a joint short: used to be sent, and the
    run "completed"."""
    robot = Robot()
    before = sim.stats()["act_requests"]
    outcome = run(policy, robot, observe=lambda: observation)
    assert outcome.reason == "raised:InvalidRequest" and field in str(outcome.error)
    assert robot.events == ["hold"] and sim.stats()["act_requests"] == before


def test_a_subset_of_the_camera_views_is_taken(policy: Policy) -> None:
    """0.1.0-era code sent one camera to two-camera models, and the gateway served it."""
    one_view = _obs(DIM - 1, camera_frames(MODEL)[:1])
    outcome = run(policy, Robot(), observe=lambda: one_view, max_actions=3)
    assert outcome.reason == "completed", outcome.summary()


def test_observe_returning_none_forever_ends_the_run_with_a_reason(policy: Policy) -> None:
    """A forgotten ``return`` used to make run() wait silently forever."""
    robot = Robot()
    outcome = run(policy, robot, observe=lambda: None, stall_timeout_s=0.3)
    assert isinstance(outcome.error, ChunkExhausted) and "observe() returned None" in str(
        outcome.error
    )
    assert robot.events == ["hold"]


# ------------------------------------------------------------------ keywords


@pytest.mark.parametrize(
    "keyword",
    [
        {"validator": lambda a: True},
        {"startup_timeout": 5.0},
        {"max_inflight": 2},
        {"seed": 1},
    ],
)
def test_misspelled_or_model_keywords_are_a_type_error_and_nothing_is_sent(
    sim: GatewaySimulator, policy: Policy, keyword: dict[str, Any]
) -> None:
    before = sim.stats()["requests"]
    with pytest.raises(TypeError):
        policy.run(lambda: OBSERVATION, lambda a: None, max_actions=3, **keyword)
    assert sim.stats()["requests"] == before


def test_model_options_go_in_one_explicit_place(sim: GatewaySimulator, policy: Policy) -> None:
    run(policy, Robot(), max_actions=3, options={"seed": 5, "action_horizon": 3})
    assert sim.received[-1]["options"] == {"seed": 5, "action_horizon": 3}


def test_help_shows_the_real_keywords() -> None:
    parameters = inspect.signature(Policy.run).parameters
    for name in ("validate", "hold", "startup_timeout_s", "max_in_flight", "options"):
        assert name in parameters
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    assert "options" in (Policy.run.__doc__ or "")


# ------------------------------------------------------------------ hold raising


def test_hold_raising_does_not_replace_the_typed_error(
    sim: GatewaySimulator, policy: Policy, caplog: pytest.LogCaptureFixture
) -> None:
    def hold() -> None:
        raise RuntimeError("driver gone")

    sim.inject(Fault.status(401))
    outcome = policy.run(
        lambda: OBSERVATION, lambda a: None, max_actions=5, hold=hold, validate=lambda a: True
    )
    assert isinstance(outcome.error, AuthError)
    assert any("hold() raised RuntimeError" in r.getMessage() for r in caplog.records)


def test_hold_raising_does_not_replace_the_callers_exception(policy: Policy) -> None:
    def act(action: Any) -> None:
        raise ValueError("act failed")

    def hold() -> None:
        raise RuntimeError("hold failed")

    with pytest.raises(ValueError, match="act failed"):
        policy.run(lambda: OBSERVATION, act, max_actions=5, hold=hold, validate=lambda a: True)


# ------------------------------------------------------------------ SIGTERM

_SIGTERM_SCRIPT = """
import sys
sys.path.insert(0, {test_dir!r})
from support.faultkit import MODEL, OBSERVATION
from sequence_ai_core import connect
from sequence_ai_sim import GatewaySimulator
KEY = "sk-test-0123456789abcdef"
with GatewaySimulator(api_key=KEY, latency_s=0.01) as sim, connect(
    MODEL, api_key=KEY, base_url=sim.url
) as policy:
    def act(action):
        print("acting", flush=True)
    def hold():
        print("HOLD", flush=True)
    policy.run(lambda: OBSERVATION, act, max_actions=100000, validate=lambda a: True, hold=hold)
"""


def test_sigterm_during_run_holds_then_exits() -> None:
    """docker stop / systemd send SIGTERM: it used to kill the process with no hold."""
    script = _SIGTERM_SCRIPT.format(test_dir=str(Path(__file__).parents[1]))
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "acting"
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert out.strip().splitlines()[-1] == "HOLD" and out.count("HOLD") == 1


def test_run_off_the_main_thread_leaves_signals_alone(policy: Policy) -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen: list[Any] = []

    def act(action: Any) -> None:
        seen.append(signal.getsignal(signal.SIGTERM))

    worker = threading.Thread(
        target=lambda: policy.run(lambda: OBSERVATION, act, max_actions=3, validate=lambda a: True)
    )
    worker.start()
    worker.join(30)
    assert seen and all(handler is before for handler in seen)
    assert signal.getsignal(signal.SIGTERM) is before


# ------------------------------------------------------------------ settings


def test_a_missing_ssl_cert_file_is_a_configuration_error(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigurationError, match="SSL_CERT_FILE"):
        connect(MODEL, base_url="https://gateway.example")


def test_an_ssl_cert_file_that_is_not_pem_is_a_configuration_error(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("this is not a certificate\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(junk))
    with pytest.raises(ConfigurationError, match="PEM"):
        connect(MODEL, base_url="https://gateway.example")


def test_a_socks_proxy_without_support_is_a_configuration_error(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://user:secret@127.0.0.1:1080")
    with pytest.raises(ConfigurationError, match="httpx\\[socks\\]") as raised:
        connect(MODEL, base_url="https://gateway.example")
    assert "secret" not in str(raised.value)  # proxy credentials are not echoed


@pytest.mark.parametrize("timeout_s", [float("inf"), float("nan"), 0.0, -1.0, 1e9])
def test_an_unusable_timeout_is_a_configuration_error(clean_env: Path, timeout_s: float) -> None:
    with pytest.raises(ConfigurationError, match="timeout_s"):
        connect(MODEL, base_url="http://127.0.0.1:1", timeout_s=timeout_s)


def test_a_credentials_file_that_is_not_utf8_is_typed_and_never_echoed(
    clean_env: Path,
) -> None:
    path = clean_env / "sequence-ai" / "credentials"
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(b"\xff\xfe" + TEST_KEY.encode() + b"\n")
    path.chmod(0o600)
    with pytest.raises(ConfigurationError, match="not UTF-8") as raised:
        resolve_api_key()
    chain: list[BaseException] = []
    error: BaseException | None = raised.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert all(TEST_KEY not in repr(e) and TEST_KEY not in str(e) for e in chain)
    assert all(not isinstance(e, UnicodeDecodeError) for e in chain)


def test_configuration_errors_are_sequences_errors_and_value_errors() -> None:
    assert issubclass(ConfigurationError, SequencesError)
    assert issubclass(ConfigurationError, ValueError)


def test_check_observation_is_public_for_loops_of_their_own(policy: Policy) -> None:
    policy.check_observation(_obs(DIM - 1, ()))  # nothing known yet: nothing checked
    policy.describe()
    policy.check_observation(OBSERVATION)
    with pytest.raises(InvalidRequest, match=r"observation\.images"):
        policy.check_observation(_obs(DIM - 1, ()))
