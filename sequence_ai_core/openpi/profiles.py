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
as ``Profile``; see ``user_profiles.profile_from_mapping``. Any profile can also send what
the engine plans to play while a request is out, for real-time chunking (``rtc``: off in the
built-in ones, on as ``droid+rtc`` and the like; ``openpi.rtc``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from PIL import Image

from ..errors import InvalidRequest
from ..types import ImageFrame, Observation
from .rtc import RtcSpec

if TYPE_CHECKING:
    from ..playback.source import PlannedPrefix

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
    #: If set, every request also carries the engine's planned prefix and delay (``rtc``);
    #: None sends exactly the keys above.
    rtc: RtcSpec | None = None

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

    def encode(
        self, observation: Observation, planned: PlannedPrefix | None = None
    ) -> dict[str, Any]:
        """The server's input dict; ``InvalidRequest`` for what cannot be sent. ``planned``
        is sent only if the profile has ``rtc`` (then an absent one as nothing planned)."""
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
        if self.rtc is not None:
            prefix, delay = self.rtc.values(planned, self.action_dim)
            _put(out, self.rtc.prefix_key, prefix)
            _put(out, self.rtc.delay_key, delay)
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
