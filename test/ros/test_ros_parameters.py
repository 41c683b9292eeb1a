"""Each node parameter is declared once, and what is read from the declaration agrees with it.

The constraint text is read here as a person reads docs/node.md (``expectations``: the values
the text says are taken and refused, on both sides of every bound), and then held against the
rule, against ``parse`` (which must refuse naming the parameter and the value), against the
core for the settings the core checks, and against the ROS descriptor. ROS-free; the
real-ROS tier checks the descriptors on a running node (test_ros_real_lifecycle.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import fields
from typing import Any

import pytest

from sequence_ai_core.playback.engine_config import InvalidSetting, RunConfig
from sequence_ai_core.recording.config import RecordConfig
from sequence_ai_ros import parameters
from sequence_ai_ros.parameters import parsing
from sequence_ai_ros.parameters.rules import Number

BY_NAME = {p.name: p for p in parameters.PARAMETERS}
DEFAULTS = {p.name: p.default for p in parameters.PARAMETERS}
#: What a string of a named shape looks like, and what does not: the shape is prose, so its
#: examples are written here; a shape new to the table fails until it has some.
SHAPES: dict[str, tuple[list[str], list[str]]] = {
    "an http(s):// or ws(s):// URL": (
        ["http://127.0.0.1:8765", "https://x.example", "ws://h:8000", "wss://h"],
        ["ftp://x", "localhost:8765", "http:/x"],
    ),
    "package.module:function": (
        ["pkg.mod:fn", "mod:check_1", "a.b.c:_f"],
        ["not a spec", "mod:", ":fn", "pkg.mod", "1pkg:fn", "pkg.mod:fn()"],
    ),
    "a service name": (["validate", "/arm/validate", "arm/check_2"], ["two words", "/", "9x"]),
}
Probe = tuple[Any, bool]  # a value (as the kind holds it) and whether the text takes it


def _number(text: str) -> float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _scalar(text: str, integer: bool) -> list[Probe]:
    """The values a number's or a string's constraint text takes and refuses."""
    step = 1 if integer else 1e-9
    if m := re.fullmatch(r"(>=|>) (-?[\d.]+)", text):
        low = _number(m[2])
        return [(low, m[1] == ">="), (low - step, False), (low + step, True), (low + 10**6, True)]
    if m := re.fullmatch(r"(-?[\d.]+)\.\.(-?[\d.]+)", text):
        low, high = _number(m[1]), _number(m[2])
        edges = [(low, True), (high, True), (low - step, False), (high + step, False)]
        return [*edges, ((low + high) / 2 if not integer else (low + high) // 2, True)]
    if m := re.fullmatch(r"(-?[\d.]+) or (.+)", text):
        alone = _number(m[1])
        rest = [(v, ok or v == alone) for v, ok in _scalar(m[2], integer) if v != alone]
        return [(alone, True), *rest]
    if " | " in text:
        return [*((choice, True) for choice in text.split(" | ")), ("nope", False), ("", False)]
    if text == "non-empty":
        return [("x", True), ("", False)]
    if text == "finite":
        return [(0.0, True), (-1e300, True), (math.nan, False), (math.inf, False)]
    if text.startswith("empty or "):
        good, bad = SHAPES[text.removeprefix("empty or ")]
        return [("", True), *((g, True) for g in good), *((b, False) for b in bad)]
    raise AssertionError(f"a constraint text this test cannot read: {text!r}")


def expectations(kind: str, text: str) -> list[Probe]:
    """What ``text``, a rule's constraint, says of values of ``kind``."""
    integer = kind.startswith("integer")
    if text == "":
        examples = {"bool": [True, False], "integer": [0, -3], "double": [0.0, -1.5]}
        return [(v, True) for v in examples.get(kind, ["", " x y "] if kind == "string" else [])]
    if text == "distinct names":
        return [((), True), (("a", "b"), True), (("a", "a"), False), (("a", " "), False)]
    if text == "non-empty names":
        return [((), True), (("a", "a"), True), (("",), False)]
    if m := re.fullmatch(r"(\d+) values, each (.+)", text):
        count, each = int(m[1]), _scalar(m[2], integer)
        good = next(v for v, ok in each if ok)
        sized = [((good,) * (count - 1) + (v,), ok) for v, ok in each]
        return [*sized, ((good,) * (count + 1), False), ((good,) * (count - 1), False)]
    if m := re.fullmatch(r"each (.+)", text):
        each = _scalar(m[1], integer)
        return [((), True), *(((v,), ok) for v, ok in each), *(((v, v), ok) for v, ok in each)]
    return _scalar(text, integer)


def _rule_text(parameter: parameters.Parameter) -> str:
    return parameter.rule.text


CASES = [
    pytest.param(p, value, ok, id=f"{p.name}={value!r}")
    for p in parameters.PARAMETERS
    for value, ok in expectations(p.kind, _rule_text(p))
]


