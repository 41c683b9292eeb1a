"""The latest value of every input, and the observation built from them when a request is due.

Callbacks only store messages (cheap, at sensor rate); the cameras' newest frames are fetched
(``pull_frames``), converted and JPEG-encoded in ``observe``, which the engine calls only when
it is about to send a request. Ages are measured from arrival on this machine's monotonic
clock: header stamps may come from another clock (sim time, a camera's own clock), arrival
time cannot be ahead of the truth.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sequence_ai_core import ImageFrame, Observation, Proprioception, RawFrame, encode_image
from sequence_ai_core.node_api import FloatArray

from .conversions import InputProblem, JointReading, image_to_rgb, read_joints
from .parameters import NodeConfig

# Header stamps further than this from the wall clock are not wall-clock times (sim time, or a
# device clock): then the arrival time stands in for the capture time.
_PLAUSIBLE_STAMP_S = 60.0


@dataclass(frozen=True)
class _Received:
    payload: object
    arrived: float  # time.monotonic()
    wall_ms: int  # capture time, wall clock, for ImageFrame.timestamp_ms


@dataclass(frozen=True)
class RawImage:
    height: int
    width: int
    encoding: str
    step: int
    data: bytes | memoryview  # the message's own buffer: converted only when a request is due


class _JointMessage:
    """A joint_states message as it came: read when the control thread first asks, so that a
    reading is made at most once a tick rather than at the sensor's rate."""

    def __init__(
        self,
        names: Sequence[str],
        positions: Sequence[float],
        velocities: Sequence[float],
        config: NodeConfig,
    ) -> None:
        self._fields = (names, positions, velocities, config.joint_names, config.gripper_joint)

    @functools.cached_property
    def reading(self) -> JointReading | InputProblem:
        try:
            return read_joints(*self._fields)
        except InputProblem as exc:
            return exc


def _reading(received: _Received | None) -> JointReading | InputProblem | None:
    payload = received.payload if received is not None else None
    return payload.reading if isinstance(payload, _JointMessage) else None


