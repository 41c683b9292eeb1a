"""Between ROS messages and sequence_ai_core values, without importing ROS.

Message classes are passed in (``MessageTypes``), so the same code builds real rclpy messages
in the node and Humble-shaped test messages in tests. Float fields get Python floats: rclpy's
generated setters assert on element types and reject numpy arrays.
"""

from __future__ import annotations

import array
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sequence_ai_core.node_api import FloatArray, find_space, kind_of


class InputProblem(ValueError):
    """An input the node cannot build an observation from; the text names the input."""


@dataclass(frozen=True)
class MessageTypes:
    Float64MultiArray: Any
    MultiArrayDimension: Any
    JointTrajectory: Any
    JointTrajectoryPoint: Any
    JointState: Any
    Duration: Any
    Time: Any


@dataclass(frozen=True)
class Command:
    """One action split for publishing: ``arm`` as a forward controller takes it, ``gripper``
    positions, and joint-space targets where the action space allows them."""

    arm: FloatArray
    gripper: FloatArray
    positions: FloatArray | None = None
    velocities: FloatArray | None = None


@dataclass(frozen=True)
class JointReading:
    positions: FloatArray
    velocities: FloatArray | None
    gripper: float | None


def read_joints(
    names: Sequence[str],
    positions: Sequence[float],
    velocities: Sequence[float],
    wanted: Sequence[str],
    gripper_joint: str = "",
) -> JointReading:
    """Pick ``wanted`` joints by name, in that order; velocities only if all are present
    (the gateway is told nothing rather than zeros). Empty ``wanted`` keeps message order."""
    if len(positions) != len(names):
        raise InputProblem(f"joint_states has {len(names)} names but {len(positions)} positions")
    index = {name: i for i, name in enumerate(names)}
    arm = [n for n in (wanted or names) if n != gripper_joint]
    missing = [n for n in arm if n not in index]
    if missing:
        raise InputProblem(f"joint_states lacks joints {missing}")
    # Checked as plain floats: read on the control tick, before its command, where numpy's
    # calls on a few values cost more (docs/performance.md, "Measured on real rclpy").
    picked = [float(positions[index[n]]) for n in arm]
    if not all(map(math.isfinite, picked)):
        raise InputProblem("joint_states has non-finite positions")
    vel = None
    if len(velocities) == len(names):
        speeds = [float(velocities[index[n]]) for n in arm]
        # Joints without velocity sensing often report NaN: omit velocities, don't stop.
        vel = np.array(speeds, dtype=np.float64) if all(map(math.isfinite, speeds)) else None
    gripper = None
    if gripper_joint:
        if gripper_joint not in index:
            raise InputProblem(f"joint_states lacks gripper joint {gripper_joint!r}")
        gripper = float(positions[index[gripper_joint]])
        if not math.isfinite(gripper):
            raise InputProblem(f"gripper joint {gripper_joint!r} position is not finite")
    return JointReading(np.array(picked, dtype=np.float64), vel, gripper)


_CHANNELS = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1, "8UC3": 3, "8UC1": 1}


def image_to_rgb(
    height: int, width: int, encoding: str, step: int, data: bytes | memoryview
) -> npt.NDArray[np.uint8]:
    """sensor_msgs/Image → HxWx3 uint8 RGB. Rows may be padded (``step`` >= width*channels)."""
    channels = _CHANNELS.get(encoding)
    if channels is None:
        raise InputProblem(f"image encoding {encoding!r} unsupported (use rgb8/bgr8/mono8/...)")
    row = width * channels
    if step < row or len(data) < step * height or height == 0 or width == 0:
        raise InputProblem(f"image {width}x{height} {encoding}: data/step inconsistent")
    rows = np.frombuffer(data, dtype=np.uint8, count=step * height).reshape(height, step)
    pixels = rows[:, :row].reshape(height, width, channels)
    if channels == 1:
        return np.repeat(pixels, 3, axis=2)
    rgb = pixels[:, :, 2::-1] if encoding.startswith("bgr") else pixels[:, :, :3]
    return np.ascontiguousarray(rgb)


def command_from_action(
    action: FloatArray,
    *,
    action_space: str,
    gripper_dims: int,
    measured: FloatArray | None,
    period_s: float,
) -> Command:
    split = len(action) - gripper_dims
    arm, gripper = action[:split], action[split:]
    space = find_space(action_space)
    if space is None or not space.joint:
        return Command(arm, gripper)  # no joint targets: the values go out as they came
    if space.kind == "velocity":
        # A position target one period ahead lets joint_trajectory_controller follow velocities.
        target = None if measured is None else measured + arm * period_s
        return Command(arm, gripper, positions=target, velocities=arm)
    if space.kind == "absolute":
        return Command(arm, gripper, positions=arm)
    return Command(arm, gripper, positions=None if measured is None else measured + arm)


def stamp(types: MessageTypes, nanoseconds: int) -> Any:
    """A builtin_interfaces/Time from integer nanoseconds (rclpy's ``Time.to_msg`` split)."""
    return types.Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def duration(types: MessageTypes, seconds: float) -> Any:
    nanoseconds = max(0, round(seconds * 1e9))
    return types.Duration(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def _floats(values: FloatArray | Sequence[float] | None) -> list[float]:
    return [] if values is None else [float(v) for v in values]


def float64_multi_array(types: MessageTypes, values: FloatArray, label: str) -> Any:
    msg = types.Float64MultiArray()
    msg.layout.dim = [types.MultiArrayDimension(label=label, size=len(values), stride=len(values))]
    # as the message stores it: an array.array skips its setter's per-value checks
    msg.data = array.array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return msg


def joint_trajectory(
    types: MessageTypes,
    names: Sequence[str],
    points: Sequence[tuple[FloatArray | None, FloatArray | None, float]],
    stamp: Any = None,
) -> Any:
    """Points as (positions, velocities, time_from_start_s); a missing part stays empty."""
    msg = types.JointTrajectory()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.joint_names = list(names)
    msg.points = [
        types.JointTrajectoryPoint(
            positions=_floats(pos), velocities=_floats(vel), time_from_start=duration(types, t)
        )
        for pos, vel, t in points
    ]
    return msg


def joint_state(
    types: MessageTypes,
    names: Sequence[str],
    positions: FloatArray | None,
    velocities: FloatArray | None,
    stamp: Any = None,
) -> Any:
    msg = types.JointState()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.name = list(names)
    msg.position = _floats(positions)
    msg.velocity = _floats(velocities)
    return msg


def chunk_trajectory(
    types: MessageTypes,
    steps: FloatArray,
    *,
    names: Sequence[str],
    action_space: str,
    control_hz: float,
    stamp: Any = None,
) -> Any:
    """A whole chunk for recording and plotting: step i at i/hz after the observation.
    Velocity spaces fill ``velocities`` (gripper dims included, as the model sent them)."""
    velocity = kind_of(action_space) == "velocity"
    points = [
        (None if velocity else row, row if velocity else None, i / control_hz)
        for i, row in enumerate(steps)
    ]
    return joint_trajectory(types, names, points, stamp)
