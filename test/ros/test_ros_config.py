"""config/*.yaml and launch/*.py: parameters the node declares, with the types ROS will infer."""

from __future__ import annotations

import ast
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from sequence_ai_ros import parameters
from sequence_ai_sim import CATALOGUE

ROOT = Path(__file__).resolve().parents[2]
PYTHON_KIND = {"bool": bool, "integer": int, "double": float, "string": str}


def node_parameters(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return dict(document["/**"]["ros__parameters"])


def test_pi05_droid_config_is_complete_typed_and_valid() -> None:
    values = node_parameters(ROOT / "config" / "pi05_droid.yaml")
    specs = {spec.name: spec for spec in parameters.PARAMETERS}
    assert set(values) == set(specs)  # every parameter documented, nothing unknown
    assert not parameters.secret_parameter_names(list(values))
    for name, value in values.items():
        kind = specs[name].kind
        if kind.endswith("_array"):
            element = PYTHON_KIND[kind.removesuffix("_array")]
            # ROS infers an array's type from its elements: 1 in a double array is an error.
            assert all(type(v) is element for v in value), f"{name}: {value}"
        else:
            assert type(value) is PYTHON_KIND[kind], f"{name}: {value!r}"
    config = parameters.parse(values)
    model = CATALOGUE["pi05-droid"]
    warnings: list[str] = []
    parameters.check_against_model(config, model.action_dim, model.camera_views, warnings.append)
    assert warnings == [] and config.gripper_dims == 1 and len(config.joint_names) == 7


def test_analyzer_config_matches_the_status_name() -> None:
    analyzers = node_parameters(ROOT / "config" / "analyzers.yaml")
    policy = analyzers["policy"]
    assert policy["type"] == "diagnostic_aggregator/GenericAnalyzer"
    # The status is named "<node name>: <task>" as diagnostic_updater names it; task "policy".
    assert any(
        ": policy".endswith(text) or text in "sequence_ai: policy" for text in policy["contains"]
    )


@pytest.mark.parametrize("name", ["sequence_ai.launch.py", "sim.launch.py", "openpi.launch.py"])
def test_launch_files_define_a_description_and_no_key_parameter(name: str) -> None:
    source = (ROOT / "launch" / name).read_text(encoding="utf-8")
    tree = ast.parse(source)
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    env_dicts = {
        id(k.value) for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords
        if k.arg == "additional_env"
    }  # fmt: skip
    keys = [
        key.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Dict) and id(n) not in env_dicts
        for key in n.keys
        if isinstance(key, ast.Constant) and isinstance(key.value, str)
    ]
    assert not parameters.secret_parameter_names(keys)
    if name == "sim.launch.py":  # the policy node's parameters there are all declared ones
        declared = {spec.name for spec in parameters.PARAMETERS}
        assert {"base_url", "joint_names", "gripper_topic", "autostart"} <= set(keys)
        assert set(keys) - declared <= {"model", "command_type", "image_format", "controller"}


def _controllers(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "config" / name).read_text(encoding="utf-8")))


@pytest.mark.parametrize(
    ("name", "distro"),
    [("controllers_jtc_humble.yaml", "humble"), ("controllers_jtc_jazzy.yaml", "jazzy")],
)
def test_jtc_snippets_take_what_the_node_sends_by_default(name: str, distro: str) -> None:
    """The settings in the snippet, as the controller model, accept the node's default
    output for pi05-droid (the rest of a chunk, positions only)."""
    import numpy as np

    from sequence_ai_ros import trajectories as traj
    from sequence_ai_sim.controllers import JtcSettings, validate_trajectory
    from sequence_ai_sim.trajectory import Trajectory, TrajectoryPoint

    document = _controllers(name)
    manager = document["controller_manager"]["ros__parameters"]
    assert manager["joint_trajectory_controller"]["type"].startswith("joint_trajectory_controller/")
    jtc = document["joint_trajectory_controller"]["ros__parameters"]
    node = node_parameters(ROOT / "config" / "pi05_droid.yaml")
    assert jtc["joints"] == node["joint_names"]
    deprecated_or_unknown = (
        "interpolate_from_desired_state" if distro == "humble" else "open_loop_control"
    )
    assert deprecated_or_unknown not in jtc
    settings = JtcSettings(
        distro,
        tuple(jtc["joints"]),
        allow_partial_joints_goal=jtc["allow_partial_joints_goal"],
        allow_nonzero_velocity_at_trajectory_end=jtc.get(
            "allow_nonzero_velocity_at_trajectory_end", True
        ),
    )
    steps = np.full((15, 8), 0.2)
    planned = traj.plan_trajectory(
        steps, action_space="joint_velocity", gripper_dims=1, measured=np.zeros(7),
        period_s=1 / 15, velocities=True,
    )  # fmt: skip
    assert isinstance(planned, traj.PlannedTrajectory) and planned.velocities is not None
    points = tuple(
        TrajectoryPoint(tuple(p), tuple(v), (), round(t * 1e9))
        for p, v, t in zip(planned.positions, planned.velocities, planned.times_s, strict=True)
    )
    assert validate_trajectory(settings, Trajectory(settings.joints, points), 0.0) is None


