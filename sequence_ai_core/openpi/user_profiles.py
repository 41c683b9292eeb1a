"""User-defined openpi profiles: a mapping, or a YAML or JSON file, checked field by field."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from ..action_spaces import ACTION_SPACES, find_space
from ..errors import ConfigurationError
from ..limits import MAX_ACTION_DIM, MAX_CONTROL_HZ, MAX_STEPS, MIN_CONTROL_HZ
from .profiles import BUILTIN, STATE_SOURCES, ImageSpec, Profile, StateSpec
from .rtc import RtcSpec

#: A built-in name with this suffix is that profile sending the RTC keys (``droid+rtc``).
RTC_SUFFIX = "+rtc"


def load_profile(spec: str | Mapping[str, Any] | Profile) -> Profile:
    """A built-in name, a ``Profile``, a mapping, or a path to a YAML or JSON file."""
    if isinstance(spec, Profile):
        return spec
    if isinstance(spec, Mapping):
        return profile_from_mapping(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigurationError(f"profile must be a name, a mapping or a file, got {spec!r}")
    name = spec.strip()
    if name.lower() in BUILTIN:
        return BUILTIN[name.lower()]
    base = name.lower().removesuffix(RTC_SUFFIX)
    if base != name.lower() and base in BUILTIN:
        return dataclasses.replace(BUILTIN[base], name=base + RTC_SUFFIX, rtc=RtcSpec())
    if not os.path.isfile(name):
        raise ConfigurationError(
            f"unknown openpi profile {name!r}: built in are {', '.join(BUILTIN)} (each also "
            f"as <name>{RTC_SUFFIX}); or give a mapping or the path of a YAML/JSON file"
        )
    with open(name, encoding="utf-8") as handle:
        text = handle.read()
    if name.endswith(".json"):
        data = json.loads(text)
    else:
        try:
            import yaml
        except ImportError:
            raise ConfigurationError(
                f"profile {name!r} is YAML: install PyYAML, or give it as JSON"
            ) from None
        data = yaml.safe_load(text)
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"profile file {name!r} must hold a mapping")
    return profile_from_mapping(data)


def _key(value: Any, where: str) -> tuple[str, ...]:
    parts = [value] if isinstance(value, str) else value
    if (
        not isinstance(parts, (list, tuple))
        or not parts
        or not all(isinstance(p, str) and p for p in parts)
    ):
        raise ConfigurationError(f"profile {where} must be a key or a list of nested keys")
    return tuple(parts)


def _int(value: Any, where: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigurationError(
            f"profile {where} must be an int in [{low}, {high}], got {value!r}"
        )
    return value


def _rtc(value: Any, taken: list[tuple[str, ...]]) -> RtcSpec | None:
    """``rtc``: absent, null or false (off), true (LeRobot's key names), or a mapping of
    ``prefix_key``, ``delay_key`` and ``answer_from``; no key of it may clash with another
    key the profile sends (one would overwrite the other, or need it to be a dict)."""
    if value is None or value is False:
        return None
    default = RtcSpec()
    if value is True:
        spec = default
    elif isinstance(value, Mapping):
        known = {"prefix_key", "delay_key", "answer_from"}
        unknown = sorted(str(k) for k in set(value) - known)
        if unknown:
            raise ConfigurationError(
                f"profile rtc has unknown fields {unknown}; known: {sorted(known)}"
            )
        answer_from = value.get("answer_from", default.answer_from)
        prefix = value.get("prefix_key", default.prefix_key)
        delay = value.get("delay_key", default.delay_key)
        spec = RtcSpec(_key(prefix, "rtc.prefix_key"), _key(delay, "rtc.delay_key"), answer_from)
    else:
        raise ConfigurationError(
            "profile rtc must be true, false or a mapping of prefix_key, delay_key and "
            f"answer_from, got {value!r}"
        )
    keys = [("rtc.prefix_key", spec.prefix_key), ("rtc.delay_key", spec.delay_key)]
    for i, (name, key) in enumerate(keys):
        for other in taken + [k for _, k in keys[i + 1 :]]:
            if key[: len(other)] == other[: len(key)]:  # equal, or one nests in the other
                raise ConfigurationError(
                    f"profile {name} {'/'.join(key)} clashes with {'/'.join(other)}, "
                    "another key the profile sends"
                )
    return spec


def profile_from_mapping(data: Mapping[str, Any]) -> Profile:
    """A user profile, every field checked (``ConfigurationError`` names the field).

    Fields: ``name``, ``control_hz``, ``action_space`` (one of ``types.ACTION_SPACES``),
    ``action_dim``, ``gripper_dims`` (list), ``robot``, ``action_horizon`` (optional),
    ``prompt_key`` (default ``prompt``; null for none), ``timestamp_key`` (optional),
    ``rtc`` (optional: true, or ``{prefix_key, delay_key, answer_from}``; see ``rtc``),
    ``images``: a list of ``{key, view, size: [height, width], layout: hwc|chw, required}``,
    ``state``: a list of ``{key, from: [joint_positions, gripper, ...], size}``. A key is a
    string, or a list of strings for a nested dict (``[images, cam_high]``).
    """
    known = {
        "name",
        "control_hz",
        "action_space",
        "action_dim",
        "gripper_dims",
        "robot",
        "action_horizon",
        "prompt_key",
        "timestamp_key",
        "rtc",
        "images",
        "state",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigurationError(f"profile has unknown fields {unknown}; known: {sorted(known)}")
    hz = data.get("control_hz")
    if (
        isinstance(hz, bool)
        or not isinstance(hz, (int, float))
        or not (MIN_CONTROL_HZ <= hz <= MAX_CONTROL_HZ)
    ):
        raise ConfigurationError(
            f"profile control_hz must be in [{MIN_CONTROL_HZ:g}, {MAX_CONTROL_HZ:g}], got {hz!r}"
        )
    space = data.get("action_space")
    if find_space(space) is None:
        raise ConfigurationError(
            f"profile action_space must be one of {ACTION_SPACES}, got {space!r}"
        )
    dim = _int(data.get("action_dim"), "action_dim", 1, MAX_ACTION_DIM)
    grippers = data.get("gripper_dims", [])
    if not isinstance(grippers, (list, tuple)):
        raise ConfigurationError("profile gripper_dims must be a list of ints")
    gripper_dims = tuple(_int(g, "gripper_dims[]", 0, dim - 1) for g in grippers)
    horizon = data.get("action_horizon")
    images = data.get("images", [])
    states = data.get("state", [])
    if not isinstance(images, list) or not isinstance(states, list) or not states:
        raise ConfigurationError("profile images must be a list and state a non-empty list")
    image_specs: list[ImageSpec] = []
    for i, item in enumerate(images):
        if not isinstance(item, Mapping) or not isinstance(item.get("view"), str):
            raise ConfigurationError(f"profile images[{i}] must be a mapping with a view")
        size = item.get("size", [224, 224])
        if not isinstance(size, (list, tuple)) or len(size) != 2:
            raise ConfigurationError(f"profile images[{i}].size must be [height, width]")
        layout = item.get("layout", "hwc")
        if layout not in ("hwc", "chw"):
            raise ConfigurationError(f"profile images[{i}].layout must be hwc or chw")
        image_specs.append(
            ImageSpec(
                _key(item.get("key"), f"images[{i}].key"),
                item["view"],
                _int(size[0], f"images[{i}].size[0]", 1, 4096),
                _int(size[1], f"images[{i}].size[1]", 1, 4096),
                layout,
                bool(item.get("required", True)),
            )
        )
    state_specs: list[StateSpec] = []
    for i, item in enumerate(states):
        sources = item.get("from") if isinstance(item, Mapping) else None
        if (
            not isinstance(sources, list)
            or not sources
            or any(s not in STATE_SOURCES for s in sources)
        ):
            raise ConfigurationError(f"profile state[{i}].from must list some of {STATE_SOURCES}")
        state_specs.append(
            StateSpec(
                _key(item.get("key"), f"state[{i}].key"),
                tuple(sources),
                _int(item.get("size"), f"state[{i}].size", 1, 4096),
            )
        )
    prompt = data.get("prompt_key", "prompt")
    stamp = data.get("timestamp_key")
    prompt_key = None if prompt is None else _key(prompt, "prompt_key")
    timestamp_key = None if stamp is None else _key(stamp, "timestamp_key")
    taken = [spec.key for spec in image_specs] + [spec.key for spec in state_specs]
    taken += [key for key in (prompt_key, timestamp_key) if key is not None]
    rtc = _rtc(data.get("rtc"), taken)
    return Profile(
        name=str(data.get("name", "custom")),
        images=tuple(image_specs),
        state=tuple(state_specs),
        control_hz=float(hz),
        action_space=str(space),
        action_dim=dim,
        gripper_dims=gripper_dims,
        robot=str(data.get("robot", "")),
        prompt_key=prompt_key,
        action_horizon=None if horizon is None else _int(horizon, "action_horizon", 1, MAX_STEPS),
        timestamp_key=timestamp_key,
        rtc=rtc,
    )
