"""Hand-over between chunks that disagree, pinned on the exact fake clock.

The rig (``seam_rig``) answers each request with a ramp (1 unit/s on every arm dimension at
10 Hz, so the largest in-chunk step is 0.1) plus a per-chunk offset, at the 0.79 s refill:
the first chunk plays from 0.8 s, and each seam's offset is the chunks' disagreement, known
exactly. No assertion here is about wall time.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from support.engine_clock import Clock
from support.seam_rig import STEPS, Scripted, play, ramp

from sequence_ai_core.playback.blends import fade, smooth, steer
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.playback.engine_config import InvalidSetting
from sequence_ai_core.types import FloatArray, Model

STEP = 0.1  # the rig's in-chunk step
RATE = 0.5 * STEP  # the default handover_rate's bound on what a hand-over adds to a step


def alternating(first: float, second: float = 0.0):  # type: ignore[no-untyped-def]
    """Offsets that flip sign every chunk on dimension 0 and grow on dimension 1."""
    return lambda n: np.array([first * (-1) ** n, second * n])


def test_chunks_that_agree_are_played_exactly_as_planned() -> None:
    for handover in ("fade", "extrapolate", "slew", "smooth"):
        run = play(Scripted(Clock(), ramp(alternating(0.0))), EngineConfig(handover=handover), 5)
        np.testing.assert_array_equal(run.sent(), run.raw())
        outcome = run.outcome
        assert outcome.blended_seams == 0 and outcome.chunks >= 4
        assert outcome.max_seam_step == pytest.approx(outcome.max_seam_jump)
        assert outcome.max_seam_jump == pytest.approx(STEP)  # one step of motion


def test_smooth_hands_an_absolute_seam_over_along_a_cosine() -> None:
    run = play(Scripted(Clock(), ramp(alternating(0.3))), EngineConfig(gripper_dims=1), 4)
    sent, raw = run.sent(), run.raw()
    seam, following = run.seams()[:2]
    # the old chunk had no step left for the seam's tick: extrapolated, +0.3 against -0.3
    offset = 0.6
    transitions = math.ceil(math.pi / 2 * offset / RATE)  # the cosine's steepest step: RATE
    j = np.arange(1, following - seam + 1)
    expected = offset * (1 + np.cos(math.pi * j / transitions)) / 2
    np.testing.assert_allclose(sent[seam:following, 0] - raw[seam:following, 0], expected)
    # every step the arm is sent stays within the plan's step plus the rate
    assert np.max(np.abs(np.diff(sent[:, :2], axis=0))) <= STEP + RATE + 1e-12
    assert run.outcome.max_seam_jump == pytest.approx(offset + STEP)  # the plan's, before


def test_a_fade_in_a_velocity_space_keeps_the_integrated_position() -> None:
    rig = Scripted(Clock(), ramp(alternating(0.1, 0.05)), space="joint_velocity")
    run = play(rig, EngineConfig(handover="fade", smooth_seam=4, gripper_dims=1), 4)
    sent, raw = run.sent(), run.raw()
    off = np.cumsum(sent - raw, axis=0)  # where the commands moved the arm, against the plan
    for seam in [k for k in run.seams() if k + 3 < len(off)]:
        np.testing.assert_allclose(off[seam + 3], 0.0, atol=1e-12)  # back once the fade ends
        assert np.any(np.abs(off[seam]) > 0.05)  # ... after the fade had moved the arm
    # the shape: the offset faded over 4 steps, less a sine hump summing to what it moved
    seam = run.seams()[0]
    offset = np.array([0.2, -0.05])
    decay = np.outer(1 - np.arange(1, 5) / 5, offset)
    hump = np.sin(np.pi * np.arange(1, 5) / 5)
    expected = decay - np.outer(hump / hump.sum(), decay.sum(axis=0))
    np.testing.assert_allclose(sent[seam : seam + 4, :2] - raw[seam : seam + 4, :2], expected)


def test_delta_spaces_are_handed_over_by_the_same_rule_and_play_every_step() -> None:
    rig = Scripted(Clock(), ramp(alternating(0.1)), space="joint_delta")
    run = play(rig, EngineConfig(gripper_dims=1), 4)
    indices = [(t.chunk_seq, t.step_index) for _, t in run.actions]
    for (seq, index), (next_seq, next_index) in itertools.pairwise(indices):
        assert (next_seq, next_index) in ((seq, index + 1), (seq + 1, 0))  # nothing skipped
    sent, raw = run.sent(), run.raw()
    correction = sent[:, 0] - raw[:, 0]
    off = np.cumsum(correction)
    seams = run.seams()
    settled = [k for k in range(seams[0], seams[1]) if correction[k] != 0.0][-1]
    assert off[settled] == pytest.approx(0.0, abs=1e-12)  # summed back exactly
    assert off[seams[0] + 2] == pytest.approx(0.3)  # ... after the arm was 0.3 ahead
    # what the arm is sent moves no more than the plan's own step plus the rate
    assert np.max(np.abs(np.diff(sent[:, 0]))) <= STEP + RATE + 1e-12
    assert run.outcome.blended_seams == len(seams)


def test_steering_pays_back_what_a_correction_moved_under_the_rate() -> None:
    rows = steer(np.zeros(1), np.array([0.2]), 0.05)
    # full steps down at the rate, then along sqrt(2 rate |sum|), the last step exact
    np.testing.assert_allclose(rows[:4, 0], [0.15, 0.1, 0.05, 0.0], atol=1e-12)
    assert rows.sum() == pytest.approx(0.0, abs=1e-12)
    path = np.concatenate([[0.2], rows[:, 0], [0.0]])
    assert np.max(np.abs(np.diff(path))) <= 0.05 + 1e-12
    owed = steer(np.array([0.3]), np.zeros(1), 0.05)  # a debt alone is paid back too
    assert owed.sum() == pytest.approx(-0.3, abs=1e-12)


def mode_switch(n: int, observed_at: float) -> FloatArray:
    """Chunk 1 is another plan: twice as fast from 0.4 below, then back to the first."""
    times = observed_at + np.arange(STEPS) / 10
    arm = 2 * times - 0.4 if n == 1 else times
    return np.stack([arm, np.full(STEPS, 0.5)], axis=1)


def test_a_mode_switch_cross_fades_from_the_old_plan_played_on() -> None:
    run = play(Scripted(Clock(), mode_switch), EngineConfig(handover="extrapolate"), 4)
    sent, raw = run.sent(), run.raw()
    seam = run.seams()[0]
    old, new = run.chunks[0], run.chunks[1]
    last = run.actions[seam - 1][1].step_index  # the old chunk's last step played
    steps = STEPS // 3  # a third of a chunk
    # the old chunk played on past its end (extrapolated: one step of 0.1 per step)
    played_on = old[-1, 0] + STEP * (np.arange(steps) + last + 1 - (len(old) - 1))
    start = run.actions[seam][1].step_index
    weights = 1 - np.arange(1, steps + 1) / (steps + 1)
    expected = weights * (played_on - new[start : start + steps, 0])
    np.testing.assert_allclose(sent[seam : seam + steps, 0] - raw[seam : seam + steps, 0], expected)
    np.testing.assert_array_equal(sent[seam + steps, 0], raw[seam + steps, 0])


def test_a_hold_in_the_middle_of_a_blend_drops_it_and_comes_when_it_would() -> None:
    slow = lambda n: 3.0 if n == 2 else 0.79  # noqa: E731 - the third refill stalls the plan
    ticks = {}
    for handover in ("none", "smooth"):
        rig = Scripted(Clock(), ramp(alternating(0.6)), latency=slow)
        ticks[handover] = run = play(rig, EngineConfig(handover=handover), 7)
    kinds = {h: [t.kind for _, t in run.ticks] for h, run in ticks.items()}
    assert kinds["none"] == kinds["smooth"]  # the hold comes on the same tick
    run = ticks["smooth"]
    gap = kinds["smooth"].index("underrun")
    before = [t for _, t in run.ticks[:gap] if t.action is not None][-1]
    assert before.action is not None
    blending = before.action - run.chunks[before.chunk_seq - 1][before.step_index]
    assert abs(blending[0]) > 0.1  # the plan ran out mid-blend
    resumed = [t for _, t in run.ticks[gap:] if t.action is not None]
    assert resumed[0].new_chunk and resumed[0].step_index == 0
    for t in resumed[: STEPS - 1]:  # from rest: the next chunk as planned, nothing carried
        assert t.action is not None
        np.testing.assert_array_equal(t.action, run.chunks[t.chunk_seq - 1][t.step_index])


@pytest.mark.parametrize("space", ["joint_absolute", "joint_velocity"])
def test_gripper_dims_are_never_blended(space: str) -> None:
    jumpy = lambda n: 0.9 * (n % 2)  # noqa: E731 - open, closed, open: a seam every chunk
    for config in (EngineConfig(gripper_dims=1), EngineConfig(expected_gripper_dims=(0, 2))):
        rig = Scripted(Clock(), ramp(alternating(0.3, 0.1), jumpy), space=space)
        run = play(rig, config, 4)
        sent, raw = run.sent(), run.raw()
        kept = [2] if config.gripper_dims else [0, 2]
        np.testing.assert_array_equal(sent[:, kept], raw[:, kept])
        assert np.any(sent[:, 1] != raw[:, 1])  # the arm dimension in between is blended


def test_max_seam_jump_is_the_plan_before_blending_and_the_step_what_went_out() -> None:
    rig = Scripted(Clock(), ramp(alternating(0.3), lambda n: 0.9 * (n % 2)))
    run = play(rig, EngineConfig(gripper_dims=1), 4)
    sent, raw = run.sent(), run.raw()
    seams = run.seams()
    jumps = [np.max(np.abs(raw[k, :2] - raw[k - 1, :2])) for k in seams]
    outcome = run.outcome
    assert outcome.max_seam_jump == pytest.approx(max(jumps))  # 0.7: gripper's 0.9 left out
    assert outcome.max_seam_jump == pytest.approx(0.7)
    steps = np.max(np.abs(np.diff(sent[:, :2], axis=0)), axis=1)
    assert outcome.max_seam_step == pytest.approx(max(steps[k - 1 :].max() for k in seams))
    assert outcome.max_seam_step <= STEP + RATE + 1e-12
    assert outcome.blended_seams == len(seams)
    assert "after hand-over" in outcome.summary()


def test_the_fixed_shapes() -> None:
    np.testing.assert_allclose(fade(np.array([1.0]), 4)[:, 0], [0.8, 0.6, 0.4, 0.2])
    # a cosine whose steepest step is the rate: ceil(pi/2 / 0.25) = 7 transitions
    cosine = smooth(np.array([1.0]), 0.25)[:, 0]
    np.testing.assert_allclose(cosine, (1 + np.cos(np.pi * np.arange(1, 7) / 7)) / 2)
    assert np.max(np.abs(np.diff(np.concatenate([[1.0], cosine, [0.0]])))) <= 0.25


@pytest.mark.parametrize(
    ("settings", "setting"),
    [
        ({"handover": "cosine"}, "handover"),
        ({"handover_rate": 0.0}, "handover_rate"),
        ({"handover_rate": math.inf}, "handover_rate"),
        ({"gripper_dims": -1}, "gripper_dims"),
        ({"expected_gripper_dims": (-1,)}, "expected_gripper_dims"),
    ],
)
def test_hand_over_settings_are_checked(settings: dict[str, object], setting: str) -> None:
    with pytest.raises(InvalidSetting) as raised:
        EngineConfig(**settings)  # type: ignore[arg-type]
    assert raised.value.setting == setting


def test_the_catalogue_names_grippers_and_the_setting_adds_trailing_ones() -> None:
    entry = Model("m", "m", "act", "a", "aloha", 14, 50, 50.0, (), raw={"gripper_dims": [6, 13]})
    config = EngineConfig().with_catalogue(entry)
    assert config.expected_gripper_dims == (6, 13)
    assert config.gripper_indices(14) == (6, 13)
    assert EngineConfig(gripper_dims=2).with_catalogue(entry).gripper_indices(14) == (6, 12, 13)
    odd = Model("m", "m", "act", "a", "r", 8, 15, 15.0, (), raw={"gripper_dims": "7"})
    assert EngineConfig().with_catalogue(odd).expected_gripper_dims == ()


@pytest.mark.parametrize("space", ["joint_absolute", "joint_velocity"])
def test_the_rest_of_a_chunk_is_previewed_as_it_will_be_sent(space: str) -> None:
    """What a whole-chunk trajectory output must send: the corrections to come included."""
    previews: dict[int, FloatArray | None] = {}

    def probe(engine: PlaybackEngine, tick: Tick) -> None:
        if tick.new_chunk:
            previews[tick.chunk_seq] = engine.planned_rest(tick.step_index)

    rig = Scripted(Clock(), ramp(alternating(0.1, 0.05)), space=space)
    run = play(rig, EngineConfig(gripper_dims=1), 5, probe)
    sent = run.sent()
    for seam in run.seams()[:-1]:
        seq = run.actions[seam][1].chunk_seq
        following = next(k for k, (_, t) in enumerate(run.actions) if t.chunk_seq > seq)
        preview = previews[seq]
        assert preview is not None and np.any(preview != run.raw()[seam : seam + len(preview)])
        np.testing.assert_allclose(preview[: following - seam], sent[seam:following])
