"""Chunk disagreement in the simulator: seeded per-chunk offset, drift and mode switches.

Chunks are asked for through the client's public API over real HTTP, each observation
stamped so its chunk's anchor is known, and compared with the reference trajectory.

Statistical bands: the draws are seeded, so each test is deterministic; the bands are wide
enough that another seed (or a correct rewrite of the sampler) essentially never fails
them. Their chances are stated where they are used (chi-square and binomial tails).
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import signal
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import pytest
from PIL import Image
from support import TEST_KEY
from support.gateway_requests import act_request, start_sim_cli

import sequence_ai_core
from sequence_ai_core.types import MODEL_PREFIX, ImageFrame, Observation, Proprioception
from sequence_ai_sim import (
    CATALOGUE,
    DISAGREEMENT_LEVELS,
    Disagreement,
    GatewaySimulator,
    SimModel,
    Spread,
)
from sequence_ai_sim.catalogue import reference_chunk
from sequence_ai_sim.cli import add_arguments

POSITION = CATALOGUE["lingbot-va-5b"]  # joint_absolute, 6 joints + gripper, 25 Hz x 16
VELOCITY = CATALOGUE["pi05-droid"]  # joint_velocity, 7 joints + gripper, 15 Hz x 15
T0 = 1_764_480_000.0  # anchor of the first chunk (s); every anchor is a whole millisecond

pytestmark = pytest.mark.usefixtures("clean_env")  # no key or base URL from the environment


def _jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), (10, 120, 200)).save(buffer, format="JPEG")
    return buffer.getvalue()


JPEG = _jpeg()


def observation(
    model: SimModel, anchor_s: float, joints: Sequence[float] | None = None
) -> Observation:
    """An observation whose images were all taken at ``anchor_s``: the chunk's anchor."""
    stamp = round(anchor_s * 1000)
    positions = list(joints) if joints is not None else [0.0] * model.joint_count
    return Observation(
        Proprioception(positions, gripper=0.5),
        images=[ImageFrame(view, JPEG, timestamp_ms=stamp) for view in model.camera_views],
    )


def chunks(
    sim: GatewaySimulator, model: SimModel, anchors: Sequence[float], **options: Any
) -> list[np.ndarray]:
    """One chunk per anchor, in order, through ``sequence_ai_core.connect().predict()``."""
    with sequence_ai_core.connect(model.short_id, base_url=sim.url, api_key=TEST_KEY) as policy:
        return [
            policy.predict(observation(model, t), **options).action_chunk.steps for t in anchors
        ]


def reference(model: SimModel, anchor: float, steps: int = 0) -> np.ndarray:
    return reference_chunk(model, anchor, steps or model.action_horizon)


