"""The action spaces a policy may answer in, and what each one means: one table.

Every rule that depends on the action space reads its row here: whether the wire contract
accepts a space, whether the values are joints (the observation's joint count must match;
the node can build joint targets from them), whether playback may skip a step whose time
passed while its request was in flight, what a hold sends, and in what unit a seam jump is
reported. A rule that tests a space's name anywhere else would be a second owner of one of
these facts, so the suite refuses one (``test_action_spaces``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

#: What the values move: joints, or the end effector's pose.
Frame = Literal["joint", "end_effector"]
#: Targets to reach, changes to add to where the arm is, or speeds.
Kind = Literal["absolute", "delta", "velocity"]
#: What a hold sends for the arm dimensions; gripper dimensions are positions in every
#: space, so they keep their last value (a zero would open or close the hand).
#: - ``zero_velocity``: zeros.
#: - ``measured_position``: the measured position (the last target if nothing was measured).
#: - ``zero_delta``: zeros; outputs that take joint positions get the measured position.
#: - ``last_command``: the last commanded values (the node measures no end-effector pose).
Hold = Literal["zero_velocity", "measured_position", "zero_delta", "last_command"]

#: The seam unit where there is no single one: an end-effector pose mixes metres and angles,
#: and an unknown space says nothing.
ACTION_UNITS = "action units"


@dataclass(frozen=True)
class ActionSpace:
    name: str
    frame: Frame
    kind: Kind
    #: Playback may skip a step whose time passed while the request was in flight. A
    #: skipped delta would move the arm somewhere the model never asked for, so delta
    #: spaces play every step.
    skips_stale: bool
    #: What one unit of a seam jump is (gripper dimensions are 0..1 positions).
    seam_unit: str
    hold: Hold

    @property
    def joint(self) -> bool:
        return self.frame == "joint"


_TABLE = (
    ActionSpace("joint_absolute", "joint", "absolute", True, "rad", "measured_position"),
    ActionSpace("joint_delta", "joint", "delta", False, "rad", "zero_delta"),
    ActionSpace("ee_absolute", "end_effector", "absolute", True, ACTION_UNITS, "last_command"),
    ActionSpace("ee_delta", "end_effector", "delta", False, ACTION_UNITS, "zero_delta"),
    ActionSpace("joint_velocity", "joint", "velocity", True, "rad/s", "zero_velocity"),
)

#: Every known space by name, in the order the gateway documents them.
SPACES: Mapping[str, ActionSpace] = MappingProxyType({space.name: space for space in _TABLE})
#: The names the wire contract accepts; a chunk in any other space is refused.
ACTION_SPACES: tuple[str, ...] = tuple(SPACES)


class UnknownActionSpace(ValueError):
    """A space outside the table: its semantics (is it a delta?) are unknown, so nothing
    may be played or held in it."""


def space_named(name: str) -> ActionSpace:
    """The row for ``name``; ``UnknownActionSpace`` for a space outside the table."""
    found = find_space(name)
    if found is None:
        raise UnknownActionSpace(
            f"unknown action space {name!r}; known: {', '.join(ACTION_SPACES)}"
        )
    return found


def find_space(name: object) -> ActionSpace | None:
    """The row for ``name``, or None for an unknown space, no space yet (None) or a value
    that is not a name at all (a catalogue entry's unchecked field)."""
    return SPACES.get(name) if isinstance(name, str) else None


def kind_of(name: str | None) -> Kind | None:
    """The kind of ``name``, None when unknown: rules keyed on a kind leave it alone."""
    found = find_space(name)
    return None if found is None else found.kind


def skips_stale(name: str | None) -> bool:
    """Whether playback may skip stale steps in ``name``. Unknown or no space yet: no, every
    step plays, the one reading that is safe for a delta."""
    found = find_space(name)
    return found is not None and found.skips_stale


def seam_unit(name: str | None) -> str:
    """The seam unit of ``name``; ``ACTION_UNITS`` when unknown."""
    found = find_space(name)
    return ACTION_UNITS if found is None else found.seam_unit


def names_where(rule: Callable[[ActionSpace], bool]) -> frozenset[str]:
    """The names of the spaces ``rule`` holds for: sets derived from the table."""
    return frozenset(space.name for space in _TABLE if rule(space))
