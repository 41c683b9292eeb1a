"""Chunks follow the reference trajectory anchored at the observation time; the simulated arm."""

from __future__ import annotations

import time

import numpy as np
import pytest
from support import TEST_KEY
from support.gateway_requests import PI05, act_request, client

from sequence_ai_core.types import MODEL_PREFIX
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm, reference_position
from sequence_ai_sim.arm import COMMAND_TIMEOUT_S


def steps_of(sim: GatewaySimulator, request: dict[str, object]) -> np.ndarray:
    with client(sim) as http:
        response = http.post("/v1/act", json=request)
    assert response.status_code == 200
    return np.array([step["values"] for step in response.json()["action_chunk"]["steps"]])


def test_chunk_is_anchored_at_newest_image_timestamp(sim: GatewaySimulator) -> None:
    request = act_request()
    images = request["observation"]["images"]  # type: ignore[index]
    older = dict(images[0], view="wrist_left", timestamp_ms=1_764_479_999_000)
    images.append(older)
    newest_s = 1_764_480_000.0
    steps = steps_of(sim, request)
    expected = np.stack([sim.reference(PI05, newest_s + i / 15.0) for i in range(15)])
    assert np.allclose(steps, expected, atol=1e-12)
    assert sim.received[0]["anchor_wall"] == newest_s


def test_later_timestamp_gives_a_later_plan(sim: GatewaySimulator) -> None:
    early = act_request()
    late = act_request()
    late["observation"]["images"][0]["timestamp_ms"] += 200  # type: ignore[index]
    a, b = steps_of(sim, early), steps_of(sim, late)
    assert not np.allclose(a, b)
    # 200 ms at 15 Hz is 3 steps: the late chunk starts where the early one's step 3 is.
    assert np.allclose(b[0], a[3], atol=1e-12)


def test_without_timestamps_the_anchor_is_arrival(sim: GatewaySimulator) -> None:
    request = act_request()
    request["observation"]["images"] = []  # type: ignore[index]
    before = time.time()
    steps = steps_of(sim, request)
    after = time.time()
    anchor = sim.received[0]["anchor_wall"]
    assert before <= anchor <= after
    assert np.allclose(steps[0], sim.reference("pi05-droid", anchor), atol=1e-12)


def test_absolute_model_returns_positions(sim: GatewaySimulator) -> None:
    model = CATALOGUE["lingbot-va-5b"]
    steps = steps_of(sim, act_request(MODEL_PREFIX + model.short_id))
    assert steps.shape == (16, 7)
    assert np.allclose(steps[0], reference_position(model, 1_764_480_000.0), atol=1e-12)


def test_arm_observation_matches_the_model() -> None:
    arm = SimulatedArm("pi05-droid", image_size=(48, 64))
    before_ms = int(time.time() * 1000)
    observation = arm.observe("wave")
    assert observation.instruction == "wave"
    assert len(observation.proprioception.joint_positions) == 7
    assert 0.0 <= (observation.proprioception.gripper or 0.0) <= 1.0
    assert [image.view for image in observation.images] == ["exterior_1", "wrist_left"]
    for image in observation.images:
        assert image.data.startswith(b"\xff\xd8\xff")
        assert image.timestamp_ms is not None and image.timestamp_ms >= before_ms
    assert SimulatedArm("pi05-droid", cameras=False).observe().images == ()


def test_arm_observation_is_accepted_by_the_simulator(sim: GatewaySimulator) -> None:
    import base64

    observation = SimulatedArm(CATALOGUE["lingbot-vla-v2-6b"]).observe("go")
    request = {
        "model": MODEL_PREFIX + "lingbot-vla-v2-6b",
        "observation": {
            "images": [
                {
                    "view": image.view,
                    "data": base64.b64encode(image.data).decode(),
                    "timestamp_ms": image.timestamp_ms,
                }
                for image in observation.images
            ],
            "proprioception": {
                "joint_positions": list(observation.proprioception.joint_positions),
                "gripper": observation.proprioception.gripper,
            },
        },
    }
    assert steps_of(sim, request).shape == (15, 7)


