"""The simulated catalogue and reference trajectory: consistent, realistic, deterministic."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from sequence_ai_core.types import ACTION_SPACES, MODEL_PREFIX
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimModel, reference_position
from sequence_ai_sim.catalogue import reference_action, reference_chunk

T0 = 1_764_480_000.0  # a fixed wall time (late 2025)


def test_catalogue_is_the_agreed_one() -> None:
    table = {
        model.short_id: (
            model.robot,
            model.action_space,
            model.action_dim,
            model.control_hz,
            model.action_horizon,
            model.camera_views,
        )
        for model in CATALOGUE.values()
    }
    assert table == {
        "pi05-droid": (
            "droid_franka",
            "joint_velocity",
            8,
            15.0,
            15,
            ("exterior_1", "wrist_left"),
        ),
        "cosmos3-edge-policy-droid": (
            "droid_franka",
            "joint_velocity",
            8,
            15.0,
            32,
            ("exterior_1", "wrist_left"),
        ),
        "lingbot-va-5b": ("piper", "joint_absolute", 7, 25.0, 16, ("front", "wrist")),
        "lingbot-vla-v2-6b": ("ur5e", "joint_velocity", 7, 30.0, 15, ("front", "wrist")),
    }


@pytest.mark.parametrize(
    ("short_id", "covers"),
    [
        ("pi05-droid", 1.00),
        ("cosmos3-edge-policy-droid", 2.13),
        ("lingbot-va-5b", 0.64),
        ("lingbot-vla-v2-6b", 0.50),
    ],
)
def test_horizon_over_rate_is_covered_time(short_id: str, covers: float) -> None:
    model = CATALOGUE[short_id]
    assert model.id == MODEL_PREFIX + short_id
    assert model.action_space in ACTION_SPACES
    assert abs(model.action_horizon / model.control_hz - covers) < 0.01
    assert abs(model.covers_seconds - covers) < 0.01


def test_models_endpoint_is_public_and_matches_catalogue(sim: GatewaySimulator) -> None:
    response = httpx.get(f"{sim.url}/v1/models", params={"endpoint": "act"})
    assert response.status_code == 200
    entries = {entry["id"]: entry for entry in response.json()["data"]}
    assert set(entries) == {model.id for model in CATALOGUE.values()}
    for model in CATALOGUE.values():
        entry = entries[model.id]
        assert entry["endpoint"] == "act"
        assert entry["action_dim"] == model.action_dim
        assert entry["action_horizon"] == model.action_horizon
        assert entry["camera_views"] == list(model.camera_views)
        assert abs(entry["action_horizon"] / entry["control_hz"] - entry["covers_seconds"]) < 0.01
    other = httpx.get(f"{sim.url}/v1/models", params={"endpoint": "chat"})
    assert other.json()["data"] == []


def test_custom_model_list_is_served() -> None:
    custom = SimModel("tiny-arm", "tiny", "toy", "joint_absolute", 3, 10.0, 5, ("cam",))
    with GatewaySimulator(models=[custom]) as server:
        data = httpx.get(f"{server.url}/v1/models").json()["data"]
    assert [entry["id"] for entry in data] == [MODEL_PREFIX + "tiny-arm"]


@pytest.mark.parametrize("short_id", sorted(CATALOGUE))
def test_reference_is_realistic(short_id: str) -> None:
    model = CATALOGUE[short_id]
    times = T0 + np.arange(0.0, 60.0, 0.05)
    positions = np.stack([reference_position(model, t) for t in times])
    assert positions.shape == (len(times), model.action_dim)
    assert np.all(np.abs(positions[:, :-1]) <= 1.0)
    assert np.all((positions[:, -1] >= 0.0) & (positions[:, -1] <= 1.0))
    # Different per joint: no two joint columns are the same curve.
    joints = positions[:, :-1]
    for a in range(joints.shape[1]):
        for b in range(a + 1, joints.shape[1]):
            assert np.max(np.abs(joints[:, a] - joints[:, b])) > 0.05
    # Smooth: 50 ms apart, no joint moves more than 0.05 rad.
    assert np.max(np.abs(np.diff(joints, axis=0))) < 0.05


@pytest.mark.parametrize("short_id", ["pi05-droid", "lingbot-vla-v2-6b"])
def test_velocity_actions_are_the_derivative_of_the_reference(short_id: str) -> None:
    model = CATALOGUE[short_id]
    h = 1e-2  # wall times near 1.7e9 s resolve only ~0.2 us
    numeric = (reference_position(model, T0 + h) - reference_position(model, T0 - h)) / (2 * h)
    action = reference_action(model, T0)
    assert np.allclose(action[:-1], numeric[:-1], atol=1e-4)
    assert action[-1] == pytest.approx(reference_position(model, T0)[-1])  # gripper: position
    assert np.max(np.abs(action[:-1])) < 1.0  # rad/s: small


def test_absolute_actions_are_positions_and_chunks_step_in_time() -> None:
    model = CATALOGUE["lingbot-va-5b"]
    chunk = reference_chunk(model, T0, 4)
    assert chunk.shape == (4, 7)
    for i in range(4):
        assert np.array_equal(chunk[i], reference_position(model, T0 + i / model.control_hz))
    assert np.array_equal(reference_chunk(model, T0, 4), chunk)  # deterministic
