"""A simulated arm for the demo, benchmarks and the ROS sim node.

It starts on the simulator's reference trajectory, so a policy that plays the simulator's
chunks on time keeps it there, and any staleness or seam shows up as a deviation.
"""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import numpy.typing as npt

from sequence_ai_core.types import (
    DELTA_SPACES,
    VELOCITY_SPACES,
    FloatArray,
    ImageFrame,
    Observation,
    Proprioception,
)

from .catalogue import CATALOGUE, SimModel, find_model, reference_position
from .controlled import CONTROLLER_HZ, SERVO_LAG_S, ControlledJoints
from .controllers import CONTROLLER_MODELS
from .trajectory import Trajectory

#: Joint limits of the simulated arm (rad); the reference stays within +-1 rad.
JOINT_LIMIT_RAD = 2.8
#: Command watchdog: a velocity command drives the joints for at most this long after it
#: arrives, as a real velocity controller stops when commands stop coming.
COMMAND_TIMEOUT_S = 0.25


def _encode_jpeg(image: npt.NDArray[np.uint8], view: str, stamp_ms: int) -> ImageFrame:
    try:
        from sequence_ai_core.images import encode_image
    except ImportError:
        from PIL import Image

        buffer = io.BytesIO()
        Image.fromarray(image).save(buffer, format="JPEG", quality=90)
        return ImageFrame(view=view, data=buffer.getvalue(), timestamp_ms=stamp_ms)
    return encode_image(image, view=view, size=None, quality=90, timestamp_ms=stamp_ms)