def fit(model: SimModel, residual: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Per joint (offset, drift) of ``residual`` (steps x joints) as offset + drift * i/hz,
    and the largest misfit (0 up to rounding when the residual is exactly that)."""
    times = np.arange(len(residual)) / model.control_hz
    design = np.column_stack([np.ones_like(times), times])
    coefficients, *_ = np.linalg.lstsq(design, residual, rcond=None)
    misfit = float(np.max(np.abs(design @ coefficients - residual)))
    return coefficients[0], coefficients[1], misfit


def simulator(**kwargs: Any) -> GatewaySimulator:
    return GatewaySimulator(api_key=TEST_KEY, latency_s=0.0, **kwargs)


# ------------------------------------------------------------------------- none: unchanged


def _answers(sim: GatewaySimulator, requests: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The 200 bodies without ``perf`` (measured time, the one part that may differ)."""
    with httpx.Client(base_url=sim.url, headers={"Authorization": f"Bearer {TEST_KEY}"}) as http:
        bodies = [http.post("/v1/act", json=request).json() for request in requests]
    return [{key: value for key, value in body.items() if key != "perf"} for body in bodies]


def _requests() -> list[dict[str, Any]]:
    """Both action spaces, with and without a seed, at several observation times."""
    out = []
    for k, model in enumerate([VELOCITY, POSITION, VELOCITY, POSITION]):
        request = act_request(MODEL_PREFIX + model.short_id, **({"seed": k} if k % 2 else {}))
        request["observation"]["proprioception"]["joint_positions"] = [0.1] * model.joint_count
        request["observation"]["images"][0]["timestamp_ms"] += 370 * k
        out.append(request)
    return out


@pytest.mark.parametrize(
    "extra",
    [{}, {"state_conditioned": True}, {"action_noise": 0.01, "state_conditioned": True}],
    ids=["plain", "state_conditioned", "noise_and_state"],
)
@pytest.mark.parametrize("level", ["none", Disagreement()], ids=["name", "instance"])
def test_none_answers_exactly_as_a_simulator_without_the_option(
    extra: dict[str, Any], level: str | Disagreement
) -> None:
    requests = _requests()
    if "action_noise" in extra:  # unseeded noise differs on every request, by design
        for k, request in enumerate(requests):
            request["seed"] = 100 + k
    with simulator(**extra) as plain:
        expected = _answers(plain, requests)
    with simulator(disagreement=level, disagreement_seed=5, **extra) as sim:
        assert _answers(sim, requests) == expected
    with simulator(disagreement="calibrated", **extra) as sim:  # the comparison can fail
        assert all(got != want for got, want in zip(_answers(sim, requests), expected, strict=True))


def test_the_default_is_none() -> None:
    with simulator() as sim:
        assert sim.disagreement == DISAGREEMENT_LEVELS["none"] == Disagreement()
        assert sim.disagreement.off and sim.disagreement_seed == 0


# ------------------------------------------------------------------------- calibrated


@pytest.mark.parametrize(
    ("model", "offset_sd", "drift_sd"),
    [(POSITION, 0.020, 0.020), (VELOCITY, 0.05, 0.05)],
    ids=["joint_absolute", "joint_velocity"],
)
def test_calibrated_offsets_and_drifts_have_the_stated_spread(
    model: SimModel, offset_sd: float, drift_sd: float
) -> None:
    anchors = [T0 + 0.5 * k for k in range(50)]
    with simulator(disagreement="calibrated") as sim:
        got = chunks(sim, model, anchors)
    offsets, drifts = [], []
    for steps, anchor in zip(got, anchors, strict=True):
        offset, drift, misfit = fit(model, (steps - reference(model, anchor))[:, :-1])
        assert misfit < 1e-9  # exactly an offset plus a drift growing with i/hz
        offsets.append(offset)
        drifts.append(drift)
    # n = 300 (6 joints) or 350 (7 joints) draws with mean 0: n s^2 / sd^2 is chi-square(n),
    # so s / sd leaves 0.8..1.25 with a chance below 2.1e-7 (n = 300) on either side.
    for measured, stated in ((np.array(offsets), offset_sd), (np.array(drifts), drift_sd)):
        ratio = float(np.sqrt(np.mean(measured**2))) / stated
        assert 0.8 < ratio < 1.25, ratio
        assert abs(float(np.mean(measured))) < 5 * stated / np.sqrt(measured.size)
        assert np.all(np.std(measured, axis=0) > 0.5 * stated)  # every joint, not a few


def test_a_hand_over_on_a_position_model_jumps_mostly_20_to_70_mrad() -> None:
    """Chunks anchored 0.32 s apart (8 steps at 25 Hz, so the two grids align), handed over
    0.2 s into the newer one: the older chunk's step 13 and the newer one's step 5 are due
    at the same time, so the reference cancels and what is left is the jump the hand-over
    adds (largest joint; the engine's seam adds one in-chunk step to it). 20,000 draws put
    86 % of these jumps in 20-70 mrad, 1.5 % below, 12 % above."""
    anchors = [T0 + 0.32 * k for k in range(80)]
    with simulator(disagreement="calibrated") as sim:
        got = chunks(sim, POSITION, anchors)
    with simulator() as plain:
        exact = chunks(plain, POSITION, anchors[:2])
    assert np.max(np.abs(exact[1][5] - exact[0][13])) < 1e-9  # no disagreement: no jump
    jumps = np.array(
        [np.max(np.abs(new[5, :-1] - old[13, :-1])) for old, new in itertools.pairwise(got)]
    )
    in_range = float(np.mean((jumps >= 0.020) & (jumps <= 0.070)))
    # 79 hand-overs at 86 %: fewer than 65 % in range has a chance of about 1e-6.
    assert in_range >= 0.65, (in_range, jumps)
    assert 0.020 <= float(np.median(jumps)) <= 0.070


@pytest.mark.parametrize("model", [POSITION, VELOCITY], ids=["joint_absolute", "joint_velocity"])
def test_the_gripper_is_never_perturbed(model: SimModel) -> None:
    anchors = [T0 + 0.5 * k for k in range(100)]
    with simulator(disagreement="mode_switch", disagreement_seed=3) as sim:
        got = chunks(sim, model, anchors)
    moved = 0
    for steps, anchor in zip(got, anchors, strict=True):
        exact = reference(model, anchor)
        assert np.array_equal(steps[:, -1], exact[:, -1])
        moved += int(np.max(np.abs(steps[:, :-1] - exact[:, :-1])) > 0.1)
    assert moved > 0  # mode switches (0.5 s shifts) were among these chunks


# ------------------------------------------------------------------------- seeding


def test_same_seed_same_chunks_different_seed_different_chunks() -> None:
    anchors = [T0 + 0.5 * k for k in range(6)]
    runs = []
    for seed in (7, 7, 8):
        with simulator(disagreement="mode_switch", disagreement_seed=seed) as sim:
            runs.append(chunks(sim, POSITION, anchors))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[1], strict=True))
    assert all(not np.allclose(a, b, atol=1e-6) for a, b in zip(runs[0], runs[2], strict=True))
    # Without a seed option, the n-th chunk has the n-th draw: the same observation twice
    # gets two different chunks, as two samples of a real model would be.
    with simulator(disagreement="calibrated") as sim:
        again = chunks(sim, POSITION, [T0, T0])
    assert not np.allclose(again[0], again[1], atol=1e-6)


