"""Observation profiles: how an ``Observation`` becomes one openpi server's input dict.

openpi policies take policy-specific dicts and answer only ``actions`` of shape (horizon,
dim): nothing in the answer says the rate, the action space or which dimensions are
grippers, so those are the profile's. Built in, from openpi's own examples
(``examples/droid``, ``examples/aloha_real``, ``examples/libero``):

- ``droid``: views ``exterior_1`` and ``wrist_left`` as 224x224 HWC images, 7 joint
  positions and the gripper; 15 Hz, 8 dims (7 joint velocities, gripper position at 7).
- ``aloha``: ``cam_high`` (``cam_low``, ``cam_left_wrist``, ``cam_right_wrist`` optional)
  as ``images/<cam>`` 224x224 CHW, 14 joint values as ``state``; 50 Hz, 14 absolute joint
  dims (grippers at 6 and 13).
- ``libero``: ``agentview`` and ``wrist`` as 224x224 HWC, the example's 8 state values
  (end-effector position, axis-angle, two gripper fingers) passed as ``joint_positions``;
  20 Hz, 7 end-effector deltas (gripper at 6).

Images are sent as raw uint8 arrays resized with padding the way openpi's
``image_tools.resize_with_pad`` does it (scale by the larger ratio, truncate, centre on
black), not as JPEG. A user profile is a mapping (or a YAML/JSON file) with the same fields
as ``Profile``; see ``profile_from_mapping``.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from ..errors import ConfigurationError, InvalidRequest
from ..limits import MAX_ACTION_DIM, MAX_CONTROL_HZ, MAX_STEPS, MIN_CONTROL_HZ
from ..types import ACTION_SPACES, ImageFrame, Observation

#: Proprioception fields a state entry may draw from, in ``Proprioception``.
STATE_SOURCES = ("joint_positions", "joint_velocities", "end_effector_pose", "gripper")
_BILINEAR = getattr(Image, "Resampling", Image).BILINEAR


@dataclass(frozen=True)
class ImageSpec:
    """One camera: the ``Observation`` view it comes from and where the server wants it."""

    key: tuple[str, ...]
    view: str
    height: int = 224
    width: int = 224
    #: ``hwc`` (height, width, channel) or ``chw`` (ALOHA's policies take channels first).
    layout: str = "hwc"
    required: bool = True


@dataclass(frozen=True)
class StateSpec:
    """One proprioceptive entry: ``sources`` concatenated, ``size`` values, float64."""

    key: tuple[str, ...]
    sources: tuple[str, ...]
    size: int


@dataclass(frozen=True)
class Profile:
    name: str
    images: tuple[ImageSpec, ...]
    state: tuple[StateSpec, ...]
    control_hz: float
    action_space: str
    action_dim: int
    gripper_dims: tuple[int, ...] = ()
    robot: str = ""
    #: Where the instruction goes (sent only when non-empty: an empty one would replace a
    #: server's default prompt); None sends none.
    prompt_key: tuple[str, ...] | None = ("prompt",)
    #: If set, every answer must have exactly this many steps.
    action_horizon: int | None = None
    #: If set, the observation's wall-clock time (seconds, float64) is sent under this key;
    #: openpi's own policies ignore keys they do not read.
    timestamp_key: tuple[str, ...] | None = None

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(spec.view for spec in self.images)

    def check(self, observation: Observation) -> None:
        """``InvalidRequest`` naming the field for an observation this profile cannot map."""
        views = [getattr(frame, "view", None) for frame in observation.images]
        for i, view in enumerate(views):
            if view not in self.views:
                raise InvalidRequest(
                    f"observation.images[{i}].view is {view!r}; openpi profile {self.name} "
                    f"takes {', '.join(self.views)}"
                )
        for spec in self.images:
            if spec.required and spec.view not in views:
                raise InvalidRequest(
                    f"observation.images has no {spec.view!r} view: openpi profile "
                    f"{self.name} needs {', '.join(s.view for s in self.images if s.required)}"
                )
        for state in self.state:
            _state_values(observation, state, self.name)

    def encode(self, observation: Observation) -> dict[str, Any]:
        """The server's input dict; ``InvalidRequest`` for what cannot be sent."""
        self.check(observation)
        out: dict[str, Any] = {}
        frames = {frame.view: frame for frame in observation.images}
        for spec in self.images:
            if spec.view in frames:
                _put(out, spec.key, image_array(frames[spec.view], spec))
        for state in self.state:
            _put(out, state.key, _state_values(observation, state, self.name))
        if self.prompt_key is not None and observation.instruction:
            if not isinstance(observation.instruction, str):
                raise InvalidRequest("observation.instruction must be a string")
            _put(out, self.prompt_key, observation.instruction)
        if self.timestamp_key is not None:
            _put(out, self.timestamp_key, np.float64(observed_at_s(observation)))
        return out