def test_every_rule_text_is_read_and_says_something_checkable() -> None:
    for parameter in parameters.PARAMETERS:
        probes = expectations(parameter.kind, _rule_text(parameter))
        assert probes, parameter.name
        if parameter.rule.text:  # a constraint says what it refuses
            assert any(not ok for _, ok in probes), parameter.name
    assert len(CASES) >= 150


@pytest.mark.parametrize(("parameter", "value", "ok"), CASES)
def test_the_rule_takes_what_its_text_says(
    parameter: parameters.Parameter, value: Any, ok: bool
) -> None:
    problem = parameter.problem(value)
    assert (problem is None) == ok, problem


def _named(problem: str, value: Any) -> bool:
    """Whether ``problem`` quotes the value (or, for an array, the element it refuses); an
    empty value can only be named as such."""
    if value in ("", ()) or (isinstance(value, tuple) and "" in [str(v).strip() for v in value]):
        return "empty" in problem or "''" in problem
    quoted = [value, *(value if isinstance(value, tuple) else ())]
    return any(repr(v) in problem or f"'{v}'" in problem or str(v) in problem for v in quoted)


@pytest.mark.parametrize(("parameter", "value", "ok"), CASES)
def test_parse_refuses_what_the_rule_refuses_naming_the_parameter_and_the_value(
    parameter: parameters.Parameter, value: Any, ok: bool
) -> None:
    raw = {**DEFAULTS, parameter.name: list(value) if isinstance(value, tuple) else value}
    if ok:
        try:
            parameters.parse(raw)
        except parameters.ParameterError as exc:  # only a relation between two may refuse it
            values = parsing.converted(raw)
            refusing = [r.problem(exc.name, values) for r in BY_NAME[exc.name].relations]
            assert exc.problem in refusing, exc
        return
    with pytest.raises(parameters.ParameterError) as refused:
        parameters.parse(raw)
    assert refused.value.name == parameter.name
    assert str(refused.value).startswith(f"parameter '{parameter.name}': ")
    assert _named(refused.value.problem, value), refused.value.problem


RUN_CASES = [case for case in CASES if case.values[0].name in parameters.RUN_PARAMETERS]


@pytest.mark.parametrize(("parameter", "value", "ok"), RUN_CASES)
def test_a_run_settings_rule_is_the_cores(
    parameter: parameters.Parameter, value: Any, ok: bool
) -> None:
    """The core checks these (and words the error, as run()'s); the node's rule, which the
    descriptor and the docs show, takes the same values."""
    setting = None if parameter.name == "control_hz" and value == 0 else value
    try:
        RunConfig(**{parameter.name: setting})
    except InvalidSetting:
        assert not ok
    else:
        assert ok


@pytest.mark.parametrize(
    ("value", "ok"), expectations("double", _rule_text(BY_NAME["record_image_hz"]))
)
def test_the_image_rate_rule_is_the_core_recorders(value: float, ok: bool) -> None:
    try:
        RecordConfig(".", image_hz=value)
    except ValueError:
        assert not ok
    else:
        assert ok


def test_run_cases_cover_every_run_setting() -> None:
    assert {case.values[0].name for case in RUN_CASES} == set(parameters.RUN_PARAMETERS)


@pytest.mark.parametrize("parameter", parameters.PARAMETERS, ids=lambda p: p.name)
def test_the_descriptor_carries_the_meaning_the_constraint_and_the_range(
    parameter: parameters.Parameter,
) -> None:
    made = parameters.descriptor(parameter)
    assert made.description == parameter.meaning
    assert made.additional_constraints == parameter.constraints
    assert parameter.rule.text in parameter.constraints
    rule = parameter.rule
    ranged = isinstance(rule, Number) and not rule.above
    expected = parameter.kind if ranged else None
    kinds = {"integer": made.integer_range, "double": made.floating_point_range}
    assert {k for k, r in kinds.items() if r is not None} == ({expected} - {None})
    bounds = kinds.get(parameter.kind)
    if bounds is None:
        return
    low, high = bounds
    # The range takes exactly what the rule does at its ends (rclpy includes both).
    step = 1 if parameter.kind == "integer" else 1e-9
    assert parameter.problem(low) is None and parameter.problem(low - step) is not None
    assert parameter.problem(high) is None
    if isinstance(rule, Number) and rule.high is not None:
        assert parameter.problem(high + step) is not None


def test_the_ranges_are_where_the_rule_is_one_inclusive_range() -> None:
    ranged = {
        p.name
        for p in parameters.PARAMETERS
        if (made := parameters.descriptor(p)).integer_range or made.floating_point_range
    }
    assert ranged == {
        "jpeg_quality", "max_actions", "max_in_flight", "smooth_seam", "startup_timeout_s",
        "gripper_dims", "record_image_hz",
    }  # fmt: skip
    assert parameters.descriptor(BY_NAME["jpeg_quality"]).integer_range == (1, 100)


