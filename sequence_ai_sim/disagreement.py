"""Chunk disagreement: consecutive chunks of one simulated model differ, as real ones do.

Without it every chunk lies on the one reference trajectory (``catalogue``), so two chunks
computed a second apart agree exactly and the hand-over between them is invisible. Chunks of
real vision-language-action models disagree: each is a fresh sample of the model, off the
previous one by an offset and a drift, and now and then it is another plan altogether.
20-70 mrad backward jumps at every chunk hand-over are reported on real arms.

The model, per chunk and per arm joint (every dimension but the trailing gripper):

- an **offset** ~ N(0, offset_sd), added to every step of the chunk;
- a **drift** ~ N(0, drift_sd), times the step's time in the chunk (step i at i / hz s);
- with probability ``mode_switch_p``, a **mode switch**: the chunk follows the reference
  ``mode_shift_s`` seconds ahead of or behind (sign drawn evenly) for its whole length, a
  plan further along or not as far along the task as the observation says. It is added as
  ``ref(anchor + shift + i/hz) - ref(anchor + i/hz)``, so an unconditioned chunk is the
  shifted reference itself, and a state-conditioned one still starts from the observed arm.

Units are the action space's: rad and rad/s for position models (``joint_absolute``, and any
space other than a velocity one, since the simulated actions are positions there); rad/s and
rad/s^2 for velocity models (``joint_velocity``). Each level carries both, and every model
gets the pair for its action space.

The gripper is never perturbed. It is a position in 0..1 in every space, which real policies
drive as open or closed (DROID's is binarised at 0.5), so consecutive chunks agree on it
except near a grasp; a per-chunk jitter on it would make the hand chatter, as no real model
does. On a real arm it goes to its own controller, where a seam in it means nothing.

Levels (``LEVELS``; ``GatewaySimulator(disagreement=...)``, ``sequence-ai sim --disagreement``):

- ``none`` (the default): no disagreement; answers are exactly what they were without it.
- ``calibrated``: per chunk and per joint, offset sd 20 mrad and drift sd 20 mrad/s on
  position models (lingbot-va-5b); offset sd 0.05 rad/s and drift sd 0.05 rad/s^2 on
  velocity models (pi05-droid, cosmos3-edge-policy-droid, lingbot-vla-v2-6b).
- ``mode_switch``: ``calibrated``, plus a mode switch in 1 chunk in 10 (on average), whose
  plan is the reference shifted by 0.5 s, ahead or behind: on the largest joint, 0.09-0.17
  rad off the reference on lingbot-va-5b, 0.11-0.29 rad/s on pi05-droid (5th-95th pct).

On lingbot-va-5b (6 joints, 25 Hz), ``calibrated`` puts the jump a hand-over adds (largest
joint; two chunks anchored 0.32 s apart, handed over 0.2 s into the newer one) in 20-70 mrad
86 % of the time, above 70 mrad 12 %, below 20 mrad 1.5 % (20,000 draws).

Seeding: each chunk's draw comes from the simulator's ``disagreement_seed`` and, when the
request carries a ``seed`` option, that seed and the observation time (in ms), as a fixed
sampling seed fixes a real model's answer to one observation; without one, from the number
of chunks the simulator has started computing (arrival order). The same seed and the same
request sequence therefore give the same chunks. ``action_noise`` is drawn independently
(from the request's seed alone) and added after, on top of any state conditioning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from sequence_ai_core.types import VELOCITY_SPACES, FloatArray

from .catalogue import SimModel, reference_chunk


@dataclass(frozen=True)
class Spread:
    """Per-chunk standard deviations for one action space's units: ``offset_sd`` (rad, or
    rad/s for velocity models) and ``drift_sd`` (rad/s, or rad/s^2)."""

    offset_sd: float = 0.0
    drift_sd: float = 0.0

    def __post_init__(self) -> None:
        for name in ("offset_sd", "drift_sd"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class Disagreement:
    """How much the chunks of one model disagree (see the module docstring for the model).

    ``position`` applies to models whose actions are positions, ``velocity`` to
    ``joint_velocity`` models; ``mode_switch_p`` is the chance per chunk of a plan shifted
    by ``mode_shift_s`` seconds."""

    position: Spread = field(default_factory=Spread)
    velocity: Spread = field(default_factory=Spread)
    mode_switch_p: float = 0.0
    mode_shift_s: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mode_switch_p) and 0.0 <= self.mode_switch_p <= 1.0):
            raise ValueError(f"mode_switch_p must be in 0..1, got {self.mode_switch_p!r}")
        if not (math.isfinite(self.mode_shift_s) and self.mode_shift_s >= 0.0):
            raise ValueError(f"mode_shift_s must be finite and >= 0, got {self.mode_shift_s!r}")

    @property
    def off(self) -> bool:
        """True when every chunk is exactly what it would be without this model."""
        no_switch = self.mode_switch_p == 0.0 or self.mode_shift_s == 0.0
        return self.position == Spread() and self.velocity == Spread() and no_switch

    def spread(self, model: SimModel) -> Spread:
        return self.velocity if model.action_space in VELOCITY_SPACES else self.position


_CALIBRATED = Disagreement(position=Spread(0.020, 0.020), velocity=Spread(0.05, 0.05))

#: The named levels, documented in the module docstring.
LEVELS: Mapping[str, Disagreement] = MappingProxyType(
    {
        "none": Disagreement(),
        "calibrated": _CALIBRATED,
        "mode_switch": Disagreement(
            _CALIBRATED.position, _CALIBRATED.velocity, mode_switch_p=0.1, mode_shift_s=0.5
        ),
    }
)


def resolve(level: str | Disagreement) -> Disagreement:
    """A level name or a ``Disagreement``, as a ``Disagreement``."""
    if isinstance(level, Disagreement):
        return level
    if level not in LEVELS:
        raise ValueError(f"disagreement must be one of {tuple(LEVELS)} or a Disagreement")
    return LEVELS[level]


def _word(value: int) -> int:
    """Any integer as a distinct non-negative one (SeedSequence takes no negatives)."""
    return 2 * value if value >= 0 else -2 * value - 1


def draw_key(
    seed: int, request_seed: int | None, anchor_wall: float, counter: int
) -> tuple[int, ...]:
    """The entropy of one chunk's draw (see "Seeding" in the module docstring). The leading
    tag keeps a request seed from colliding with a counter of the same value."""
    if request_seed is not None:
        return (_word(seed), 1, _word(request_seed), max(0, round(anchor_wall * 1000.0)))
    return (_word(seed), 0, counter)


@dataclass(frozen=True)
class ChunkDraw:
    """One chunk's perturbation: per arm joint ``offset`` and ``drift``, and ``shift_s``
    (0.0 unless this chunk is a mode switch)."""

    offset: FloatArray
    drift: FloatArray
    shift_s: float

    def added(self, model: SimModel, anchor_wall: float, steps: int) -> FloatArray:
        """What is added to a chunk of ``steps`` steps anchored at ``anchor_wall``; shape
        (steps, action_dim), the gripper column zero."""
        times = np.arange(steps, dtype=np.float64) / model.control_hz
        joints = self.offset + np.outer(times, self.drift)
        if self.shift_s != 0.0:
            shifted = reference_chunk(model, anchor_wall + self.shift_s, steps)
            joints = joints + (shifted - reference_chunk(model, anchor_wall, steps))[:, :-1]
        added = np.zeros((steps, model.action_dim), dtype=np.float64)
        added[:, :-1] = joints
        return added


def draw(disagreement: Disagreement, model: SimModel, key: tuple[int, ...]) -> ChunkDraw:
    """The draw for one chunk of ``model``. The numbers are taken in a fixed order whatever
    the level, so two levels with the same seed differ only where their scales do."""
    rng = np.random.default_rng(np.random.SeedSequence(list(key)))
    joints = model.joint_count
    unit_offset = rng.standard_normal(joints)
    unit_drift = rng.standard_normal(joints)
    switch, sign = rng.random(), rng.random()
    spread = disagreement.spread(model)
    shift = 0.0
    if switch < disagreement.mode_switch_p:
        shift = disagreement.mode_shift_s if sign < 0.5 else -disagreement.mode_shift_s
    return ChunkDraw(spread.offset_sd * unit_offset, spread.drift_sd * unit_drift, shift)