def test_a_request_seed_fixes_the_draw_for_one_observation() -> None:
    with simulator(disagreement="calibrated") as sim:
        same = chunks(sim, POSITION, [T0, T0 + 1.0, T0], seed=11)
        other = chunks(sim, POSITION, [T0], seed=12)
    assert np.array_equal(same[0], same[2])
    assert not np.allclose(same[0], other[0], atol=1e-6)
    first, later = (
        steps - reference(POSITION, t) for steps, t in zip(same[:2], [T0, T0 + 1.0], strict=True)
    )
    assert not np.allclose(first, later, atol=1e-6)  # another observation: another draw
    with simulator(disagreement="calibrated", disagreement_seed=1) as sim:
        assert not np.allclose(chunks(sim, POSITION, [T0], seed=11)[0], same[0], atol=1e-6)


# ------------------------------------------------------------------------- mode switches


def _shift_of(model: SimModel, steps: np.ndarray, anchor: float, shift_s: float) -> float | None:
    """Which of 0, +shift, -shift explains the chunk as (shifted) reference + offset + drift."""
    exact = reference(model, anchor)
    found = []
    for shift in (0.0, shift_s, -shift_s):
        plan = exact + (reference(model, anchor + shift) - exact)
        if fit(model, (steps - plan)[:, :-1])[2] < 1e-9:
            found.append(shift)
    return found[0] if len(found) == 1 else None


def test_mode_switches_happen_at_the_stated_rate() -> None:
    level = DISAGREEMENT_LEVELS["mode_switch"]
    anchors = [T0 + 0.5 * k for k in range(1000)]
    with simulator(disagreement="mode_switch", disagreement_seed=2) as sim:
        got = chunks(sim, POSITION, anchors)
    shifts = [
        _shift_of(POSITION, steps, t, level.mode_shift_s)
        for steps, t in zip(got, anchors, strict=True)
    ]
    assert None not in shifts  # every chunk is exactly one of the three plans
    switched = [shift for shift in shifts if shift]
    # binomial(1000, 0.1): outside 50..150 has a chance below 3e-7.
    assert level.mode_switch_p == 0.1 and 50 <= len(switched) <= 150, len(switched)
    ahead = sum(1 for shift in switched if shift > 0)
    assert 0.25 < ahead / len(switched) < 0.75  # both signs; binomial(~100, 0.5): < 1e-7
    with simulator(disagreement="calibrated", disagreement_seed=2) as sim:
        calibrated = chunks(sim, POSITION, anchors[:40])
    for mode, plain, t, shift in zip(got[:40], calibrated, anchors[:40], shifts[:40], strict=True):
        assert _shift_of(POSITION, plain, t, level.mode_shift_s) == 0.0
        if not shift:  # mode_switch is calibrated plus the switches, draw for draw
            assert np.array_equal(mode, plain)


# ------------------------------------------------------------------------- composition


def test_disagreement_composes_with_state_conditioning_and_noise() -> None:
    observed = [0.1 * k for k in range(POSITION.joint_count)]
    anchors = [T0 + 0.4 * k for k in range(5)]
    settings: dict[str, Any] = {"state_conditioned": True, "action_noise": 0.01}

    def run(level: str) -> list[np.ndarray]:
        with (
            simulator(disagreement=level, **settings) as sim,
            sequence_ai_core.connect(POSITION.id, base_url=sim.url, api_key=TEST_KEY) as policy,
        ):
            return [
                policy.predict(observation(POSITION, t, observed), seed=k).action_chunk.steps
                for k, t in enumerate(anchors)
            ]

    perturbed, baseline = run("calibrated"), run("none")
    for steps, base in zip(perturbed, baseline, strict=True):
        assert np.array_equal(steps[:, -1], base[:, -1])
        offset, _, misfit = fit(POSITION, (steps - base)[:, :-1])
        assert misfit < 1e-9 and np.max(np.abs(offset)) > 1e-3  # the same noise, the same start
    noise = perturbed[0][:, :-1] - reference(POSITION, anchors[0])[:, :-1]
    assert fit(POSITION, noise)[2] > 1e-3  # the noise is there, on top