def test_the_constraint_is_the_rule_then_the_relations() -> None:
    joints = BY_NAME["joint_names"]
    assert joints.constraints == (
        "distinct names; required with output_type joint_state | joint_trajectory; "
        "one per arm dim (action_dim - gripper_dims)"
    )
    assert BY_NAME["model"].constraints == "non-empty"
    assert BY_NAME["instruction"].constraints == ""
    assert BY_NAME["control_hz"].constraints == "0 or 1..1000"


def test_every_node_config_field_is_a_parameter_or_said_to_be_derived() -> None:
    """A parameter as it is needs only its declaration and a field of its name."""
    names = {p.name for p in parameters.PARAMETERS}
    config_fields = {f.name for f in fields(parameters.NodeConfig)}
    assert config_fields - set(parsing.DERIVED) <= names
    assert set(parsing.DERIVED) <= config_fields
    # Parameters without a field of their own feed the run settings or a derived field.
    feeding = {"camera_views", "camera_topics", "camera_encodings", "record_dir"}
    assert names - config_fields == (
        set(parameters.RUN_PARAMETERS) | feeding | {"record_image_hz"}
    ) - {"gripper_dims"}


def test_parsed_values_have_the_declared_types() -> None:
    config = parameters.parse(DEFAULTS)
    python = {"bool": bool, "integer": int, "double": float, "string": str}
    for parameter in parameters.PARAMETERS:
        if not hasattr(config, parameter.name) or parameter.name in parsing.DERIVED:
            continue
        value = getattr(config, parameter.name)
        if parameter.kind.endswith("_array"):
            assert isinstance(value, tuple), parameter.name
        else:
            assert type(value) is python[parameter.kind], parameter.name


@pytest.mark.parametrize(
    ("changes", "named", "says"),
    [
        ({"output_type": "joint_state"}, "joint_names", "required with output_type=joint_state"),
        ({"camera_views": ["a", "b"], "camera_topics": ["/a"]}, "camera_topics", "(2), got 1"),
        ({"camera_views": ["a"], "camera_topics": ["/a"], "camera_encodings": ["raw"] * 2},
         "camera_encodings", "(1), got 2"),
        ({"base_url": "ws://h:8000"}, "profile", "required with base_url ws(s)://..."),
        ({"profile": "droid"}, "profile", "and only then"),
        ({"lower_limits": [0.0], "upper_limits": [1.0, 2.0]}, "upper_limits", "has 2 values"),
        ({"lower_limits": [0.0, 1.0], "upper_limits": [1.0, 1.0]}, "upper_limits", "index [1]"),
        ({"joint_names": ["a"], "gripper_joint": "a"}, "gripper_joint", "'a' is also listed"),
        ({"gripper_topic": "g"}, "gripper_topic", "gripper_dims is 0"),
        ({"output_type": "joint_state", "joint_names": ["a"], "gripper_dims": 1},
         "gripper_topic", "gripper_dims=1 and output_type=joint_state"),
        ({"output_type": "joint_trajectory", "joint_names": ["a"], "trajectory_mode": "point",
          "trajectory_velocities": True}, "trajectory_velocities", "trajectory_mode=point"),
    ],
)  # fmt: skip
def test_a_relation_refuses_naming_the_parameter_whose_text_states_it(
    changes: dict[str, Any], named: str, says: str
) -> None:
    with pytest.raises(parameters.ParameterError) as refused:
        parameters.parse({**DEFAULTS, **changes})
    assert refused.value.name == named and says in refused.value.problem
    relation_texts = [r.text for r in BY_NAME[named].relations]
    assert relation_texts and all(text in BY_NAME[named].constraints for text in relation_texts)


@pytest.mark.parametrize(
    ("changes", "dim", "named", "says"),
    [
        ({"gripper_dims": 8}, 8, "gripper_dims", "8 leaves no arm dims of 8"),
        ({"joint_names": ["a", "b"], "gripper_dims": 1}, 8, "joint_names", "leave 7"),
        ({"lower_limits": [0.0] * 7}, 8, "lower_limits", "has 7 values"),
        ({"max_step": [0.1, 0.1]}, 8, "max_step", "needs 1 or 8 values, got 2"),
        ({"camera_views": ["top"], "camera_topics": ["/t"]}, 8, "camera_views", "['top']"),
    ],
)
def test_a_model_relation_refuses_naming_the_parameter_whose_text_states_it(
    changes: dict[str, Any], dim: int, named: str, says: str
) -> None:
    config = parameters.parse({**DEFAULTS, **changes})
    with pytest.raises(parameters.ParameterError) as refused:
        parameters.check_against_model(config, dim, ("exterior_1",), lambda _: None)
    assert refused.value.name == named and says in refused.value.problem
    assert all(r.text in BY_NAME[named].constraints for r in BY_NAME[named].model_relations)
    assert BY_NAME[named].model_relations
    for good in (1, dim) if named == "max_step" else ():
        fitting = parameters.parse({**DEFAULTS, "max_step": [0.1] * good})
        parameters.check_against_model(fitting, dim, ("exterior_1",), lambda _: None)