def test_arm_integrates_velocity_and_keeps_gripper_position() -> None:
    arm = SimulatedArm("pi05-droid", cameras=False)
    start = arm.joint_positions
    arm.act(np.array([0.5, -0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.8]))
    time.sleep(0.05)
    moved = arm.joint_positions - start
    assert moved[0] > 0 > moved[1]
    assert np.allclose(moved[2:], 0.0)
    assert arm.gripper == pytest.approx(0.8)
    arm.act(np.array([0.0] * 7 + [0.8]))  # zero velocity: a hold
    held = arm.joint_positions
    time.sleep(0.05)
    assert np.array_equal(arm.joint_positions, held)
    assert len(arm.commands) == 2


def test_velocity_watchdog_stops_the_arm() -> None:
    arm = SimulatedArm("lingbot-vla-v2-6b", cameras=False)
    arm.act(np.array([1.0] + [0.0] * 5 + [0.5]))
    start = float(arm.joint_positions[0])
    time.sleep(0.4)  # longer than the watchdog
    stopped_at = float(arm.joint_positions[0])
    assert 0.0 < stopped_at - start <= COMMAND_TIMEOUT_S + 1e-9
    time.sleep(0.05)
    assert float(arm.joint_positions[0]) == stopped_at  # no longer moving


def test_arm_absolute_sets_and_clamps() -> None:
    arm = SimulatedArm("lingbot-va-5b", cameras=False)
    arm.act(np.array([0.1, -0.2, 9.0, -9.0, 0.0, 0.3, 1.7]))
    assert np.allclose(arm.joint_positions, [0.1, -0.2, 2.8, -2.8, 0.0, 0.3])
    assert arm.gripper == 1.0


@pytest.mark.parametrize(
    "action", [np.zeros(7), np.array([np.nan] + [0.0] * 7), np.array([np.inf] * 8)]
)
def test_arm_refuses_bad_actions(action: np.ndarray) -> None:
    arm = SimulatedArm("pi05-droid", cameras=False)
    with pytest.raises(ValueError):
        arm.act(action)
    assert arm.commands == []


def test_arm_starts_on_the_reference() -> None:
    model = CATALOGUE["pi05-droid"]
    now = time.time()
    arm = SimulatedArm(model, cameras=False)
    assert np.allclose(arm.joint_positions, reference_position(model, now)[:-1], atol=0.01)
    with pytest.raises(ValueError):
        SimulatedArm("no-such-model")


def test_a_state_conditioned_chunk_starts_at_the_observed_positions(clean_env: object) -> None:
    model = CATALOGUE["lingbot-va-5b"]
    request = act_request(MODEL_PREFIX + model.short_id)
    observed = [0.1 * k for k in range(6)]
    request["observation"]["proprioception"] = {"joint_positions": observed, "gripper": 0.25}
    anchor = 1_764_480_000.0
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.0, state_conditioned=True) as sim:
        steps = steps_of(sim, request)
    reference = np.stack([reference_position(model, anchor + i / 25.0) for i in range(16)])
    # step i = observed + ref(anchor + i/hz) - ref(anchor): the reference's motion from there
    expected = np.array([*observed, 0.25]) + reference - reference[0]
    assert np.allclose(steps, expected, atol=1e-12)


def test_a_state_conditioned_velocity_chunk_keeps_the_reference_velocities(
    clean_env: object,
) -> None:
    request = act_request()  # pi05-droid: joint velocities, gripper position
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.0, state_conditioned=True) as sim:
        steps = steps_of(sim, request)
        reference = np.stack([sim.reference(PI05, 1_764_480_000.0 + i / 15) for i in range(15)])
    assert np.allclose(steps[:, :-1], reference[:, :-1], atol=1e-12)
    assert np.allclose(steps[:, -1], 0.5 + reference[:, -1] - reference[0, -1], atol=1e-12)