def observed_at_s(observation: Observation) -> float:
    """Wall-clock seconds of the newest image (the observation's time), else now."""
    import time

    stamps = [f.timestamp_ms for f in observation.images if isinstance(f.timestamp_ms, int)]
    return max(stamps) / 1000.0 if stamps else time.time()


def _put(out: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    node = out
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value


def _state_values(observation: Observation, spec: StateSpec, profile: str) -> np.ndarray[Any, Any]:
    proprio = observation.proprioception
    values: list[float] = []
    for source in spec.sources:
        part = getattr(proprio, source)
        if part is None:
            raise InvalidRequest(
                f"observation.proprioception.{source} is missing: openpi profile {profile} "
                f"sends it as {'/'.join(spec.key)}"
            )
        items = [part] if source == "gripper" else list(part)
        for i, value in enumerate(items):
            if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.number)
            ):
                raise InvalidRequest(f"observation.proprioception.{source}[{i}] is not a number")
            if not math.isfinite(float(value)):
                raise InvalidRequest(f"observation.proprioception.{source}[{i}] is not finite")
            values.append(float(value))
    if len(values) != spec.size:
        raise InvalidRequest(
            f"observation.proprioception.{'+'.join(spec.sources)} has {len(values)} values; "
            f"openpi profile {profile} sends {spec.size} as {'/'.join(spec.key)}"
        )
    return np.asarray(values, dtype=np.float64)


# ---------------------------------------------------------------------- images


def _pixels(frame: ImageFrame) -> npt.NDArray[np.uint8]:
    raw = getattr(frame, "pixels", None)  # a RawFrame: the camera's own array
    if raw is not None:
        array = np.asarray(raw)
        if array.dtype != np.uint8 or array.ndim not in (2, 3) or array.size == 0:
            raise InvalidRequest(
                f"image {frame.view!r} must be an HxW, HxWx3 or HxWx4 uint8 array, "
                f"got {array.dtype} {array.shape}"
            )
        if array.ndim == 3 and array.shape[2] == 3:
            return array
        if array.ndim == 3 and array.shape[2] != 4:
            raise InvalidRequest(f"image {frame.view!r} has {array.shape[2]} channels")
        return np.asarray(Image.fromarray(np.ascontiguousarray(array)).convert("RGB"))
    from ..images import image_bytes

    try:
        data = image_bytes(frame.data, f"image {frame.view!r}")
        with Image.open(io.BytesIO(data)) as opened:
            return np.asarray(opened.convert("RGB"))
    except (ValueError, OSError, Image.DecompressionBombError) as exc:
        raise InvalidRequest(str(exc)) from None


def resize_with_pad(
    pixels: npt.NDArray[np.uint8], height: int, width: int
) -> npt.NDArray[np.uint8]:
    """Fit ``pixels`` (HxWx3) into height x width keeping aspect, centred on black, the way
    openpi's ``image_tools.resize_with_pad`` does (the policies were trained on that)."""
    cur_h, cur_w = pixels.shape[:2]
    if (cur_h, cur_w) == (height, width):
        return pixels
    ratio = max(cur_w / width, cur_h / height)
    new_h, new_w = max(1, int(cur_h / ratio)), max(1, int(cur_w / ratio))
    resized = Image.fromarray(np.ascontiguousarray(pixels)).resize((new_w, new_h), _BILINEAR)
    canvas = Image.new("RGB", (width, height), 0)
    canvas.paste(resized, (max(0, int((width - new_w) / 2)), max(0, int((height - new_h) / 2))))
    return np.asarray(canvas)


