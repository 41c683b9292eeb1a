"""The ros2_control controller models: what each accepts and rejects (with the controller's
own log text), and how it plays what it accepted at the controller rate."""

from __future__ import annotations

import numpy as np
import pytest

from sequence_ai_sim.controlled import ControlledJoints
from sequence_ai_sim.controllers import (
    humble_defaults,
    jazzy_defaults,
    validate_trajectory,
)
from sequence_ai_sim.trajectory import Trajectory, TrajectoryPoint

JOINTS = ("joint_1", "joint_2", "joint_3")
NOW = 1_800_000_000.0  # seconds on the ROS clock
HUMBLE, JAZZY = humble_defaults(JOINTS), jazzy_defaults(JOINTS)
#: Every JTC model: the open-loop / desired-state ones validate as their distro's defaults.
ALL_JTC = [
    HUMBLE,
    JAZZY,
    humble_defaults(JOINTS, from_desired_state=True),
    jazzy_defaults(JOINTS, from_desired_state=True),
]
ALL_IDS = ["humble", "jazzy", "humble-open-loop", "jazzy-desired-state"]
MS = 1_000_000


def point(
    positions: list[float], ms: int, velocities: list[float] | None = None
) -> TrajectoryPoint:
    return TrajectoryPoint(tuple(positions), tuple(velocities or ()), (), ms * MS)


def trajectory(
    *points: TrajectoryPoint, names: tuple[str, ...] = JOINTS, stamp: float = 0.0
) -> Trajectory:
    return Trajectory(names, tuple(points), round(stamp * 1e9))


ZERO = [0.0, 0.0, 0.0]


# ---------------------------------------------------------------------- acceptance


@pytest.mark.parametrize("settings", ALL_JTC, ids=ALL_IDS)
@pytest.mark.parametrize(
    ("msg", "text"),
    [
        (
            trajectory(point([0.0, 0.0], 100), names=JOINTS[:2]),
            "Joints on incoming trajectory don't match the controller joints.",
        ),
        (
            trajectory(point(ZERO, 100), names=("joint_1", "joint_2", "elbow")),
            "Incoming joint elbow doesn't match the controller's joints.",
        ),
        (
            trajectory(point(ZERO, 100), stamp=NOW - 1.0),
            "Received trajectory with non-zero start time (1799999999.000000) "
            "that ends in the past (1799999999.100000)",
        ),
        (
            trajectory(point(ZERO, 100), point(ZERO, 100)),
            "Time between points 0 and 1 is not strictly increasing, it is 0.100000 and "
            "0.100000 respectively",
        ),
        (
            trajectory(point(ZERO, 100), point([0.0, 0.0], 200)),
            "Mismatch between joint_names size (3) and positions (2) at point #1.",
        ),
        (
            trajectory(point(ZERO, 100, velocities=[0.0])),
            "Mismatch between joint_names size (3) and velocities (1) at point #0.",
        ),
        (
            trajectory(point([], 100)),
            "Mismatch between joint_names size (3) and positions (0) at point #0.",
        ),
    ],
)
def test_both_distros_reject_with_the_controller_text(settings, msg: Trajectory, text: str) -> None:
    assert validate_trajectory(settings, msg, NOW) == text


@pytest.mark.parametrize("settings", ALL_JTC, ids=ALL_IDS)
def test_both_distros_accept(settings) -> None:
    accepted = [
        trajectory(point(ZERO, 100)),  # stamp 0: start now, never "in the past"
        trajectory(point(ZERO, 0)),  # a step
        trajectory(point(ZERO, 100), point([1.0, 1.0, 1.0], 200), stamp=NOW - 0.15),  # ends later
        trajectory(point(ZERO, 100, velocities=[0.3, 0.0, 0.0]), point(ZERO, 200, velocities=ZERO)),
        trajectory(point(ZERO, 100, velocities=[1e-8, 0.0, 0.0])),  # below float epsilon
    ]
    for msg in accepted:
        assert validate_trajectory(settings, msg, NOW) is None, msg


