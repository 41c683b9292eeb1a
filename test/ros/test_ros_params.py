"""The node's parameters (sequence_ai_ros/parameters.py): parsed and checked into NodeConfig, named
when wrong, and the core's run settings, pool and backend derived from them."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

import pytest
from support import TEST_KEY
from support.node_params import raw_params

from sequence_ai_core.playback.engine import PlaybackEngine
from sequence_ai_core.playback.engine_config import (
    InvalidSetting,
    RunConfig,
    check_pool,
    connections_for,
)
from sequence_ai_core.policy import connect
from sequence_ai_core.types import Model
from sequence_ai_ros import parameters
from sequence_ai_sim import GatewaySimulator

JOINTS = [f"j{i}" for i in range(7)]


def test_defaults_parse_and_fill_hardware_id() -> None:
    config = parameters.parse(raw_params())
    assert config.model == "pi05-droid"
    assert config.hardware_id == "sequence-ai:pi05-droid"
    assert config.run.control_hz is None and config.base_url is None
    assert config.cameras == () and config.joint_names == ()


def test_the_node_settings_are_the_core_run_config() -> None:
    """One dataclass drives run() and the node: same fields, same defaults, one parser."""
    assert parameters.parse(raw_params()).run == RunConfig()
    assert set(parameters.RUN_PARAMETERS) == {f.name for f in fields(RunConfig)} & {
        spec.name for spec in parameters.PARAMETERS
    }
    assert len(parameters.RUN_PARAMETERS) == 11  # gripper_dims is both the node's and the engine's
    defaults = {spec.name: spec.default for spec in parameters.PARAMETERS}
    for name in parameters.RUN_PARAMETERS:
        core = getattr(RunConfig(), name)
        assert defaults[name] == (0.0 if name == "control_hz" else core), name
    changed = parameters.parse(raw_params(max_in_flight=1, control_hz=20.0, stall_timeout_s=3))
    assert changed.run == RunConfig(max_in_flight=1, control_hz=20.0, stall_timeout_s=3.0)
    entry = Model("accounts/x/models/m", "m", "act", "a", "r", 7, 15, 30.0, ("exterior_1",))
    settings = changed.run.with_catalogue(entry)  # what an episode's engine gets
    assert (settings.expected_covers_s, settings.expected_control_hz) == (0.5, 30.0)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_in_flight", 0),
        ("smooth_seam", -1),
        ("handover", "spline"),
        ("handover_rate", 0.0),
        ("startup_timeout_s", -1.0),
        ("stall_timeout_s", 0.0),
        ("stall_timeout_s", math.inf),
        ("freshness", "stale"),
        ("control_hz", 2000.0),
    ],
)
def test_a_run_setting_the_core_refuses_is_named_with_the_cores_reason(
    name: str, value: Any
) -> None:
    with pytest.raises(InvalidSetting) as core:
        RunConfig(**{name: value})
    with pytest.raises(parameters.ParameterError) as node:
        parameters.parse(raw_params(**{name: value}))
    assert node.value.name == name
    assert node.value.problem.startswith(core.value.problem)


@pytest.mark.parametrize(
    ("changes", "bad"),
    [
        ({"model": " "}, "model"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"output_type": "twist"}, "output_type"),
        ({"freshness": "stale"}, "freshness"),
        ({"output_type": "joint_trajectory"}, "joint_names"),
        ({"control_hz": -1.0}, "control_hz"),
        ({"max_actions": 0}, "max_actions"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"jpeg_quality": 101}, "jpeg_quality"),
        ({"image_size": [224]}, "image_size"),
        ({"max_observation_age_s": 0.0}, "max_observation_age_s"),
        ({"camera_views": ["a", "b"], "camera_topics": ["/a"]}, "camera_topics"),
        (
            {"camera_views": ["a"], "camera_topics": ["/a"], "camera_encodings": ["png"]},
            "camera_encodings",
        ),
        ({"joint_names": ["a", "a"]}, "joint_names"),
        ({"lower_limits": [0.0, 1.0], "upper_limits": [1.0, 0.5]}, "upper_limits"),
        ({"max_step": [0.0]}, "max_step"),
        ({"validator": "not a spec"}, "validator"),
        ({"gripper_topic": "g"}, "gripper_topic"),
        ({"output_type": "joint_state", "joint_names": JOINTS, "gripper_dims": 1}, "gripper_topic"),
        ({"joint_names": JOINTS, "gripper_joint": "j3"}, "gripper_joint"),
    ],
)
def test_bad_parameter_is_named(changes: dict[str, Any], bad: str) -> None:
    with pytest.raises(parameters.ParameterError) as info:
        parameters.parse(raw_params(**changes))
    assert info.value.name == bad
    assert f"parameter '{bad}'" in str(info.value)


def test_model_cross_checks_name_the_parameter() -> None:
    config = parameters.parse(raw_params(joint_names=JOINTS[:6], gripper_dims=1))
    with pytest.raises(parameters.ParameterError, match=r"joint_names.*6 joints.*leave 7"):
        parameters.check_against_model(config, 8, ("exterior_1",), print)
    config = parameters.parse(raw_params(camera_views=["top"], camera_topics=["/top"]))
    with pytest.raises(parameters.ParameterError, match="camera_views"):
        parameters.check_against_model(config, 8, ("exterior_1",), print)
    warnings: list[str] = []
    parameters.check_against_model(
        parameters.parse(raw_params()), 8, ("exterior_1",), warnings.append
    )
    assert warnings and "exterior_1" in warnings[0]


def test_secret_looking_parameter_names() -> None:
    names = ["model", "api_key", "sequences.apiKey", "auth_token", "instruction", "SECRET"]
    assert parameters.secret_parameter_names(names) == [
        "api_key",
        "sequences.apiKey",
        "auth_token",
        "SECRET",
    ]


def test_every_parameter_has_a_declarable_kind() -> None:
    kinds = {"bool", "integer", "double", "string", "integer_array", "double_array", "string_array"}
    assert {spec.kind for spec in parameters.PARAMETERS} <= kinds
    # An empty-list default would be declared BYTE_ARRAY by rclpy: arrays default to unset.
    assert all(spec.default != [] for spec in parameters.PARAMETERS)


@pytest.mark.parametrize(
    ("control_hz", "catalogue_hz", "period"),
    [(20.0, 15.0, 1 / 20), (0.0, 15.0, 1 / 15), (0.0, 0.0, None)],
)
def test_the_nodes_timer_period_is_the_engines(
    sim: GatewaySimulator, control_hz: float, catalogue_hz: float, period: float | None
) -> None:
    """The node's timer runs at ``engine.period_s`` from an episode's first tick: the
    parameter, else the catalogue's rate; only with neither does it poll for the first chunk."""
    entry = Model("accounts/x/models/m", "m", "act", "a", "r", 7, 15, catalogue_hz, ("v",))
    settings = parameters.parse(raw_params(control_hz=control_hz)).run.with_catalogue(entry)
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy,
        PlaybackEngine(policy, settings) as engine,
    ):
        assert engine.period_s == (pytest.approx(period) if period else None)