class InputStore:
    def __init__(
        self,
        config: NodeConfig,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._config = config
        self._monotonic = monotonic
        self._wall = wall
        self._joints: _Received | None = None
        self._images: dict[str, _Received] = {}
        self.instruction = config.instruction
        #: Why the last observe() returned None; None when it succeeded.
        self.problem: str | None = None
        #: Stores the cameras' newest frames (``on_image``) before ``observe`` reads them.
        self.pull_frames: Callable[[], None] = lambda: None

    def warm_up(self) -> None:
        """Encode one blank frame as a request does: Pillow loads its codecs with its first
        image, which would otherwise cost an episode's first request under a CPU quota
        (docs/performance.md, "Measured on real rclpy")."""
        if self._config.cameras:
            size, quality = self._config.image_size, self._config.jpeg_quality
            blank = image_to_rgb(2, 2, "rgb8", 6, bytes(12))
            encode_image(blank, view="warm-up", size=size, quality=quality)  # as RawFrame does

    def _received(
        self, payload: object, stamp_s: float | None, arrived: float | None = None
    ) -> _Received:
        wall = self._wall()
        if stamp_s is None or stamp_s <= 0 or abs(stamp_s - wall) > _PLAUSIBLE_STAMP_S:
            stamp_s = wall
        arrived = self._monotonic() if arrived is None else arrived
        return _Received(payload, arrived, int(stamp_s * 1000))

    def on_joint_state(
        self,
        names: Sequence[str],
        positions: Sequence[float],
        velocities: Sequence[float],
        stamp_s: float | None = None,
    ) -> None:
        self._joints = self._received(
            _JointMessage(names, positions, velocities, self._config), stamp_s
        )

    def on_image(
        self,
        view: str,
        image: RawImage | bytes,
        stamp_s: float | None = None,
        arrived: float | None = None,
    ) -> None:
        """The latest frame of ``view``; ``arrived`` (monotonic) when it came before now."""
        self._images[view] = self._received(image, stamp_s, arrived)

    def arm_problem(self, max_age_s: float | None = None) -> str | None:
        """Why there is no usable arm reading (none, unusable, or older than ``max_age_s``)."""
        joints = self._joints
        if joints is None:
            return "no joint_states received yet"
        reading = _reading(joints)
        if not isinstance(reading, JointReading):
            return str(reading)
        age = self._monotonic() - joints.arrived
        if max_age_s is not None and age > max_age_s:
            return f"joint_states is {age:.2f} s old (max_observation_age_s={max_age_s:g})"
        return None

    def arm_stale(self, max_age_s: float) -> str | None:
        """Why motion must end now: the arm reading is unusable or older than ``max_age_s``;
        None while it is fresh, and None before the first one (without a reading no request
        is sent, so nothing moves; ``observe`` names the missing input meanwhile)."""
        if self._joints is None:
            return None
        return self.arm_problem(max_age_s)

    def measured_arm(self, max_age_s: float | None = None) -> FloatArray | None:
        """Latest arm joint positions, or None if there is none as fresh as ``max_age_s``.
        Targets built on a frozen reading (a stalled driver) would pull the arm back."""
        reading = _reading(self._joints)
        if self.arm_problem(max_age_s) is not None or not isinstance(reading, JointReading):
            return None
        # Typed here: numpy >= 2.4 types .copy() as typing.Self, Any to mypy at Python 3.10.
        positions: FloatArray = reading.positions.copy()
        return positions

    def _fresh(self, what: str, received: _Received | None, now: float) -> _Received:
        if received is None:
            raise InputProblem(f"no {what} received yet")
        age = now - received.arrived
        if age > self._config.max_observation_age_s:
            limit = self._config.max_observation_age_s
            raise InputProblem(f"{what} is {age:.2f} s old (max_observation_age_s={limit:g})")
        return received

    def _frame(self, view: str, topic: str, now: float) -> ImageFrame:
        received = self._fresh(f"image on {topic}", self._images.get(view), now)
        payload = received.payload
        size, quality = self._config.image_size, self._config.jpeg_quality
        try:
            if isinstance(payload, RawImage):
                pixels = image_to_rgb(
                    payload.height, payload.width, payload.encoding, payload.step, payload.data
                )
                # the pixels as they are: encoded (resized, JPEG) on the worker for the
                # gateway, resized raw for an openpi server; the array is the message's own
                return RawFrame(
                    view,
                    pixels,
                    size=size,
                    quality=quality,
                    timestamp_ms=received.wall_ms,
                    copy=False,
                )
            if not isinstance(payload, bytes):  # CompressedImage data is encoded already
                raise InputProblem(f"image on {topic}: no image stored ({type(payload).__name__})")
            compressed = payload
            return encode_image(
                compressed, view=view, size=size, quality=quality, timestamp_ms=received.wall_ms
            )
        except (ValueError, OSError) as exc:
            raise InputProblem(f"image on {topic} unusable: {exc}") from exc

    def observe(self) -> Observation | None:
        """An observation from fresh inputs, or None with ``problem`` naming the input."""
        self.pull_frames()
        now = self._monotonic()
        try:
            joints = _reading(self._fresh("joint_states", self._joints, now))
            if not isinstance(joints, JointReading):  # the reading was unusable
                raise joints if isinstance(joints, InputProblem) else InputProblem(str(joints))
            frames = tuple(self._frame(c.view, c.topic, now) for c in self._config.cameras)
        except InputProblem as exc:
            self.problem = str(exc)
            return None
        self.problem = None
        proprio = Proprioception(
            joint_positions=[float(v) for v in joints.positions],
            joint_velocities=None
            if joints.velocities is None
            else [float(v) for v in joints.velocities],
            gripper=joints.gripper,
        )
        return Observation(proprioception=proprio, images=frames, instruction=self.instruction)
