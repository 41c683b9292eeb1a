"""User-defined openpi profiles, and the package without the ``openpi`` extra installed."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import sequence_ai_core as sai
from sequence_ai_core.errors import ConfigurationError
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.openpi import BUILTIN, load_profile, profile_from_mapping

MY_ROBOT = {
    "name": "my_arm",
    "control_hz": 30,
    "action_space": "joint_absolute",
    "action_dim": 7,
    "gripper_dims": [6],
    "robot": "my_arm",
    "action_horizon": 16,
    "images": [
        {"key": ["cams", "front"], "view": "front", "size": [96, 128], "layout": "chw"},
        {"key": "wrist", "view": "wrist", "required": False},
    ],
    "state": [{"key": "qpos", "from": ["joint_positions", "gripper"], "size": 7}],
    "prompt_key": "task",
}


def test_a_mapping_profile_encodes_nested_keys_sizes_and_layouts() -> None:
    profile = profile_from_mapping(MY_ROBOT)
    observation = sai.Observation(
        proprioception=sai.Proprioception(joint_positions=[0.5] * 6, gripper=1.0),
        images=[RawFrame("front", np.zeros((480, 640, 3), np.uint8))],
        instruction="stack",
    )
    encoded = profile.encode(observation)
    assert encoded["cams"]["front"].shape == (3, 96, 128)
    assert "wrist" not in encoded
    np.testing.assert_array_equal(encoded["qpos"], [0.5] * 6 + [1.0])
    assert encoded["task"] == "stack"
    assert (profile.control_hz, profile.action_horizon, profile.gripper_dims) == (30.0, 16, (6,))


def test_a_yaml_or_json_file_is_a_profile(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "arm.yaml").write_text(yaml.safe_dump(MY_ROBOT))
    (tmp_path / "arm.json").write_text(json.dumps(MY_ROBOT))
    from_yaml = load_profile(str(tmp_path / "arm.yaml"))
    assert from_yaml == load_profile(str(tmp_path / "arm.json")) == profile_from_mapping(MY_ROBOT)
    assert load_profile("DROID") is BUILTIN["droid"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"control_hz": 0.1}, "control_hz"),
        ({"action_space": "torque"}, "action_space"),
        ({"action_dim": 0}, "action_dim"),
        ({"gripper_dims": [7]}, "gripper_dims"),
        ({"state": [{"key": "q", "from": ["joint_torques"], "size": 7}]}, "state[0].from"),
        ({"images": [{"key": "a", "view": "a", "layout": "whc"}]}, "layout"),
        ({"horizon": 10}, "unknown fields"),
    ],
)
def test_a_bad_profile_names_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigurationError, match=field.replace("[", r"\[").replace("]", r"\]")):
        profile_from_mapping({**MY_ROBOT, **change})


def test_an_unknown_profile_lists_the_built_in_ones() -> None:
    with pytest.raises(ConfigurationError, match="droid, aloha, libero"):
        sai.connect("ws://127.0.0.1:8000", profile="franka")
    with pytest.raises(ValueError, match="profile="):
        sai.connect("ws://127.0.0.1:8000")
    with pytest.raises(ValueError, match="openpi"):
        sai.connect("pi05-droid", profile="droid")


def test_observations_a_profile_cannot_map_are_refused_naming_the_field() -> None:
    droid = BUILTIN["droid"]
    frames = [
        RawFrame("exterior_1", np.zeros((8, 8, 3), np.uint8)),
        RawFrame("wrist_left", np.zeros((8, 8, 3), np.uint8)),
    ]
    good = sai.Observation(sai.Proprioception([0.0] * 7, gripper=0.0), images=frames)
    droid.check(good)
    cases = {
        "joint_positions has 6 values": sai.Observation(
            sai.Proprioception([0.0] * 6, gripper=0.0), images=frames
        ),
        "gripper is missing": sai.Observation(sai.Proprioception([0.0] * 7), images=frames),
        "no 'wrist_left' view": sai.Observation(good.proprioception, images=frames[:1]),
        "view is 'top'": sai.Observation(
            good.proprioception, images=[*frames, RawFrame("top", np.zeros((8, 8, 3), np.uint8))]
        ),
        "not finite": sai.Observation(
            sai.Proprioception([0.0] * 6 + [float("nan")], gripper=0.0), images=frames
        ),
    }
    for message, observation in cases.items():
        with pytest.raises(sai.InvalidRequest, match=message):
            droid.encode(observation)


def test_without_the_openpi_extra_the_package_and_the_node_helpers_still_work() -> None:
    """websockets and msgpack made unimportable: the gateway path, the profiles and the ROS
    helpers import and work; a ws:// URL says which extra to install."""
    script = textwrap.dedent(
        """
        import sys
        for name in ("websockets", "msgpack"):
            sys.modules[name] = None
        import sequence_ai_core as sai
        from sequence_ai_core.openpi import BUILTIN
        import sequence_ai_ros.parameters, sequence_ai_ros.episode
        sai.connect("pi05-droid", base_url="http://127.0.0.1:9", api_key="k").close()
        assert BUILTIN["droid"].action_dim == 8
        try:
            sai.connect("ws://127.0.0.1:8000", profile="droid")
        except sai.SequencesError as exc:
            print(exc)
        assert "websockets" not in sys.modules or sys.modules["websockets"] is None
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "sequence_ai_ros[openpi]" in result.stdout
