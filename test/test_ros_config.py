"""config/*.yaml and launch/*.py: parameters the node declares, with the types ROS will infer."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import yaml

from sequence_ai_core.sim import CATALOGUE
from sequence_ai_ros import params

ROOT = Path(__file__).resolve().parents[1]
PYTHON_KIND = {"bool": bool, "integer": int, "double": float, "string": str}


def node_parameters(path: Path) -> dict[str, Any]:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return dict(document["/**"]["ros__parameters"])


def test_pi05_droid_config_is_complete_typed_and_valid() -> None:
    values = node_parameters(ROOT / "config" / "pi05_droid.yaml")
    specs = {spec.name: spec for spec in params.PARAMETERS}
    assert set(values) == set(specs)  # every parameter documented, nothing unknown
    assert not params.secret_parameter_names(list(values))
    for name, value in values.items():
        kind = specs[name].kind
        if kind.endswith("_array"):
            element = PYTHON_KIND[kind.removesuffix("_array")]
            # ROS infers an array's type from its elements: 1 in a double array is an error.
            assert all(type(v) is element for v in value), f"{name}: {value}"
        else:
            assert type(value) is PYTHON_KIND[kind], f"{name}: {value!r}"
    config = params.parse(values)
    model = CATALOGUE["pi05-droid"]
    warnings: list[str] = []
    params.check_against_model(config, model.action_dim, model.camera_views, warnings.append)
    assert warnings == [] and config.gripper_dims == 1 and len(config.joint_names) == 7


def test_analyzer_config_matches_the_status_name() -> None:
    analyzers = node_parameters(ROOT / "config" / "analyzers.yaml")
    policy = analyzers["policy"]
    assert policy["type"] == "diagnostic_aggregator/GenericAnalyzer"
    # The status is named "<node name>: <task>" as diagnostic_updater names it; task "policy".
    assert any(
        ": policy".endswith(text) or text in "sequence_ai: policy" for text in policy["contains"]
    )


@pytest.mark.parametrize("name", ["sequence_ai.launch.py", "sim.launch.py"])
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
    assert not params.secret_parameter_names(keys)
    if name == "sim.launch.py":  # the policy node's parameters there are all declared ones
        declared = {spec.name for spec in params.PARAMETERS}
        assert {"base_url", "joint_names", "gripper_topic", "autostart"} <= set(keys)
        assert set(keys) - declared <= {"model", "command_type", "image_format"}
