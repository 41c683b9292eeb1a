"""The action-space table: it is exactly what the wire contract accepts, and every rule that
depends on the space (stale steps, hold, seam unit, joint targets) does what its row says,
for every space."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from sequence_ai_core import action_spaces, types
from sequence_ai_core.action_spaces import (
    ACTION_UNITS,
    SPACES,
    ActionSpace,
    UnknownActionSpace,
    find_space,
    names_where,
    seam_unit,
    skips_stale,
    space_named,
)
from sequence_ai_core.errors import ConfigurationError, InvalidRequest, InvalidResponse
from sequence_ai_core.gateway.backend import check_against_entry
from sequence_ai_core.gateway.wire import parse_prediction
from sequence_ai_core.openpi import profile_from_mapping
from sequence_ai_core.playback import plan
from sequence_ai_core.playback.plan import ChunkPlan, PlannedStep
from sequence_ai_core.playback.ready import prepare
from sequence_ai_core.playback.stats import PlaybackStats
from sequence_ai_core.types import (
    ActionChunk,
    FloatArray,
    Model,
    Observation,
    Prediction,
    Proprioception,
)
from sequence_ai_ros import conversions as conv
from sequence_ai_ros.hold import hold_command
from sequence_ai_ros.safety import SafetyChecks, check_action
from sequence_ai_ros.trajectories import PlannedTrajectory, plan_trajectory

#: The known spaces as docs/architecture.md §2 lists them.
DOCUMENTED = ("joint_absolute", "joint_delta", "ee_absolute", "ee_delta", "joint_velocity")
#: Near misses the wire contract must refuse: no space is matched by prefix, case or padding.
NOT_SPACES = ("teleport", "joint", "ee", "Joint_Velocity", "joint_velocity ", "joint_position")
ROWS = list(SPACES.values())


def _answer(space: str) -> dict[str, Any]:
    return {
        "id": "act-1",
        "model": "accounts/sequences/models/pi05-droid",
        "action_chunk": {
            "steps": [[0.1, 0.2], [0.3, 0.4]],
            "robot": "r",
            "action_space": space,
            "action_dim": 2,
            "control_frequency_hz": 15.0,
            "covers_seconds": 2 / 15,
        },
    }


def _parse(space: str) -> Prediction:
    return parse_prediction(_answer(space), request_id="r-00000001", latency_s=0.1)


def _profile(space: str) -> dict[str, Any]:
    return {
        "name": "arm",
        "control_hz": 15,
        "action_space": space,
        "action_dim": 2,
        "state": [{"key": "qpos", "from": ["joint_positions"], "size": 2}],
    }


# ---------------------------------------------------------------------- the table


def test_the_table_is_exactly_the_spaces_the_wire_contract_accepts() -> None:
    assert tuple(SPACES) == action_spaces.ACTION_SPACES == types.ACTION_SPACES == DOCUMENTED
    assert all(SPACES[name].name == name for name in SPACES)
    for name in SPACES:
        assert _parse(name).action_chunk.action_space == name
        assert profile_from_mapping(_profile(name)).action_space == name
    for name in NOT_SPACES:
        with pytest.raises(InvalidResponse, match="unknown action_space"):
            _parse(name)
        with pytest.raises(ConfigurationError, match="action_space must be one of"):
            profile_from_mapping(_profile(name))


def test_the_sets_other_modules_import_are_derived_from_the_table() -> None:
    for kind, derived in (
        ("absolute", types.ABSOLUTE_SPACES),
        ("delta", types.DELTA_SPACES),
        ("velocity", types.VELOCITY_SPACES),
    ):
        assert derived == {row.name for row in ROWS if row.kind == kind}
    assert {row.name for row in ROWS if row.skips_stale} == plan.SKIPPING_SPACES
    assert names_where(lambda row: row.joint) == {"joint_absolute", "joint_delta", "joint_velocity"}


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_each_row_follows_the_design(row: ActionSpace) -> None:
    """docs/architecture.md §3 (delta spaces play every step) and §4 (velocity holds zeros, a
    position space holds where the arm is) restated per row, so a changed row is a decision."""
    assert row.skips_stale == (row.kind != "delta")
    assert row.joint == row.name.startswith("joint_")
    expected_hold = {
        "velocity": "zero_velocity",
        "delta": "zero_delta",
        "absolute": "measured_position" if row.joint else "last_command",
    }
    assert row.hold == expected_hold[row.kind]
    expected_unit = {"velocity": "rad/s", "delta": "rad", "absolute": "rad"}
    assert row.seam_unit == (expected_unit[row.kind] if row.joint else ACTION_UNITS)
    assert find_space(row.name) is space_named(row.name) is row


def test_an_unknown_space_is_an_error_where_it_must_be_and_a_documented_default_elsewhere() -> None:
    with pytest.raises(UnknownActionSpace, match="unknown action space 'teleport'; known: joint_"):
        space_named("teleport")
    assert issubclass(UnknownActionSpace, ValueError)
    for unknown in ("teleport", None, ["joint_velocity"]):
        assert find_space(unknown) is None
    assert skips_stale("teleport") is False and skips_stale(None) is False
    assert seam_unit("teleport") == ACTION_UNITS
    with pytest.raises(ValueError, match="teleport"):
        hold_command(
            action_space="teleport", gripper_dims=0, last_action=np.zeros(2), measured=None
        )
    command = _command("teleport", measured=np.ones(2))
    assert command.positions is None and command.velocities is None
    assert plan_trajectory(_steps(), **_trajectory_args("teleport")) == (
        "action space teleport has no joint targets"
    )


# ---------------------------------------------------------------------- every rule, every space


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_playback_skips_stale_steps_where_the_row_says(row: ActionSpace) -> None:
    """A chunk observed at 0 s whose first tick comes 0.3 s (six 50 ms periods) later."""
    steps = np.arange(20 * 3, dtype=np.float64).reshape(20, 3)
    chunk = ActionChunk(steps, "r", row.name, 3, 20.0, 1.0)
    chunks = ChunkPlan()
    assert chunks.add(
        prepare(Prediction("p", "m", chunk)),
        seq=1,
        observed_at=0.0,
        period_s=0.05,
        now=0.0,
        holding=True,
    )
    step = chunks.take(0.3)
    assert isinstance(step, PlannedStep)
    assert step.index == (6 if row.skips_stale else 0)
    assert step.planned.skips == row.skips_stale


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_the_hold_is_the_rows(row: ActionSpace) -> None:
    last, measured = np.array([0.3, -0.2, 0.7]), np.array([1.0, 2.0])  # two joints + gripper
    hold = hold_command(action_space=row.name, gripper_dims=1, last_action=last, measured=measured)
    assert hold is not None
    assert hold.gripper.tolist() == [0.7]  # a gripper position keeps its value in every space
    sent = {
        "zero_velocity": [0.0, 0.0],
        "measured_position": [1.0, 2.0],
        "zero_delta": [0.0, 0.0],
        "last_command": [0.3, -0.2],
    }
    assert hold.arm.tolist() == sent[row.hold]
    assert (hold.velocities is not None) == (row.hold == "zero_velocity")
    assert (hold.positions is not None) == row.joint
    if hold.positions is not None:
        assert hold.positions.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_the_seam_unit_is_the_rows(row: ActionSpace) -> None:
    outcome = PlaybackStats().outcome(
        reason="completed",
        stopped_early=False,
        elapsed_s=1.0,
        action_space=row.name,
        retries=0,
        requests=2,
        error=None,
    )
    summary = dataclasses.replace(outcome, chunks=2).summary()
    assert f" {row.seam_unit} ({row.name})" in summary


def _command(space: str, measured: FloatArray | None) -> conv.Command:
    action = np.array([0.1, 0.2, 0.5])
    return conv.command_from_action(
        action, action_space=space, gripper_dims=1, measured=measured, period_s=0.1
    )


def _steps() -> FloatArray:
    return np.array([[0.1, 0.2, 0.5], [0.2, 0.3, 0.5]])


def _trajectory_args(space: str) -> dict[str, Any]:
    return {
        "action_space": space,
        "gripper_dims": 1,
        "measured": np.array([1.0, 2.0]),
        "period_s": 0.1,
        "velocities": True,
    }


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_joint_spaces_and_only_they_get_joint_targets(row: ActionSpace) -> None:
    command = _command(row.name, measured=np.array([1.0, 2.0]))
    assert (command.positions is not None) == row.joint
    planned = plan_trajectory(_steps(), **_trajectory_args(row.name))
    assert isinstance(planned, PlannedTrajectory) == row.joint
    if not row.joint:
        assert planned == f"action space {row.name} has no joint targets"


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_the_joint_count_is_checked_in_joint_spaces_only(row: ActionSpace) -> None:
    entry = Model(
        "accounts/sequences/models/arm", "arm", "act", "test", "r", 8, 16, 15.0, (),
        raw={"action_space": row.name},
    )  # fmt: skip
    three_joints = Observation(Proprioception(joint_positions=[0.0] * 3))
    if row.joint:
        with pytest.raises(InvalidRequest, match="joint_positions has 3 values"):
            check_against_entry(entry, three_joints)
    else:
        check_against_entry(entry, three_joints)  # a pose-space model's state is not joints


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_only_absolute_joint_targets_need_the_arm_measured_before_the_first(
    row: ActionSpace,
) -> None:
    """The first absolute joint target is bounded against where the arm is, so it needs a
    reading even when the output does not build positions."""
    refusal = check_action(
        SafetyChecks(3),
        np.array([0.1, 0.2, 0.5]),
        action_space=row.name,
        last_action=None,
        measured=None,
        arm_problem="no joint_states received yet",
        gripper_dims=1,
        builds_positions=False,
    )
    needs_reading = row.joint and row.kind == "absolute"
    assert refusal == (
        "no fresh arm position: no joint_states received yet" if needs_reading else None
    )
