"""The control plane's messages from the core's records (sequence_ai_ros/outcome_message.py),
against doubles of the classes rosidl generates from msg/RunOutcome.msg and
action/RunEpisode.action.

The generated classes exist only after a colcon build. The doubles are made from the same
definitions (parsed with rosbags, beside Humble's builtin_interfaces) and are as strict as
rosidl_generator_py's code: the fields are the class's only slots (another attribute or
constructor keyword is refused), each starts at its type's default, and each setter asserts
what the generated one does: an int in range for an integer type, a float for a float type
(NaN and the infinities included), a str for a string, the sub-message's own class. ROS-free:
it runs in the plain venv.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import re
import time
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rosbags.typesys import Stores, get_types_from_msg, get_typestore
from rosbags.typesys.base import Nodetype
from support import TEST_KEY

from sequence_ai_core.errors import ChunkRefused
from sequence_ai_core.playback.engine import EngineConfig, Phase, PlaybackEngine
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import Policy, connect
from sequence_ai_ros.outcome_message import (
    COUNTS,
    DETAILED,
    FIGURES,
    STATES,
    error_text,
    feedback_message,
    feedback_state,
    outcome_message,
)
from sequence_ai_sim import GatewaySimulator, SimulatedArm

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "sequence_ai_ros"
RUN_OUTCOME = f"{PACKAGE}/msg/RunOutcome"
FEEDBACK = f"{PACKAGE}/action/RunEpisode_Feedback"
TIME = "builtin_interfaces/msg/Time"
HALVES = ("Goal", "Result", "Feedback")
SECRET = "sk-test-123"
UINT32_MAX = 2**32 - 1
MODEL = "lingbot-vla-v2-6b"  # 30 Hz: short runs

Fields = list[tuple[str, Any]]


# ---------------------------------------------------------------------- the doubles


def definitions() -> dict[str, Fields]:
    """Humble's definitions and the package's RunOutcome and RunEpisode halves, each part
    parsed as a msg of the package (a bare type name is the package's msg, as in rosidl)."""
    defs = {
        name: fields for name, (_, fields) in get_typestore(Stores.ROS2_HUMBLE).fielddefs.items()
    }
    files = [("msg/RunOutcome.msg", ("",)), ("action/RunEpisode.action", HALVES)]
    for rel, halves in files:
        path = ROOT / rel
        parts = re.split(r"^---[ \t]*$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
        assert len(parts) == len(halves), rel
        for half, part in zip(halves, parts, strict=True):
            stem = f"{path.stem}_{half}" if half else path.stem
            ((_, fields),) = get_types_from_msg(part, f"{PACKAGE}/msg/{stem}").values()
            defs[f"{PACKAGE}/{path.parent.name}/{stem}"] = fields
    return defs


INT_RANGES = {
    f"{sign}int{bits}": (-(2 ** (bits - 1)), 2 ** (bits - 1)) if sign == "" else (0, 2**bits)
    for sign in ("", "u")
    for bits in (8, 16, 32, 64)
}
FLOAT_MAX = {"float32": 3.402823466e38, "float64": 1.7976931348623157e308}


class MessageClasses:
    """Doubles of the generated message classes, one class per type, made on first use."""

    def __init__(self, defs: dict[str, Fields]) -> None:
        self.defs = defs
        self._made: dict[str, type] = {}

    def __getitem__(self, full: str) -> type:
        if full not in self._made:
            self._made[full] = self._make(full)
        return self._made[full]

    def default(self, spec: Any) -> Any:
        kind, detail = spec
        if kind == Nodetype.NAME:
            return self[detail]()
        assert kind == Nodetype.BASE, f"the doubles model base and sub-message fields: {spec}"
        typename = detail[0]
        if typename == "bool":
            return False
        if typename in INT_RANGES:
            return 0
        if typename in FLOAT_MAX:
            return 0.0
        assert typename == "string", typename
        return ""

    def check(self, name: str, spec: Any, value: Any) -> None:
        """rosidl_generator_py's setter assertions (AssertionError, as there)."""
        kind, detail = spec
        if kind == Nodetype.NAME:
            cls = self[detail]
            if not isinstance(value, cls):
                raise AssertionError(f"The '{name}' field must be a sub message of type {cls}")
            return
        typename, bound = detail
        if typename == "bool":
            ok = isinstance(value, bool)
        elif typename in INT_RANGES:
            low, high = INT_RANGES[typename]
            ok = isinstance(value, int) and low <= value < high
        elif typename in FLOAT_MAX:
            most = FLOAT_MAX[typename]
            ok = isinstance(value, float) and (
                not (value < -most or value > most) or math.isinf(value)
            )
        else:
            ok = isinstance(value, str) and (not bound or len(value) <= bound)
        if not ok:
            raise AssertionError(f"The '{name}' field must be a {typename}, not {value!r}")

    def _make(self, full: str) -> type:
        fields = self.defs[full]
        names = [name for name, _ in fields]
        classes = self

        def __init__(msg: Any, **kwargs: Any) -> None:
            unknown = sorted(set(kwargs) - set(names))
            if unknown:
                raise AssertionError(f"Invalid arguments passed to constructor: {unknown}")
            for name, spec in fields:
                setattr(msg, name, kwargs[name] if name in kwargs else classes.default(spec))

        def __eq__(msg: Any, other: object) -> bool:
            return type(other) is type(msg) and all(
                getattr(msg, n) == getattr(other, n) for n in names
            )

        def __repr__(msg: Any) -> str:
            return f"{full}({', '.join(f'{n}={getattr(msg, n)!r}' for n in names)})"

        def field(name: str, spec: Any) -> property:
            def get(msg: Any) -> Any:
                return getattr(msg, f"_{name}")

            def put(msg: Any, value: Any) -> None:
                classes.check(name, spec, value)
                setattr(msg, f"_{name}", value)

            return property(get, put)

        namespace: dict[str, Any] = {
            "__slots__": tuple(f"_{n}" for n in names),
            "__init__": __init__,
            "__eq__": __eq__,
            "__hash__": None,
            "__repr__": __repr__,
            "FIELDS": tuple(names),
        }
        namespace.update({name: field(name, spec) for name, spec in fields})
        return type(full.rpartition("/")[2], (), namespace)


@pytest.fixture(scope="module")
def types() -> MessageClasses:
    return MessageClasses(definitions())


def _msg_field_names(text: str) -> list[str]:
    """The field names of a .msg text, read by hand: the second word of each line that is
    neither blank nor a comment (the files have no constants)."""
    names = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            assert len(words) == 2, line
            names.append(words[1])
    return names


def test_the_doubles_have_the_files_fields_and_are_as_strict_as_generated_classes(
    types: MessageClasses,
) -> None:
    msg_cls, feedback_cls, time_cls = types[RUN_OUTCOME], types[FEEDBACK], types[TIME]
    assert list(msg_cls.FIELDS) == _msg_field_names((ROOT / "msg" / "RunOutcome.msg").read_text())  # type: ignore[attr-defined]
    action = (ROOT / "action" / "RunEpisode.action").read_text().split("\n---\n")
    assert list(feedback_cls.FIELDS) == _msg_field_names(action[2])  # type: ignore[attr-defined]
    assert list(time_cls.FIELDS) == ["sec", "nanosec"]  # type: ignore[attr-defined]
    msg = msg_cls()
    # rosidl's defaults
    assert (msg.episode, msg.model, msg.stamp) == (0, "", time_cls())
    assert type(msg.episode) is int and type(msg.elapsed_s) is float and msg.elapsed_s == 0.0
    # only the fields
    with pytest.raises(AttributeError):
        msg.stalls = 1
    with pytest.raises(AssertionError, match="constructor"):
        msg_cls(stalls=1)
    # the setters' assertions
    wrong = [
        ("episode", -1), ("episode", 2**32), ("episode", 1.0), ("elapsed_s", 1),
        ("elapsed_s", "1"), ("model", None), ("stamp", feedback_cls()), ("stamp", 0),
    ]  # fmt: skip
    for name, value in wrong:
        with pytest.raises(AssertionError, match=name):
            setattr(msg, name, value)
    msg.episode, msg.seam_step_p95, msg.max_gap_s = UINT32_MAX, math.nan, math.inf
    assert (msg.episode, msg.max_gap_s) == (UINT32_MAX, math.inf) and math.isnan(msg.seam_step_p95)
    assert msg_cls(episode=3, stamp=time_cls(sec=1)) == msg_cls(episode=3, stamp=time_cls(sec=1))
    assert msg_cls(episode=3) != msg_cls(episode=4)


# ---------------------------------------------------------------------- outcome_message


def outcome(**changes: Any) -> RunOutcome:
    """A core RunOutcome whose every figure is different from the others and from its
    field's default, so that a figure dropped, swapped or defaulted shows."""
    values: dict[str, Any] = dict(
        actions=101, chunks=102, elapsed_s=1.5, underruns=103, underrun_s=2.5, max_gap_s=3.5,
        stopped_early=True, reason="stale_input", max_seam_jump=4.5,
        action_space="joint_absolute", skipped_stale=104, retries=105, requests=106,
        latency_p50_s=5.5, latency_p95_s=6.5, staleness_p50_s=7.5, staleness_p95_s=8.5,
        duty_cycle=0.25, max_seam_step=9.5, seam_step_p95=10.5, recording="/bags/episode-7",
        takeovers=107, takeover_s=11.5, max_resume_s=12.5, max_resume_jump=13.5, label="success",
    )  # fmt: skip
    values.update(changes)
    return RunOutcome(**values)


def message(types: MessageClasses, record: RunOutcome, **changes: Any) -> Any:
    kwargs: dict[str, Any] = dict(
        episode=7, model="org/model-a", stamp=types[TIME](sec=12, nanosec=34), error="E",
        secret=SECRET,
    )  # fmt: skip
    kwargs.update(changes)
    return outcome_message(types[RUN_OUTCOME], record, **kwargs)


def same(a: Any, b: Any) -> bool:
    """Equal, NaN included, and of one type (an int in a float field is refused anyway)."""
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return type(a) is type(b) and (a == b or both_nan)


def test_outcome_message_copies_every_figure(types: MessageClasses) -> None:
    record = outcome()
    msg = message(types, record)
    expected = {
        "stamp": types[TIME](sec=12, nanosec=34), "episode": 7, "model": "org/model-a",
        "reason": "stale_input", "error": "E", "actions": 101, "chunks": 102,
        "elapsed_s": 1.5, "underruns": 103, "underrun_s": 2.5, "max_gap_s": 3.5,
        "max_seam_jump": 4.5, "max_seam_step": 9.5, "seam_step_p95": 10.5,
        "skipped_stale": 104, "retries": 105, "requests": 106, "latency_p50_s": 5.5,
        "latency_p95_s": 6.5, "staleness_p50_s": 7.5, "staleness_p95_s": 8.5,
        "duty_cycle": 0.25, "action_space": "joint_absolute", "recording": "/bags/episode-7",
        "takeovers": 107, "takeover_s": 11.5, "max_resume_s": 12.5, "max_resume_jump": 13.5,
        "label": "success",
    }  # fmt: skip
    assert set(expected) == set(types[RUN_OUTCOME].FIELDS)  # type: ignore[attr-defined]
    figures = [v for k, v in expected.items() if k not in ("stamp", "model", "error")]
    assert len({repr(v) for v in figures}) == len(figures)  # a swap would show
    for name, value in expected.items():
        assert same(getattr(msg, name), value), (name, getattr(msg, name), value)
    assert set(COUNTS) | set(FIGURES) < set(expected)


def test_outcome_message_takes_a_real_episode_as_it_comes(
    types: MessageClasses, policy: Policy
) -> None:
    """The core's own record of an episode against the simulator: its Python types go into
    the message's fields (NaN seams and all) unchanged."""
    arm = SimulatedArm(MODEL, image_size=(32, 32))
    record = policy.run(arm.observe, arm.act, max_actions=40, validate=lambda a: True)
    assert record.reason == "completed" and record.actions == 40 and record.chunks >= 2
    msg = message(types, record, error=error_text(record.error, "", SECRET))
    for name in (*COUNTS, *FIGURES):
        assert same(getattr(msg, name), getattr(record, name)), name
    assert (msg.reason, msg.error, msg.action_space, msg.recording) == (
        "completed", "", "joint_velocity", "",
    )  # fmt: skip
    assert msg.actions == 40 and 0.0 < msg.elapsed_s < 30.0


def test_outcome_message_with_no_chunk_played(types: MessageClasses) -> None:
    """An episode stopped before its first chunk: no action space, no recording, NaN
    quantiles; the message says so with empty texts and NaN, not a crash."""
    nan = math.nan
    record = outcome(
        actions=0, chunks=0, action_space=None, recording=None, reason="stopped",
        latency_p50_s=nan, latency_p95_s=nan, staleness_p50_s=nan, staleness_p95_s=nan,
        duty_cycle=nan, seam_step_p95=nan, underrun_s=0, max_seam_jump=0,
    )  # fmt: skip
    msg = message(types, record, error="")
    assert (msg.action_space, msg.recording, msg.actions, msg.reason) == ("", "", 0, "stopped")
    assert all(math.isnan(getattr(msg, n)) for n in ("latency_p50_s", "duty_cycle"))
    # a figure the core left an int (a max over no seams) goes out as a float64
    assert same(msg.underrun_s, 0.0) and same(msg.max_seam_jump, 0.0)


def test_the_key_is_redacted_from_error_and_recording(types: MessageClasses) -> None:
    error = RuntimeError(f"gateway refused {SECRET} (Authorization: Bearer {SECRET})")
    record = outcome(
        reason="raised:RuntimeError", error=error, recording=f"/bags/{SECRET}/episode-7"
    )
    msg = message(types, record, error=error_text(record.error, "", SECRET))
    assert msg.error == "RuntimeError: gateway refused *** (Authorization: ***)"
    assert msg.recording == "/bags/***/episode-7"
    texts = [getattr(msg, n) for n in types[RUN_OUTCOME].FIELDS if isinstance(getattr(msg, n), str)]  # type: ignore[attr-defined]
    assert len(texts) == 6 and not any(SECRET in t for t in texts)
    # a stop's detail (a refusal's reason) is redacted too
    assert error_text(None, f"service said {SECRET}", SECRET) == "service said ***"
    # without a key there is nothing to take out
    assert error_text(error, "", None) == f"RuntimeError: {error}"
    assert message(types, record, secret=None).recording == f"/bags/{SECRET}/episode-7"


def test_counts_are_clamped_into_uint32(types: MessageClasses) -> None:
    record = outcome(actions=2**40, chunks=-3, requests=2**32, retries=UINT32_MAX)
    msg = message(types, record, episode=2**33)
    assert (msg.actions, msg.chunks, msg.requests, msg.retries, msg.episode) == (
        UINT32_MAX, 0, UINT32_MAX, UINT32_MAX, UINT32_MAX,
    )  # fmt: skip
    assert msg.underruns == 103  # in range: as it was
    feedback = feedback_message(
        types[FEEDBACK], {"chunks": 2**40, "underruns": -1}, actions=2**35, elapsed_s=1.0
    )
    assert (feedback.chunks, feedback.underruns, feedback.actions) == (UINT32_MAX, 0, UINT32_MAX)


# ---------------------------------------------------------------------- error_text


def node_error(record: RunOutcome, detail: str, secret: str | None) -> str:
    """The outcome's error as PolicyNode._publish_outcome makes it (checked just below)."""
    return error_text(record.error, detail if record.reason in DETAILED else "", secret)


def test_the_node_makes_the_error_and_redacts_as_node_error_does() -> None:
    tree = ast.parse((ROOT / PACKAGE / "policy_node.py").read_text(encoding="utf-8"))
    (call,) = [
        c
        for c in ast.walk(tree)
        if isinstance(c, ast.Call) and ast.unparse(c.func) == "outcome_message"
    ]
    keywords = {k.arg: ast.unparse(k.value) for k in call.keywords}
    assert keywords["error"] == (
        "error_text(outcome.error, detail if outcome.reason in DETAILED else '', self._secret)"
    )
    assert keywords["secret"] == "self._secret"  # the recording's path is redacted too


def test_error_text_rules(types: MessageClasses) -> None:
    refused = ChunkRefused("chunk validator /check refused the chunk: joint 3 out of range")
    # an error: "<Class>: <message>", whatever the detail
    assert error_text(refused, "ignored", None) == (
        "ChunkRefused: chunk validator /check refused the chunk: joint 3 out of range"
    )
    # no error: the detail, or nothing
    assert error_text(None, "step change 1 > max_step 0.1", None) == "step change 1 > max_step 0.1"
    assert error_text(None, "", None) == ""
    # The node gives the detail only for the ends whose detail says what went wrong.
    detail = "joint_states are 0.8 s old"
    for reason, expected in [
        ("validate", detail), ("stale_input", detail), ("completed", ""), ("stopped", ""),
        ("estop", ""),
    ]:  # fmt: skip
        assert node_error(outcome(reason=reason), detail, None) == expected, reason
    raised = outcome(reason="validate", error=refused)
    assert node_error(raised, detail, None) == f"ChunkRefused: {refused}"


def test_a_refused_chunk_from_the_core_gives_its_reason_redacted(
    types: MessageClasses, policy: Policy
) -> None:
    """The core's own path: a chunk check refusing with the key in its reason."""
    arm = SimulatedArm(MODEL, image_size=(32, 32))

    def refuse(chunk: object, observation: object) -> bool:
        raise ChunkRefused(f"service said no to {SECRET}")

    record = policy.run(
        arm.observe, arm.act, max_actions=40, validate=lambda a: True, validate_chunk=refuse
    )
    assert record.reason == "validate" and record.actions == 0
    msg = message(types, record, error=node_error(record, "a detail", SECRET))
    assert msg.error == "ChunkRefused: service said no to ***"
    assert (msg.reason, msg.actions, msg.action_space) == ("validate", 0, "")


# ---------------------------------------------------------------------- feedback


@pytest.fixture
def policy(sim: GatewaySimulator) -> Iterator[Policy]:
    with connect(MODEL, api_key=TEST_KEY, base_url=sim.url, allow_insecure_http=True) as p:
        yield p


@pytest.fixture
def snapshots(policy: Policy) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """PlaybackEngine.snapshot() before the first tick and after five committed actions."""
    engine = PlaybackEngine(policy, EngineConfig())
    arm = SimulatedArm(MODEL, image_size=(32, 32))
    try:
        waiting = engine.snapshot()
        committed, deadline = 0, time.monotonic() + 30.0
        while committed < 5 and time.monotonic() < deadline:
            tick = engine.tick(time.monotonic(), arm.observe)
            if tick.action is None:
                engine.wait_any(0.02)
                continue
            arm.act(tick.action)
            engine.commit()
            committed += 1
            time.sleep(1 / 30)
        assert committed == 5
        yield dict(waiting), dict(engine.snapshot())
    finally:
        engine.close()


def _snapshot_keys() -> set[str]:
    """The snapshot keys outcome_message.py reads: `snapshot.get("<key>")`, and the names of
    a literal tuple a loop reads it with."""
    tree = ast.parse((ROOT / PACKAGE / "outcome_message.py").read_text(encoding="utf-8"))
    keys: set[str] = set()
    for node in ast.walk(tree):
        is_get = isinstance(node, ast.Call) and ast.unparse(node.func) == "snapshot.get"
        if is_get and isinstance(node.args[0], ast.Constant):  # type: ignore[attr-defined]
            keys.add(node.args[0].value)  # type: ignore[attr-defined]
        if isinstance(node, ast.For) and isinstance(node.iter, ast.Tuple):
            reads = any(ast.unparse(c).startswith("snapshot.get(") for c in ast.walk(node))
            keys |= set(ast.literal_eval(node.iter)) if reads else set()
    return keys


def test_feedback_reads_keys_a_real_engine_snapshot_has(
    types: MessageClasses, snapshots: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    waiting, playing = snapshots
    keys = _snapshot_keys()
    assert {"state", "warming", "chunks", "underruns", "duty_cycle", "latency_p95_s"} <= keys
    assert keys <= set(waiting) and keys <= set(playing)
    assert (feedback_state(waiting), feedback_state(playing)) == ("waiting", "playing")
    msg = feedback_message(types[FEEDBACK], playing, actions=5, elapsed_s=0.5)
    assert (msg.state, msg.actions, msg.chunks) == ("playing", 5, playing["chunks"]) and msg.chunks
    for name in ("duty_cycle", "latency_p95_s", "staleness_p50_s"):
        assert same(getattr(msg, name), float(playing[name])) and math.isfinite(playing[name])
    before = feedback_message(types[FEEDBACK], waiting, actions=0, elapsed_s=0.0)
    assert before.state == "waiting" and math.isnan(before.latency_p95_s)


def test_feedback_state_names_every_engine_phase(
    snapshots: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    snapshot = snapshots[1]
    # "failed" and "closed" end the episode on that tick: no feedback follows them.
    assert set(typing.get_args(Phase)) == set(STATES) | {"failed", "closed"}
    cases = {
        ("waiting", 0): "waiting", ("waiting", 1): "warming", ("playing", 0): "playing",
        ("underrun", 0): "holding", ("playing", 1): "playing",
    }  # fmt: skip
    for (phase, warming), state in cases.items():
        assert feedback_state({**snapshot, "state": phase, "warming": warming}) == state
    assert feedback_state({}) == "waiting"  # no snapshot yet
    # each is one the action's Feedback documents
    feedback = (ROOT / "action" / "RunEpisode.action").read_text().split("\n---\n")[2]
    documented = feedback.split("\nuint32")[0]  # `string state` and its comment
    assert documented.startswith("string state")
    for state in set(cases.values()):
        assert re.search(rf"\b{state}\b", documented), state


def test_feedback_message_fields(types: MessageClasses) -> None:
    snapshot = {
        "state": "underrun", "warming": 0, "actions": 99, "chunks": 3, "underruns": 4,
        "duty_cycle": 0.75, "latency_p95_s": 0.125, "staleness_p50_s": 0.0625,
    }  # fmt: skip
    msg = feedback_message(types[FEEDBACK], snapshot, actions=7, elapsed_s=2.5)
    expected = {
        "state": "holding", "actions": 7, "chunks": 3, "underruns": 4, "elapsed_s": 2.5,
        "duty_cycle": 0.75, "latency_p95_s": 0.125, "staleness_p50_s": 0.0625,
        "control_source": "policy",
    }  # fmt: skip
    assert set(expected) == set(types[FEEDBACK].FIELDS)  # type: ignore[attr-defined]
    for name, value in expected.items():
        assert same(getattr(msg, name), value), (name, getattr(msg, name), value)
    # ints from the engine become floats; a missing or non-numeric figure is NaN, a missing
    # count 0
    msg = feedback_message(
        types[FEEDBACK], {"duty_cycle": 1, "latency_p95_s": None}, actions=0, elapsed_s=0
    )
    assert same(msg.duty_cycle, 1.0) and same(msg.elapsed_s, 0.0)
    assert math.isnan(msg.latency_p95_s) and math.isnan(msg.staleness_p50_s)
    assert (msg.state, msg.chunks, msg.underruns) == ("waiting", 0, 0)
    # a person has the arm: the engine's phase says so, and so does the feedback
    msg = feedback_message(types[FEEDBACK], {"state": "human"}, actions=3, elapsed_s=1.0)
    assert (msg.state, msg.control_source) == ("human", "human")
    resuming = feedback_message(types[FEEDBACK], {"state": "resuming"}, actions=3, elapsed_s=1)
    assert (resuming.state, resuming.control_source) == ("resuming", "policy")


def test_the_core_outcome_has_every_figure_the_message_copies() -> None:
    core = {f.name: f.type for f in dataclasses.fields(RunOutcome)}
    for name in COUNTS:
        assert core[name] == "int", name
    for name in FIGURES:
        assert core[name] == "float", name