@pytest.mark.parametrize("max_in_flight", [1, 3, 9])
def test_the_node_sizes_its_pool_by_the_cores_rule(
    sim: GatewaySimulator, max_in_flight: int
) -> None:
    """configure connects with ``connect_arguments``: the pool the core's rule asks for, so
    that ``run()``'s own check of it passes with the node's ``max_in_flight``."""
    config = parameters.parse(raw_params(base_url=sim.url, max_in_flight=max_in_flight))
    arguments = parameters.connect_arguments(config)
    assert arguments["max_connections"] == connections_for(max_in_flight) == max_in_flight + 1
    with connect(api_key=TEST_KEY, **arguments) as policy:
        assert policy.max_connections == connections_for(max_in_flight)
        check_pool(config.run.max_in_flight, policy.max_connections)  # not refused
        with pytest.raises(InvalidSetting, match="max_connections"):
            check_pool(max_in_flight + 1, policy.max_connections)


def test_an_openpi_node_connects_to_its_url_with_its_profile() -> None:
    url = "ws://127.0.0.1:8000"
    arguments = parameters.connect_arguments(
        parameters.parse(raw_params(base_url=url, profile="droid"))
    )
    assert (arguments["model"], arguments["base_url"], arguments["profile"]) == (url, None, "droid")