def test_jazzy_rejects_a_moving_end_unless_allowed_humble_never_checks() -> None:
    one_point_per_tick = trajectory(point(ZERO, 67, velocities=[0.1, 0.0, 0.0]), stamp=NOW)
    assert validate_trajectory(JAZZY, one_point_per_tick, NOW) == (
        "Velocity of last trajectory point of joint joint_1 is not zero: 0.100000000000000"
    )
    assert validate_trajectory(HUMBLE, one_point_per_tick, NOW) is None
    allowing = jazzy_defaults(JOINTS, allow_nonzero_velocity_at_trajectory_end=True)
    assert validate_trajectory(allowing, one_point_per_tick, NOW) is None


def test_partial_goals_and_empty_names_and_empty_trajectories() -> None:
    partial = jazzy_defaults(JOINTS)
    partial = type(partial)("jazzy", JOINTS, allow_partial_joints_goal=True)
    assert (
        validate_trajectory(partial, trajectory(point([0.5], 100), names=("joint_2",)), NOW) is None
    )
    assert validate_trajectory(partial, trajectory(names=()), NOW) == (
        "Empty joint names on incoming trajectory."
    )
    assert validate_trajectory(JAZZY, trajectory(), NOW) == "Empty trajectory received."
    assert validate_trajectory(HUMBLE, trajectory(), NOW) == "Empty trajectory received."


# ---------------------------------------------------------------------- playing


def joints(controller: str, *, lag_s: float = 0.0, velocity: bool = False) -> ControlledJoints:
    return ControlledJoints(
        controller, JOINTS, np.zeros(3), NOW, velocity_commands=velocity, lag_s=lag_s
    )


def test_forward_command_keeps_the_last_command_and_ignores_a_wrong_size() -> None:
    arm = joints("forward_command", velocity=True)
    arm.advance(NOW + 0.1)
    assert np.allclose(arm.reference, 0.0)  # NaN/none until the first message: nothing moves
    assert arm.send([0.5, 0.0, -0.5], NOW + 0.1) is None
    arm.advance(NOW + 5.1)  # no timeout: 5 s later it is still moving
    assert np.allclose(arm.reference, [2.5, 0.0, -2.5], atol=0.01)
    problem = arm.send([0.0] * 4, NOW + 5.1)
    assert problem == "command size (4) does not match number of interfaces (3)"
    arm.advance(NOW + 6.1)  # the interfaces keep the last good command
    assert np.allclose(arm.reference, [3.0, 0.0, -3.0], atol=0.01)
    assert arm.rejections == [problem]
    with pytest.raises(TypeError):
        arm.send(trajectory(point(ZERO, 100)), NOW + 6.1)


@pytest.mark.parametrize("controller", ["jtc_humble", "jtc_jazzy"])
def test_one_point_interpolates_linearly_from_the_state_and_a_zero_time_point_steps(
    controller: str,
) -> None:
    arm = joints(controller)
    assert arm.send(trajectory(point([1.0, 2.0, -1.0], 100)), NOW) is None
    arm.advance(NOW + 0.05)
    ahead = 0.002 if controller == "jtc_jazzy" else 0.0  # Jazzy commands the next cycle's sample
    expected = (0.05 - 0.002 + ahead) / 0.1  # sampling starts at the first cycle after arrival
    assert np.allclose(arm.reference, np.array([1.0, 2.0, -1.0]) * expected, atol=1e-5)
    arm.advance(NOW + 0.3)
    assert np.allclose(arm.reference, [1.0, 2.0, -1.0])  # past the end: the last point holds
    arm.send(trajectory(point([0.0, 0.0, 0.0], 0)), NOW + 0.3)
    arm.advance(NOW + 0.302)
    assert np.allclose(arm.reference, 0.0)  # time_from_start 0: one cycle, no interpolation


def test_positions_and_velocities_interpolate_cubically() -> None:
    arm = joints("jtc_humble")
    msg = trajectory(point(ZERO, 0, ZERO), point([1.0, 0.0, 0.0], 1000, [0.0, 0.0, 0.0]))
    arm.send(msg, NOW)
    arm.advance(NOW + 0.25)  # started at NOW + 0.002
    s = 0.248
    assert arm.reference[0] == pytest.approx(3 * s**2 - 2 * s**3, abs=1e-5)  # Hermite, not s
    linear = joints("jtc_humble")
    linear.send(trajectory(point(ZERO, 0), point([1.0, 0.0, 0.0], 1000)), NOW)
    linear.advance(NOW + 0.25)
    assert linear.reference[0] == pytest.approx(s, abs=1e-5)


