"""The node's safety rules (sequence_ai_ros/safety.py), ROS-free: what an action is compared
with, when a fresh arm position is required, and what a trajectory may carry. The real-ROS
tier checks the same rules through the node (test_ros_real_inprocess.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from sequence_ai_ros import safety
from sequence_ai_ros.hold import hold_command
from sequence_ai_ros.safety import SafetyChecks, load_validator

CHECKS = safety.SafetyChecks(4, max_step=[0.5])
MEASURED = np.array([1.0, -1.0, 0.5])


def check(action: list[float], space: str, **given: Any) -> str | None:
    values: dict[str, Any] = {
        "last_action": None, "measured": MEASURED, "arm_problem": None, "gripper_dims": 1,
        "builds_positions": False,
    }  # fmt: skip
    values.update(given)
    return safety.check_action(CHECKS, np.array(action), action_space=space, **values)


def test_the_first_velocity_is_bounded_from_rest_and_the_gripper_is_not() -> None:
    assert "max_step" in (check([0.6, 0.0, 0.0, 0.9], "joint_velocity") or "")
    assert check([0.4, 0.0, 0.0, 0.9], "joint_velocity") is None  # gripper 0.9: a position
    # later actions compare with the last command, gripper included
    last = np.array([0.4, 0.0, 0.0, 0.9])
    assert check([0.8, 0.0, 0.0, 0.9], "joint_velocity", last_action=last) is None
    assert "index 3" in (check([0.4, 0.0, 0.0, 0.3], "joint_velocity", last_action=last) or "")


def test_after_a_hold_the_next_action_is_compared_with_the_hold() -> None:
    last = np.array([0.4, 0.3, 0.0, 0.9])
    hold = hold_command(
        action_space="joint_velocity", gripper_dims=1, last_action=last, measured=MEASURED
    )
    assert hold is not None
    held = safety.after_hold(hold)
    assert held.tolist() == [0.0, 0.0, 0.0, 0.9]
    assert check([0.85, 0.3, 0.0, 0.9], "joint_velocity", last_action=last) is None
    assert "max_step" in (check([0.85, 0.3, 0.0, 0.9], "joint_velocity", last_action=held) or "")


def test_the_first_absolute_target_needs_a_fresh_position_and_stays_near_it() -> None:
    stale = {"measured": None, "arm_problem": "joint_states is 0.90 s old"}
    problem = check([1.0, -1.0, 0.5, 0.2], "joint_absolute", **stale)
    assert problem == "no fresh arm position: joint_states is 0.90 s old"
    assert check([1.4, -1.0, 0.5, 0.2], "joint_absolute") is None
    assert "index 0" in (check([1.6, -1.0, 0.5, 0.2], "joint_absolute") or "")
    # later targets compare with the last one, with or without a reading
    last = np.array([1.4, -1.0, 0.5, 0.2])
    assert check([1.8, -1.0, 0.5, 0.2], "joint_absolute", last_action=last, **stale) is None


def test_a_target_built_from_the_measured_position_needs_a_fresh_one() -> None:
    stale = {"measured": None, "arm_problem": "no joint_states received yet"}
    last = np.array([0.1, 0.0, 0.0, 0.5])
    for space in ("joint_velocity", "joint_delta"):
        built = check([0.1, 0.0, 0.0, 0.5], space, last_action=last, builds_positions=True, **stale)
        assert built == "no fresh arm position: no joint_states received yet"
        # sent as it is (Float64MultiArray): nothing is built from the reading
        assert check([0.1, 0.0, 0.0, 0.5], space, last_action=last, **stale) is None
    # absolute targets are the action itself: after the first, no reading is needed
    absolute = check([0.1, 0.0, 0.0, 0.5], "joint_absolute", last_action=last, **stale)
    assert absolute is None


def test_the_built_in_checks_run_under_every_rule() -> None:
    assert "non-finite" in (check([np.nan, 0.0, 0.0, 0.5], "joint_velocity") or "")
    assert "shape" in (check([0.0, 0.0, 0.5], "joint_velocity") or "")


def test_a_trajectory_starts_at_the_checked_action_and_ends_with_the_episode() -> None:
    chunk = np.arange(20.0).reshape(5, 4) * 0.1
    action = np.array([9.0, 9.0, 9.0, 9.0])
    steps = safety.trajectory_steps(chunk, action, remaining=3)
    assert steps.shape == (3, 4) and steps[0].tolist() == action.tolist()
    assert np.array_equal(steps[1:], chunk[1:3]) and chunk[0, 0] == 0.0  # the chunk untouched
    assert len(safety.trajectory_steps(chunk, action, remaining=0)) == 1
    assert len(safety.trajectory_steps(chunk, action, remaining=None)) == 5
    smooth = chunk.copy()
    assert safety.check_trajectory(CHECKS, smooth[1:], smooth[0]) is None
    smooth[3, 1] += 0.6
    problem = safety.check_trajectory(CHECKS, smooth[1:], smooth[0])
    assert problem is not None and problem.startswith("planned step 2 of the trajectory:")


def reject_large_gripper(action: np.ndarray) -> bool:
    return bool(action[-1] < 0.9)


def crash(action: np.ndarray) -> bool:
    raise RuntimeError("boom")


def test_safety_checks_each_rule() -> None:
    checks = SafetyChecks(3, lower=[-1, -1, 0], upper=[1, 1, 1], max_step=[0.5])
    assert checks.check(np.array([0.1, 0.2, 0.5]), None) is None
    assert "shape" in str(checks.check(np.array([0.1, 0.2]), None))
    assert "non-finite" in str(checks.check(np.array([0.1, np.nan, 0.5]), None))
    assert checks.check(np.array([0.0, 0.0, -0.1]), None) == "below lower_limits at index [2]"
    assert checks.check(np.array([1.5, 0.0, 0.1]), None) == "above upper_limits at index [0]"
    reason = checks.check(np.array([0.9, 0.0, 0.5]), np.array([0.1, 0.0, 0.5]))
    assert reason is not None and "index 0" in reason
    # A shorter `previous` (measured arm joints, no gripper) compares the overlap only.
    assert checks.check(np.array([0.1, 0.0, 1.0]), np.array([0.1, 0.0])) is None


def test_safety_checks_name_every_index_and_the_exact_step() -> None:
    checks = SafetyChecks(4, lower=[-1.0], upper=[1.0], max_step=[0.5, 0.5, 0.5, 0.1])
    assert checks.check(np.array([np.inf, 0.0, np.nan, 0.0]), None) == (
        "non-finite values at index [0, 2]"
    )
    assert checks.check(np.array([-2.0, 0.0, -1.5, 0.0]), None) == (
        "below lower_limits at index [0, 2]"
    )
    assert checks.check(np.array([0.0, 0.0, 0.0, 0.3]), np.zeros(4)) == (
        "step change 0.3 > max_step 0.1 at index 3"
    )
    assert checks.check(np.array([0.0, 0.0, 0.0, 0.1]), np.zeros(4)) is None  # at the bound
    with pytest.raises(ValueError, match="2 bounds for 4 dimensions"):
        SafetyChecks(4, max_step=[0.1, 0.2])


def test_custom_validator_rejects_and_crashes_safely() -> None:
    name = f"{__name__}:reject_large_gripper"
    checks = SafetyChecks(2, validator=load_validator(name), validator_name=name)
    assert checks.check(np.array([0.0, 0.5]), None) is None
    assert "rejected" in str(checks.check(np.array([0.0, 0.95]), None))
    crashing = SafetyChecks(2, validator=load_validator(f"{__name__}:crash"), validator_name="c")
    assert "RuntimeError: boom" in str(crashing.check(np.array([0.0, 0.5]), None))
    with pytest.raises(ValueError, match="cannot import"):
        load_validator("no_such_module_xyz:f")
    with pytest.raises(ValueError, match="no function"):
        load_validator(f"{__name__}:missing")
