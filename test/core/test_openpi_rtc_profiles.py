"""The ``rtc`` profile setting: built in (``droid+rtc``), in YAML and JSON user profiles, what
it adds to a request, and a clear error for every value it does not take."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import sequence_ai_core as sai
from sequence_ai_core.errors import ConfigurationError
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.openpi import BUILTIN, load_profile, profile_from_mapping
from sequence_ai_core.openpi.codec import packb
from sequence_ai_core.openpi.rtc import RtcSpec
from sequence_ai_core.playback.source import PlannedPrefix

ARM: dict[str, Any] = {
    "name": "my_arm",
    "control_hz": 30,
    "action_space": "joint_absolute",
    "action_dim": 7,
    "images": [{"key": ["cams", "front"], "view": "front", "size": [96, 128]}],
    "state": [{"key": "qpos", "from": ["joint_positions", "gripper"], "size": 7}],
    "prompt_key": "task",
}
OBSERVATION = sai.Observation(
    proprioception=sai.Proprioception(joint_positions=[0.5] * 6, gripper=1.0),
    images=[RawFrame("front", np.zeros((48, 64, 3), np.uint8), timestamp_ms=1_700_000_000_123)],
    instruction="stack",
)


def with_rtc(value: Any) -> dict[str, Any]:
    return {**ARM, "rtc": value}


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_builtin_profile_also_comes_with_the_rtc_keys(name: str) -> None:
    chosen = load_profile(f"{name}+rtc")
    assert chosen.rtc == RtcSpec()
    assert chosen.rtc.prefix_key == ("prev_chunk_left_over",)
    assert chosen.rtc.delay_key == ("inference_delay",)
    assert chosen.rtc.answer_from == "delay"
    assert dataclasses.replace(chosen, name=name, rtc=None) == BUILTIN[name]
    assert load_profile(f" {name.upper()}+RTC ") == chosen
    assert BUILTIN[name].rtc is None  # off unless asked for


def test_an_unknown_suffix_is_an_unknown_profile() -> None:
    with pytest.raises(ConfigurationError, match=r"droid\+fast.*each also as <name>\+rtc"):
        load_profile("droid+fast")
    with pytest.raises(ConfigurationError, match="unknown openpi profile 'nope\\+rtc'"):
        load_profile("nope+rtc")


def test_yaml_and_json_user_profiles_take_the_setting(tmp_path: Path) -> None:
    import yaml

    nested = {"prefix_key": ["rtc", "prefix"], "delay_key": "d", "answer_from": "observation"}
    (tmp_path / "on.yaml").write_text(yaml.safe_dump(with_rtc(True)))
    (tmp_path / "nested.json").write_text(json.dumps(with_rtc(nested)))
    (tmp_path / "off.yaml").write_text("rtc: false\n" + yaml.safe_dump(ARM))
    (tmp_path / "null.json").write_text(json.dumps(with_rtc(None)))
    assert load_profile(str(tmp_path / "on.yaml")).rtc == RtcSpec()
    assert load_profile(str(tmp_path / "nested.json")).rtc == RtcSpec(
        ("rtc", "prefix"), ("d",), "observation"
    )
    assert load_profile(str(tmp_path / "off.yaml")).rtc is None
    assert load_profile(str(tmp_path / "null.json")).rtc is None
    assert profile_from_mapping(ARM).rtc is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yes", "rtc must be true, false or a mapping of prefix_key, delay_key and answer_from, "
                "got 'yes'"),
        (1, "rtc must be true, false or a mapping"),
        ([], "rtc must be true, false or a mapping"),
        ({"prefix": "p"}, r"rtc has unknown fields \['prefix'\]; known: \['answer_from', "
                          r"'delay_key', 'prefix_key'\]"),
        ({"answer_from": "later"}, r"rtc.answer_from must be one of \('delay', 'observation'\), "
                                   "got 'later'"),
        ({"prefix_key": ""}, "rtc.prefix_key must be a key or a list of nested keys"),
        ({"delay_key": ["a", 3]}, "rtc.delay_key must be a key or a list of nested keys"),
        ({"prefix_key": "same", "delay_key": "same"}, "rtc.prefix_key and rtc.delay_key must "
                                                      "differ"),
        ({"prefix_key": "qpos"}, "rtc.prefix_key qpos clashes with qpos, another key the "
                                 "profile sends"),
        ({"delay_key": ["cams", "front", "x"]}, "rtc.delay_key cams/front/x clashes with "
                                                "cams/front"),
        ({"prefix_key": "cams"}, "rtc.prefix_key cams clashes with cams/front"),
        ({"prefix_key": "task"}, "rtc.prefix_key task clashes with task"),
        ({"prefix_key": ["r", "p"], "delay_key": "r"}, "rtc.prefix_key r/p clashes with r"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_named(value: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        profile_from_mapping(with_rtc(value))


def test_without_the_setting_a_request_is_byte_for_byte_the_old_one() -> None:
    plain = profile_from_mapping(ARM)
    planned = PlannedPrefix(np.ones((4, 7)), 6)
    assert packb(plain.encode(OBSERVATION, planned)) == packb(plain.encode(OBSERVATION))
    assert sorted(plain.encode(OBSERVATION, planned)) == ["cams", "qpos", "task"]


def test_with_it_the_prefix_is_float32_and_the_delay_an_int() -> None:
    chosen = profile_from_mapping(with_rtc({"prefix_key": ["rtc", "prefix"], "delay_key": "d"}))
    steps = np.arange(28, dtype=np.float64).reshape(4, 7) / 7
    sent = chosen.encode(OBSERVATION, PlannedPrefix(steps, 6))
    assert sorted(sent) == ["cams", "d", "qpos", "rtc", "task"]
    prefix = sent["rtc"]["prefix"]
    assert prefix.dtype == np.float32 and prefix.shape == (4, 7) and prefix.flags.c_contiguous
    np.testing.assert_array_equal(prefix, steps.astype(np.float32))
    assert sent["d"] == 6 and type(sent["d"]) is int
    # no plan (predict(), the first request): an empty prefix of the profile's width, delay 0
    for planned in (None, PlannedPrefix(np.zeros((0, 0)), 0)):
        empty = chosen.encode(OBSERVATION, planned)
        assert empty["rtc"]["prefix"].shape == (0, 7) and empty["rtc"]["prefix"].dtype == np.float32
        assert empty["d"] == 0


def test_a_prefix_of_another_width_is_not_sent() -> None:
    chosen = profile_from_mapping(with_rtc(True))
    with pytest.raises(sai.InvalidRequest, match=r"shape \(2, 8\); the profile has 7 action"):
        chosen.encode(OBSERVATION, PlannedPrefix(np.zeros((2, 8)), 3))