def _stream_points(controller: str) -> ControlledJoints:
    """One point per 15 Hz tick along a ramp of 0.45 rad/s, one period ahead of the target,
    into a servo lagging 30 ms (ros2_controllers #584)."""
    arm = joints(controller, lag_s=0.03)
    period = 1 / 15
    for tick in range(45):
        t = NOW + tick * period
        target = 0.45 * (tick + 1) * period
        arm.send(trajectory(point([target, 0.0, 0.0], round(period * 1000)), stamp=t), t + 0.001)
    arm.advance(NOW + 45 * period)
    return arm


def test_closed_loop_drags_the_command_back_open_loop_does_not() -> None:
    humble, jazzy = _stream_points("jtc_humble"), _stream_points("jtc_jazzy")
    open_loop = _stream_points("jtc_humble_open_loop")
    desired = _stream_points("jtc_jazzy_desired_state")
    step = 0.45 / 500  # what a smooth 0.45 rad/s command moves per 2 ms cycle
    assert open_loop.max_command_jump < 1.5 * step and desired.max_command_jump < 1.5 * step
    # every message restarts from the lagging measured position: a jump back each tick
    assert humble.max_command_jump > 5 * step and jazzy.max_command_jump > 5 * step
    assert not humble.rejections and not jazzy.rejections


def test_a_new_message_replaces_the_trajectory_at_once() -> None:
    arm = joints("jtc_jazzy_desired_state")
    arm.send(trajectory(point([1.0, 0.0, 0.0], 1000)), NOW)
    arm.advance(NOW + 0.5)
    halfway = arm.reference[0]
    arm.send(trajectory(point([halfway, 0.0, 0.0], 100)), NOW + 0.5)  # hold where it is
    arm.advance(NOW + 2.0)
    assert arm.reference[0] == pytest.approx(halfway, abs=0.003)
    assert arm.controller.accepted == 2


def test_rejected_messages_change_nothing_and_are_counted() -> None:
    arm = joints("jtc_jazzy")
    arm.send(trajectory(point([0.5, 0.0, 0.0], 100)), NOW)
    moving_end = trajectory(point([-1.0, 0.0, 0.0], 100, velocities=[0.2, 0.0, 0.0]))
    assert "is not zero" in (arm.send(moving_end, NOW + 0.01) or "")
    arm.advance(NOW + 0.5)
    assert arm.reference[0] == pytest.approx(0.5)
    assert len(arm.rejections) == 1 and arm.controller.accepted == 1


def test_activation_resets_what_came_before() -> None:
    forward = joints("forward_command", velocity=True)
    forward.controller.deactivate()
    forward.send([0.5, 0.5, 0.5], NOW)  # stored while inactive...
    forward.controller.activate(forward.positions)  # ...and dropped on activation
    forward.advance(NOW + 1.0)
    assert np.allclose(forward.reference, 0.0)
    jtc = joints("jtc_jazzy")
    jtc.send(trajectory(point([1.0, 1.0, 1.0], 500)), NOW)
    jtc.advance(NOW + 0.2)
    jtc.controller.deactivate()
    assert jtc.send(trajectory(point(ZERO, 100)), NOW + 0.2) is not None  # dropped
    jtc.controller.activate(jtc.positions)  # hold where it is, no trajectory
    held = jtc.reference
    jtc.advance(NOW + 1.0)
    assert np.allclose(jtc.reference, held) and 0.0 < held[0] < 1.0


def test_advance_is_bounded_after_a_clock_step() -> None:
    arm = joints("forward_command", velocity=True)
    arm.send([1.0, 0.0, 0.0], NOW)
    arm.advance(NOW + 3600.0)  # an hour's clock step: a minute of cycles, not 1.8 million
    assert arm.reference[0] == pytest.approx(60.0, abs=0.01)
    assert arm.time_s == pytest.approx(NOW + 3600.0, abs=0.002)