def test_a_custom_disagreement_uses_its_own_scales() -> None:
    custom = Disagreement(position=Spread(offset_sd=0.1), velocity=Spread(drift_sd=0.2))
    with simulator(disagreement=custom) as sim:
        assert sim.disagreement is custom
        position = chunks(sim, POSITION, [T0, T0 + 0.5])
        velocity = chunks(sim, VELOCITY, [T0, T0 + 0.5])
    for steps, t in zip(position, [T0, T0 + 0.5], strict=True):
        offset, drift, _ = fit(POSITION, (steps - reference(POSITION, t))[:, :-1])
        assert np.max(np.abs(offset)) > 0.02 and np.max(np.abs(drift)) < 1e-9
    for steps, t in zip(velocity, [T0, T0 + 0.5], strict=True):
        offset, drift, _ = fit(VELOCITY, (steps - reference(VELOCITY, t))[:, :-1])
        assert np.max(np.abs(offset)) < 1e-9 and np.max(np.abs(drift)) > 0.04


def test_levels_are_documented_per_action_space() -> None:
    levels = DISAGREEMENT_LEVELS
    assert tuple(levels) == ("none", "calibrated", "mode_switch")
    assert levels["calibrated"].spread(POSITION) == Spread(0.020, 0.020)  # rad, rad/s
    assert levels["calibrated"].spread(VELOCITY) == Spread(0.05, 0.05)  # rad/s, rad/s^2
    assert levels["mode_switch"].position == levels["calibrated"].position
    assert levels["mode_switch"].velocity == levels["calibrated"].velocity
    assert (levels["mode_switch"].mode_switch_p, levels["mode_switch"].mode_shift_s) == (0.1, 0.5)
    assert levels["calibrated"].mode_switch_p == 0.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: GatewaySimulator(disagreement="calibrate"),
        lambda: Spread(offset_sd=-0.01),
        lambda: Spread(drift_sd=float("nan")),
        lambda: Disagreement(mode_switch_p=1.5),
        lambda: Disagreement(mode_shift_s=float("inf")),
    ],
    ids=["unknown_level", "negative_sd", "nan_sd", "probability", "infinite_shift"],
)
def test_unusable_settings_are_refused(make: Any) -> None:
    with pytest.raises(ValueError):
        make()


# ------------------------------------------------------------------------- the command


def test_the_flags_parse_and_default_to_none() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    defaults = parser.parse_args([])
    assert (defaults.disagreement, defaults.disagreement_seed) == ("none", 0)
    chosen = parser.parse_args(["--disagreement", "mode_switch", "--disagreement-seed", "9"])
    assert (chosen.disagreement, chosen.disagreement_seed) == ("mode_switch", 9)
    with pytest.raises(SystemExit):
        parser.parse_args(["--disagreement", "loud"])


def _cli_answers(*flags: str) -> list[dict[str, Any]]:
    process = start_sim_cli("--api-key", TEST_KEY, "--latency", "0", *flags)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        assert banner.startswith("gateway simulator on http://127.0.0.1:"), banner
        url = banner.split()[3]
        headers = {"Authorization": f"Bearer {TEST_KEY}"}
        with httpx.Client(base_url=url, headers=headers, timeout=10.0) as http:
            bodies = [http.post("/v1/act", json=request).json() for request in _requests()]
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=20.0)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    return [body["action_chunk"] for body in bodies]


@pytest.mark.parametrize(
    ("flags", "settings"),
    [
        ((), {}),
        (
            ("--disagreement", "calibrated", "--disagreement-seed", "3"),
            {"disagreement": "calibrated", "disagreement_seed": 3},
        ),
    ],
    ids=["default", "calibrated"],
)
def test_the_command_serves_what_the_simulator_does(
    flags: tuple[str, ...], settings: dict[str, Any]
) -> None:
    answers = _cli_answers(*flags)
    with simulator(**settings) as sim:
        expected = [body["action_chunk"] for body in _answers(sim, _requests())]
    assert json.dumps(answers) == json.dumps(expected)
    with simulator() as plain:
        exact = [body["action_chunk"] for body in _answers(plain, _requests())]
    assert (answers == exact) == (not flags)  # the default is today's exact reference
