"""The node's joint_trajectory output against the controller models: what it builds is
accepted by Humble's and Jazzy's default joint_trajectory_controller, is played at the times
the engine planned, and every point is checked like a single action. ROS-free: messages are
Humble's definitions (rosbags), the controllers the models in sequence_ai_sim."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support import humble_messages as messages

from sequence_ai_ros import conversions as conv
from sequence_ai_ros import parameters
from sequence_ai_ros import trajectories as traj
from sequence_ai_ros.hold import hold_command
from sequence_ai_ros.safety import SafetyChecks, check_trajectory
from sequence_ai_sim.commands import controller_trajectory
from sequence_ai_sim.controlled import ControlledJoints
from sequence_ai_sim.controllers import humble_defaults, jazzy_defaults, validate_trajectory

JOINTS = [f"joint_{i + 1}" for i in range(7)]
PERIOD = 1 / 15
NOW_NS = 1_800_000_000 * 10**9
DEFAULTS = {"humble": humble_defaults(JOINTS), "jazzy": jazzy_defaults(JOINTS)}


@pytest.fixture(scope="module")
def types() -> conv.MessageTypes:
    types: conv.MessageTypes = messages.message_types()
    return types


def _stamp(types: conv.MessageTypes, ns: int) -> Any:
    """A builtin_interfaces/Time of the same build as ``types`` (a header's own field)."""
    time_type = type(types.JointTrajectory().header.stamp)
    return time_type(sec=ns // 10**9, nanosec=ns % 10**9)


def _message(types: conv.MessageTypes, planned: traj.PlannedTrajectory, stamp_ns: int) -> Any:
    rows = planned.velocities if planned.velocities is not None else [None] * len(planned)
    points = list(zip(planned.positions, rows, planned.times_s, strict=True))
    return conv.joint_trajectory(types, JOINTS, points, _stamp(types, stamp_ns))


def _velocity_chunk(steps: int = 15) -> np.ndarray:
    t = np.arange(steps)[:, None] * PERIOD
    arm = 0.3 * np.cos(2.0 * t + np.arange(7)[None, :])
    return np.hstack([arm, np.full((steps, 1), 0.4)])


def _absolute_chunk(steps: int = 16) -> np.ndarray:
    t = np.arange(steps)[:, None] * 0.04
    return 0.5 * np.sin(1.5 * t + np.arange(6)[None, :])


@pytest.mark.parametrize("distro", ["humble", "jazzy"])
@pytest.mark.parametrize("velocities", [False, True])
@pytest.mark.parametrize("space", ["joint_velocity", "joint_absolute"])
def test_the_rest_of_a_chunk_is_accepted_by_default_controllers(
    types: conv.MessageTypes, distro: str, velocities: bool, space: str
) -> None:
    chunk = _velocity_chunk() if space == "joint_velocity" else _absolute_chunk()
    dims = 1 if space == "joint_velocity" else 0
    joints = chunk.shape[1] - dims
    settings = (
        humble_defaults(JOINTS[:joints]) if distro == "humble" else jazzy_defaults(JOINTS[:joints])
    )
    for index in (0, 5, len(chunk) - 1):  # a new chunk can start playing anywhere in it
        planned = traj.plan_trajectory(
            chunk[index:],
            action_space=space,
            gripper_dims=dims,
            measured=np.full(joints, 0.1),
            period_s=PERIOD,
            velocities=velocities,
        )
        assert isinstance(planned, traj.PlannedTrajectory)
        late_ns = 30 * 10**6  # the tick ran 30 ms after the step was due
        rows = planned.velocities if planned.velocities is not None else [None] * len(planned)
        points = list(zip(planned.positions, rows, planned.times_s, strict=True))
        msg = conv.joint_trajectory(types, JOINTS[:joints], points, _stamp(types, NOW_NS - late_ns))
        received = controller_trajectory(msg)
        assert validate_trajectory(settings, received, NOW_NS * 1e-9 + 0.002) is None
        assert received.points[0].time_from_start_ns > 0  # never a step at the first point
        if velocities:
            assert list(msg.points[-1].velocities) == [0.0] * joints


@pytest.mark.parametrize("distro", ["humble", "jazzy"])
@pytest.mark.parametrize("space", ["joint_velocity", "joint_absolute"])
def test_the_hold_is_accepted_by_default_controllers(
    types: conv.MessageTypes, distro: str, space: str
) -> None:
    last = np.array([0.2] * 7 + [0.7])
    command = hold_command(
        action_space=space, gripper_dims=1, last_action=last, measured=np.zeros(7)
    )
    assert command is not None
    msg = conv.joint_trajectory(
        types, JOINTS, [(command.positions, command.velocities, PERIOD)], _stamp(types, NOW_NS)
    )
    assert validate_trajectory(DEFAULTS[distro], controller_trajectory(msg), NOW_NS * 1e-9) is None


def test_one_point_per_tick_with_velocities_is_what_jazzy_rejects(types: conv.MessageTypes) -> None:
    command = conv.command_from_action(
        _velocity_chunk()[0], action_space="joint_velocity", gripper_dims=1,
        measured=np.zeros(7), period_s=PERIOD,
    )  # fmt: skip
    msg = conv.joint_trajectory(
        types, JOINTS, [(command.positions, command.velocities, PERIOD)], _stamp(types, NOW_NS)
    )
    received = controller_trajectory(msg)
    assert validate_trajectory(DEFAULTS["humble"], received, NOW_NS * 1e-9) is None
    problem = validate_trajectory(DEFAULTS["jazzy"], received, NOW_NS * 1e-9)
    assert problem and problem.startswith("Velocity of last trajectory point of joint joint_1")
    # ... so the node refuses that configuration, naming the controller parameter
    raw = {spec.name: spec.default for spec in parameters.PARAMETERS}
    raw.update(
        output_type="joint_trajectory", joint_names=JOINTS, trajectory_mode="point",
        trajectory_velocities=True,
    )  # fmt: skip
    with pytest.raises(parameters.ParameterError) as info:
        parameters.parse(raw)
    assert info.value.name == "trajectory_velocities"
    assert "allow_nonzero_velocity_at_trajectory_end: true on the controller" in str(info.value)
    raw["allow_nonzero_velocity_at_trajectory_end"] = True
    assert parameters.parse(raw).trajectory_mode == "point"
    # a chunk trajectory carries the hand-over's blended targets (Control.step), so any
    # hand-over goes with it
    raw.update(trajectory_mode="chunk", handover="fade", smooth_seam=2)
    assert parameters.parse(raw).run.handover == "fade"
    raw["handover"] = "spline"
    with pytest.raises(parameters.ParameterError, match="handover"):
        parameters.parse(raw)


@pytest.mark.parametrize("controller", ["jtc_humble", "jtc_jazzy", "jtc_jazzy_desired_state"])
def test_the_controller_plays_each_step_when_the_engine_planned_it(
    types: conv.MessageTypes, controller: str
) -> None:
    chunk = _absolute_chunk()
    period = 0.04
    start = chunk[0] - 0.01
    planned = traj.plan_trajectory(
        chunk, action_space="joint_absolute", gripper_dims=0, measured=start,
        period_s=period, velocities=False,
    )  # fmt: skip
    assert isinstance(planned, traj.PlannedTrajectory)
    arm = ControlledJoints(
        controller, JOINTS[:6], start, NOW_NS * 1e-9, velocity_commands=False, lag_s=0.0
    )
    msg = conv.joint_trajectory(
        types, JOINTS[:6], list(zip(planned.positions, [None] * 16, planned.times_s, strict=True)),
        _stamp(types, NOW_NS),
    )  # fmt: skip
    assert arm.send(controller_trajectory(msg), NOW_NS * 1e-9 + 0.001) is None
    ahead = 0.002 if controller.startswith("jtc_jazzy") else 0.0  # Jazzy: one cycle ahead
    for j in range(len(chunk)):  # step j's target is reached one period after it was due
        arm.advance(NOW_NS * 1e-9 + (j + 1) * period - ahead)
        assert np.allclose(arm.reference, chunk[j], atol=1e-4), j
    arm.advance(NOW_NS * 1e-9 + 20 * period)
    assert np.allclose(arm.reference, chunk[-1])


def test_velocity_plans_integrate_from_the_measured_position() -> None:
    chunk = _velocity_chunk(4)
    measured = np.linspace(-0.3, 0.3, 7)
    planned = traj.plan_trajectory(
        chunk, action_space="joint_velocity", gripper_dims=1, measured=measured,
        period_s=PERIOD, velocities=True,
    )  # fmt: skip
    assert isinstance(planned, traj.PlannedTrajectory)
    expected = measured + np.cumsum(chunk[:, :7], axis=0) * PERIOD
    assert np.allclose(planned.positions, expected)
    assert np.allclose(planned.times_s, [PERIOD, 2 * PERIOD, 3 * PERIOD, 4 * PERIOD])
    assert planned.velocities is not None and np.all(planned.velocities[-1] == 0.0)
    assert np.allclose(planned.velocities[0], 0.5 * (chunk[0, :7] + chunk[1, :7]))
    assert np.allclose(planned.gripper, 0.4)
    no_position = traj.plan_trajectory(
        chunk, action_space="joint_velocity", gripper_dims=1, measured=None,
        period_s=PERIOD, velocities=False,
    )  # fmt: skip
    assert isinstance(no_position, str) and "measured" in no_position
    assert "no joint targets" in str(
        traj.plan_trajectory(chunk, action_space="ee_delta", gripper_dims=1, measured=measured,
                             period_s=PERIOD, velocities=False)
    )  # fmt: skip


def test_every_planned_point_passes_the_single_action_checks() -> None:
    safety = SafetyChecks(8, lower=[-0.5] * 8, upper=[0.5] * 8, max_step=[0.2])
    chunk = _velocity_chunk(6)
    assert check_trajectory(safety, chunk, chunk[0]) is None
    chunk[3, 2] = 0.9  # above the limit, and a jump from the step before
    problem = check_trajectory(safety, chunk, chunk[0])
    assert problem is not None and problem.startswith("planned step 3 of the trajectory:")
    chunk[3, 2] = np.nan
    assert "non-finite" in (check_trajectory(safety, chunk, None) or "")


def test_a_new_chunk_carries_on_from_the_trajectory_sent_before() -> None:
    streamer = traj.ChunkStreamer(action_space="joint_absolute", gripper_dims=0, velocities=False)
    chunk, period, stamp = _absolute_chunk(), 0.04, 1_800_000_000.0
    first = streamer.plan(chunk, measured=chunk[0] - 0.01, period_s=period, stamp_s=stamp)
    assert isinstance(first, traj.PlannedTrajectory) and first.times_s[0] == period
    later = stamp + 5.5 * period  # halfway between the targets of steps 4 and 5
    expected = 0.5 * (chunk[4] + chunk[5])
    following = streamer.plan(chunk[3:] + 0.001, measured=expected, period_s=period, stamp_s=later)
    assert isinstance(following, traj.PlannedTrajectory)
    assert following.times_s[0] == 0.0 and np.allclose(following.positions[0], expected)
    assert np.allclose(following.positions[1:], chunk[3:] + 0.001)
    # the arm is not where the last trajectory put it: start again from the arm
    again = streamer.plan(chunk, measured=expected + 0.5, period_s=period, stamp_s=later + period)
    assert isinstance(again, traj.PlannedTrajectory) and again.times_s[0] == period
    end = later + period + 16 * period  # past the end the controller holds the last point
    assert np.allclose(streamer.position_at(end + 1.0), chunk[-1])
    assert streamer.position_at(later) is None  # before the last trajectory sent
    streamer.reset()  # a hold went out
    assert streamer.position_at(later + period) is None


def test_continued_trajectories_are_accepted_and_do_not_drag_the_arm_back(
    types: conv.MessageTypes,
) -> None:
    """Two chunks into default Humble and Jazzy controllers with a lagging servo: the second
    trajectory starts where the first had the command, not at the lagging arm."""
    chunk = _absolute_chunk()
    period, start_s = 0.04, NOW_NS * 1e-9
    for settings in DEFAULTS.values():
        names = JOINTS[:6]
        arm = ControlledJoints(
            f"jtc_{settings.distro}", names, chunk[0], start_s, velocity_commands=False
        )
        streamer = traj.ChunkStreamer(
            action_space="joint_absolute", gripper_dims=0, velocities=False
        )
        for stamp, steps in ((start_s, chunk), (start_s + 8 * period, chunk[8:])):
            arm.advance(stamp + 0.005)
            planned = streamer.plan(steps, measured=arm.positions, period_s=period, stamp_s=stamp)
            assert isinstance(planned, traj.PlannedTrajectory)
            points = list(
                zip(planned.positions, [None] * len(planned), planned.times_s, strict=True)
            )
            msg = conv.joint_trajectory(types, names, points, _stamp(types, round(stamp * 1e9)))
            assert arm.send(controller_trajectory(msg), stamp + 0.005) is None
        arm.advance(start_s + 20 * period)
        assert arm.max_command_jump < 0.003  # about one cycle of motion; no jump back