class SimulatedArm:
    """Joints plus a trailing gripper (0..1), matching ``model``'s action layout.

    ``image_size`` is (height, width) of the rendered camera frames. ``controller``: "none"
    (``act`` sets the joints directly) or one of ``CONTROLLER_MODELS``, a ros2_control
    controller model fed through ``send`` and run at ``controller_hz`` in front of a servo
    lagging by ``servo_lag_s``; its clock is ``time.time()``, the clock ROS stamps use.
    """

    def __init__(
        self,
        model: SimModel | str,
        *,
        image_size: tuple[int, int] = (96, 128),
        cameras: bool = True,
        controller: str = "none",
        controller_hz: float = CONTROLLER_HZ,
        servo_lag_s: float = SERVO_LAG_S,
    ) -> None:
        entry = model if isinstance(model, SimModel) else find_model(model)
        if entry is None:
            raise ValueError(f"unknown model {model!r}; known: {', '.join(CATALOGUE)}")
        self.model = entry
        self.image_size = image_size
        self.cameras = cameras
        self._lock = threading.Lock()
        self._position = reference_position(entry, time.time())
        self._velocity: FloatArray = np.zeros(entry.joint_count)
        self._velocity_since = time.monotonic()
        self._moved_until = self._velocity_since
        #: (time.monotonic(), action) for every accepted command, for plots.
        self.commands: list[tuple[float, FloatArray]] = []
        self.joint_names = tuple(f"joint_{i + 1}" for i in range(entry.joint_count))
        self.controlled: ControlledJoints | None = None
        if controller != "none":
            if controller not in CONTROLLER_MODELS:
                known = ", ".join(("none", *CONTROLLER_MODELS))
                raise ValueError(f"unknown controller {controller!r}; known: {known}")
            self.controlled = ControlledJoints(
                controller,
                self.joint_names,
                self._position[:-1],
                time.time(),
                velocity_commands=entry.action_space in VELOCITY_SPACES,
                rate_hz=controller_hz,
                lag_s=servo_lag_s,
            )

    @property
    def joint_positions(self) -> FloatArray:
        """Joint positions (rad), without the gripper."""
        with self._lock:
            self._advance(time.monotonic())
            # Typed here: numpy >= 2.4 types .copy() as typing.Self, Any to mypy at Python 3.10.
            joints: FloatArray = self._position[:-1].copy()
            return joints

    def send_gripper(self, position: float) -> None:
        """The gripper's own controller: set its position (0..1)."""
        if np.isfinite(position):
            with self._lock:
                self._position[-1] = float(np.clip(position, 0.0, 1.0))

    def send(self, msg: Trajectory | list[float], *, gripper: float | None = None) -> str | None:
        """Deliver a controller message (arm joints only); the controller's rejection text,
        or None. ``gripper`` sets the gripper position alongside."""
        if self.controlled is None:
            raise RuntimeError("this arm has no controller model; use act()")
        with self._lock:
            problem = self.controlled.send(msg, time.time())
            if gripper is not None and np.isfinite(gripper):
                self._position[-1] = float(np.clip(gripper, 0.0, 1.0))
            self._advance(time.monotonic())
        return problem

    @property
    def gripper(self) -> float:
        with self._lock:
            return float(self._position[-1])

    def observe(self, instruction: str = "") -> Observation:
        with self._lock:
            self._advance(time.monotonic())
            position = self._position.copy()
        stamp_ms = int(time.time() * 1000)
        images: list[ImageFrame] = []
        if self.cameras:
            for index, view in enumerate(self.model.camera_views):
                picture = self._render(position, index)
                images.append(_encode_jpeg(picture, view, stamp_ms))
        proprio = Proprioception(
            joint_positions=[float(v) for v in position[:-1]], gripper=float(position[-1])
        )
        return Observation(proprioception=proprio, images=tuple(images), instruction=instruction)

    def act(self, action: FloatArray) -> None:
        """Apply one action. Velocities drive the joints from now until the next command (or
        the watchdog); deltas add; absolute values set. Joints are clamped to their limits."""
        values = np.asarray(action, dtype=np.float64).reshape(-1)
        if values.shape != (self.model.action_dim,) or not np.all(np.isfinite(values)):
            raise ValueError(f"action must be {self.model.action_dim} finite values")
        if self.controlled is not None:
            raise RuntimeError(f"this arm takes {self.controlled.name} messages through send()")
        now = time.monotonic()
        with self._lock:
            self._advance(now)
            joints = self._position[:-1]
            space = self.model.action_space
            self._velocity = np.zeros(self.model.joint_count)
            if space in VELOCITY_SPACES:
                self._velocity = values[:-1].copy()
            elif space in DELTA_SPACES:
                joints = joints + values[:-1]
            else:
                joints = values[:-1]
            joints = np.clip(joints, -JOINT_LIMIT_RAD, JOINT_LIMIT_RAD)
            gripper = float(np.clip(values[-1], 0.0, 1.0))
            self._position = np.append(joints, gripper)
            self._velocity_since = self._moved_until = now
            self.commands.append((now, values.copy()))

    def _advance(self, now: float) -> None:
        """Integrate the current velocity command up to ``now`` (caller holds the lock)."""
        if self.controlled is not None:
            self.controlled.advance(time.time())
            joints = np.clip(self.controlled.positions, -JOINT_LIMIT_RAD, JOINT_LIMIT_RAD)
            self._position[:-1] = joints
            return
        until = min(now, self._velocity_since + COMMAND_TIMEOUT_S)
        if until > self._moved_until:
            joints = self._position[:-1] + self._velocity * (until - self._moved_until)
            self._position[:-1] = np.clip(joints, -JOINT_LIMIT_RAD, JOINT_LIMIT_RAD)
            self._moved_until = until

    def _render(self, position: FloatArray, view_index: int) -> npt.NDArray[np.uint8]:
        """A small synthetic scene: a gradient with a disc that moves with the first joints."""
        height, width = self.image_size
        rows = np.linspace(0.0, 1.0, height)[:, None]
        cols = np.linspace(0.0, 1.0, width)[None, :]
        image = np.zeros((height, width, 3), dtype=np.uint8)
        image[..., 0] = (255 * rows * np.ones_like(cols)).astype(np.uint8)
        image[..., 1] = (255 * cols * np.ones_like(rows)).astype(np.uint8)
        image[..., 2] = 60 + 80 * view_index
        centre_y = 0.5 + 0.4 * np.tanh(position[0])
        centre_x = 0.5 + 0.4 * np.tanh(position[1 % len(position)])
        radius = 0.08 + 0.1 * float(position[-1])
        disc = (rows - centre_y) ** 2 + (cols - centre_x) ** 2 < radius**2
        image[disc] = (250, 250, 250)
        return image