def test_forward_snippet_names_the_node_joints() -> None:
    document = _controllers("controllers_forward.yaml")
    node = node_parameters(ROOT / "config" / "pi05_droid.yaml")
    for name in ("forward_velocity_controller", "forward_position_controller"):
        assert document[name]["ros__parameters"]["joints"] == node["joint_names"]
    assert document["gripper_controller"]["ros__parameters"]["joints"] == [node["gripper_joint"]]


def test_openpi_config_is_complete_typed_and_matches_the_droid_profile() -> None:
    from sequence_ai_core.openpi import BUILTIN

    values = node_parameters(ROOT / "config" / "openpi_droid.yaml")
    specs = {spec.name: spec for spec in parameters.PARAMETERS}
    assert set(values) == set(specs)
    for name, value in values.items():
        kind = specs[name].kind
        if not kind.endswith("_array"):
            assert type(value) is PYTHON_KIND[kind], f"{name}: {value!r}"
    config = parameters.parse(values)
    assert (config.base_url, config.profile) == ("ws://127.0.0.1:8000", "droid")
    droid = BUILTIN["droid"]
    warnings: list[str] = []
    parameters.check_against_model(config, droid.action_dim, droid.views, warnings.append)
    assert warnings == [] and all(not c.compressed for c in config.cameras)


@pytest.mark.parametrize(
    ("base_url", "profile"),
    [("ws://127.0.0.1:8000", ""), ("http://127.0.0.1:8765", "droid"), ("ftp://x", "")],
)
def test_a_profile_goes_with_a_websocket_url_and_only_with_one(base_url: str, profile: str) -> None:
    values = node_parameters(ROOT / "config" / "openpi_droid.yaml")
    with pytest.raises(parameters.ParameterError):
        parameters.parse({**values, "base_url": base_url, "profile": profile})


@pytest.mark.parametrize("hz", [0.5, 2000.0, -1.0, math.nan])
def test_a_control_rate_the_core_refuses_is_a_parameter_error_naming_control_hz(
    hz: float,
) -> None:
    """What configure refuses (the node stays unconfigured, the message names the
    parameter) instead of connect() raising a bare ValueError with a traceback."""
    values = node_parameters(ROOT / "config" / "pi05_droid.yaml")
    with pytest.raises(parameters.ParameterError) as info:
        parameters.parse({**values, "control_hz": hz})
    assert info.value.name == "control_hz"
    assert str(info.value).startswith("parameter 'control_hz': must be in [1, 1000] Hz")


@pytest.mark.parametrize(
    ("hz", "parsed"), [(0.0, None), (1.0, 1.0), (15.0, 15.0), (1000.0, 1000.0)]
)
def test_control_hz_zero_is_the_chunks_own_rate_and_the_bounds_are_taken(
    hz: float, parsed: float | None
) -> None:
    values = node_parameters(ROOT / "config" / "pi05_droid.yaml")
    assert parameters.parse({**values, "control_hz": hz}).run.control_hz == parsed


def test_the_package_says_it_supports_both_distros() -> None:
    import sequence_ai_ros

    summary = (sequence_ai_ros.__doc__ or "").split("\n\n", 1)[0]
    assert "Humble" in summary and "Jazzy" in summary, summary