def image_array(frame: ImageFrame, spec: ImageSpec) -> npt.NDArray[np.uint8]:
    fitted = resize_with_pad(_pixels(frame), spec.height, spec.width)
    out = np.transpose(fitted, (2, 0, 1)) if spec.layout == "chw" else fitted
    return np.ascontiguousarray(out, dtype=np.uint8)


# ---------------------------------------------------------------------- built in


def _images(
    *specs: tuple[str, str], layout: str = "hwc", optional: Sequence[str] = ()
) -> tuple[ImageSpec, ...]:
    return tuple(
        ImageSpec(tuple(key.split("|")), view, layout=layout, required=view not in optional)
        for key, view in specs
    )


BUILTIN: dict[str, Profile] = {
    "droid": Profile(
        name="droid",
        images=_images(
            ("observation/exterior_image_1_left", "exterior_1"),
            ("observation/wrist_image_left", "wrist_left"),
        ),
        state=(
            StateSpec(("observation/joint_position",), ("joint_positions",), 7),
            StateSpec(("observation/gripper_position",), ("gripper",), 1),
        ),
        control_hz=15.0,
        action_space="joint_velocity",
        action_dim=8,
        gripper_dims=(7,),
        robot="droid_franka",
    ),
    "aloha": Profile(
        name="aloha",
        images=_images(
            ("images|cam_high", "cam_high"),
            ("images|cam_low", "cam_low"),
            ("images|cam_left_wrist", "cam_left_wrist"),
            ("images|cam_right_wrist", "cam_right_wrist"),
            layout="chw",
            optional=("cam_low", "cam_left_wrist", "cam_right_wrist"),
        ),
        state=(StateSpec(("state",), ("joint_positions",), 14),),
        control_hz=50.0,
        action_space="joint_absolute",
        action_dim=14,
        gripper_dims=(6, 13),
        robot="aloha",
    ),
    "libero": Profile(
        name="libero",
        images=_images(("observation/image", "agentview"), ("observation/wrist_image", "wrist")),
        state=(StateSpec(("observation/state",), ("joint_positions",), 8),),
        control_hz=20.0,
        action_space="ee_delta",
        action_dim=7,
        gripper_dims=(6,),
        robot="panda_libero",
    ),
}


# ---------------------------------------------------------------------- user profiles


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
    if not os.path.isfile(name):
        raise ConfigurationError(
            f"unknown openpi profile {name!r}: built in are {', '.join(BUILTIN)}; "
            "or give a mapping or the path of a YAML/JSON file"
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


def profile_from_mapping(data: Mapping[str, Any]) -> Profile:
    """A user profile, every field checked (``ConfigurationError`` names the field).

    Fields: ``name``, ``control_hz``, ``action_space`` (one of ``types.ACTION_SPACES``),
    ``action_dim``, ``gripper_dims`` (list), ``robot``, ``action_horizon`` (optional),
    ``prompt_key`` (default ``prompt``; null for none), ``timestamp_key`` (optional),
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
    if space not in ACTION_SPACES:
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
    return Profile(
        name=str(data.get("name", "custom")),
        images=tuple(image_specs),
        state=tuple(state_specs),
        control_hz=float(hz),
        action_space=str(space),
        action_dim=dim,
        gripper_dims=gripper_dims,
        robot=str(data.get("robot", "")),
        prompt_key=None if prompt is None else _key(prompt, "prompt_key"),
        action_horizon=None if horizon is None else _int(horizon, "action_horizon", 1, MAX_STEPS),
        timestamp_key=None if stamp is None else _key(stamp, "timestamp_key"),
    )
