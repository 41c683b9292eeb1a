"""The ROS-free parts of sequence_ai_ros, tested directly (no rclpy, no double)."""

from __future__ import annotations

import io
import math
from dataclasses import fields
from typing import Any

import humble_messages as messages
import numpy as np
import pytest
from conftest import TEST_KEY
from PIL import Image as PILImage

from sequence_ai_core import redaction
from sequence_ai_core.errors import OutOfCredit, Unavailable
from sequence_ai_core.playback.engine import PlaybackEngine
from sequence_ai_core.playback.engine_config import (
    InvalidSetting,
    RunConfig,
    check_pool,
    connections_for,
)
from sequence_ai_core.playback.episode import Episode
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.stats import ActionRecord, PlaybackStats
from sequence_ai_core.policy import connect
from sequence_ai_core.types import Model
from sequence_ai_ros import conversions as conv
from sequence_ai_ros import diagnostics, parameters
from sequence_ai_ros.episode import Episodes
from sequence_ai_ros.hold import hold_command
from sequence_ai_ros.inputs import InputStore, RawImage
from sequence_ai_ros.safety import SafetyChecks, load_validator
from sequence_ai_sim import GatewaySimulator

JOINTS = [f"j{i}" for i in range(7)]


def raw_params(**changes: Any) -> dict[str, Any]:
    values = {spec.name: spec.default for spec in parameters.PARAMETERS}
    values.update(changes)
    return values


@pytest.fixture(scope="module")
def types() -> conv.MessageTypes:
    types: conv.MessageTypes = messages.message_types()
    return types


# ---------------------------------------------------------------------- params


def test_defaults_parse_and_fill_hardware_id() -> None:
    config = parameters.parse(raw_params())
    assert config.model == "pi05-droid"
    assert config.hardware_id == "sequence-ai:pi05-droid"
    assert config.run.control_hz is None and config.base_url is None
    assert config.cameras == () and config.joint_names == ()


def test_the_node_settings_are_the_core_run_config() -> None:
    """One dataclass drives run() and the node: same fields, same defaults, one parser."""
    assert parameters.parse(raw_params()).run == RunConfig()
    assert set(parameters.RUN_PARAMETERS) == {f.name for f in fields(RunConfig)} & {
        spec.name for spec in parameters.PARAMETERS
    }
    assert len(parameters.RUN_PARAMETERS) == 11  # gripper_dims is both the node's and the engine's
    defaults = {spec.name: spec.default for spec in parameters.PARAMETERS}
    for name in parameters.RUN_PARAMETERS:
        core = getattr(RunConfig(), name)
        assert defaults[name] == (0.0 if name == "control_hz" else core), name
    changed = parameters.parse(raw_params(max_in_flight=1, control_hz=20.0, stall_timeout_s=3))
    assert changed.run == RunConfig(max_in_flight=1, control_hz=20.0, stall_timeout_s=3.0)
    entry = Model("accounts/x/models/m", "m", "act", "a", "r", 7, 15, 30.0, ("exterior_1",))
    settings = changed.run.with_catalogue(entry)  # what an episode's engine gets
    assert (settings.expected_covers_s, settings.expected_control_hz) == (0.5, 30.0)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("max_in_flight", 0),
        ("smooth_seam", -1),
        ("handover", "spline"),
        ("handover_rate", 0.0),
        ("startup_timeout_s", -1.0),
        ("stall_timeout_s", 0.0),
        ("stall_timeout_s", math.inf),
        ("freshness", "stale"),
        ("control_hz", 2000.0),
    ],
)
def test_a_run_setting_the_core_refuses_is_named_with_the_cores_reason(
    name: str, value: Any
) -> None:
    with pytest.raises(InvalidSetting) as core:
        RunConfig(**{name: value})
    with pytest.raises(parameters.ParameterError) as node:
        parameters.parse(raw_params(**{name: value}))
    assert node.value.name == name
    assert node.value.problem.startswith(core.value.problem)


@pytest.mark.parametrize(
    ("changes", "bad"),
    [
        ({"model": " "}, "model"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"output_type": "twist"}, "output_type"),
        ({"freshness": "stale"}, "freshness"),
        ({"output_type": "joint_trajectory"}, "joint_names"),
        ({"control_hz": -1.0}, "control_hz"),
        ({"max_actions": 0}, "max_actions"),
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"jpeg_quality": 101}, "jpeg_quality"),
        ({"image_size": [224]}, "image_size"),
        ({"max_observation_age_s": 0.0}, "max_observation_age_s"),
        ({"camera_views": ["a", "b"], "camera_topics": ["/a"]}, "camera_topics"),
        (
            {"camera_views": ["a"], "camera_topics": ["/a"], "camera_encodings": ["png"]},
            "camera_encodings",
        ),
        ({"joint_names": ["a", "a"]}, "joint_names"),
        ({"lower_limits": [0.0, 1.0], "upper_limits": [1.0, 0.5]}, "upper_limits"),
        ({"max_step": [0.0]}, "max_step"),
        ({"validator": "not a spec"}, "validator"),
        ({"gripper_topic": "g"}, "gripper_topic"),
        ({"output_type": "joint_state", "joint_names": JOINTS, "gripper_dims": 1}, "gripper_topic"),
        ({"joint_names": JOINTS, "gripper_joint": "j3"}, "gripper_joint"),
    ],
)
def test_bad_parameter_is_named(changes: dict[str, Any], bad: str) -> None:
    with pytest.raises(parameters.ParameterError) as info:
        parameters.parse(raw_params(**changes))
    assert info.value.name == bad
    assert f"parameter '{bad}'" in str(info.value)


def test_model_cross_checks_name_the_parameter() -> None:
    config = parameters.parse(raw_params(joint_names=JOINTS[:6], gripper_dims=1))
    with pytest.raises(parameters.ParameterError, match=r"joint_names.*6 joints.*leave 7"):
        parameters.check_against_model(config, 8, ("exterior_1",), print)
    config = parameters.parse(raw_params(camera_views=["top"], camera_topics=["/top"]))
    with pytest.raises(parameters.ParameterError, match="camera_views"):
        parameters.check_against_model(config, 8, ("exterior_1",), print)
    warnings: list[str] = []
    config = parameters.parse(raw_params())
    parameters.check_against_model(config, 8, ("exterior_1",), warnings.append)
    assert warnings and "exterior_1" in warnings[0]


def test_secret_looking_parameter_names() -> None:
    names = ["model", "api_key", "sequences.apiKey", "auth_token", "instruction", "SECRET"]
    assert parameters.secret_parameter_names(names) == [
        "api_key",
        "sequences.apiKey",
        "auth_token",
        "SECRET",
    ]


def test_every_parameter_has_a_declarable_kind() -> None:
    kinds = {"bool", "integer", "double", "string", "integer_array", "double_array", "string_array"}
    assert {spec.kind for spec in parameters.PARAMETERS} <= kinds
    # An empty-list default would be declared BYTE_ARRAY by rclpy: arrays default to unset.
    assert all(spec.default != [] for spec in parameters.PARAMETERS)


# ---------------------------------------------------------------------- safety


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


# ---------------------------------------------------------------------- episodes


class Counted:
    """The engine side of an episode: the real statistics, fed what was committed."""

    def __init__(self) -> None:
        self.stats = PlaybackStats()

    def commit(self) -> None:
        now = float(self.stats.actions)
        self.stats.commit(ActionRecord(now, np.zeros(2), 0.0, 0.1, new_chunk=False, steady=False))

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        return self.stats.outcome(
            reason=reason,
            stopped_early=stopped_early,
            elapsed_s=0.0,
            action_space=None,
            retries=0,
            requests=0,
            error=None,
        )


def test_estop_latches_and_each_episode_ends_once() -> None:
    holds: list[int] = []
    episodes = Episodes()

    def episode(max_actions: int) -> Episode:
        return Episode(Counted(), max_actions=max_actions, hold=lambda: holds.append(1))

    assert episodes.refusal(active=False) == "node is not active"
    assert episodes.refusal(active=True) is None
    episodes.start(episode(3))
    assert "already running" in str(episodes.refusal(active=True))
    assert episodes.set_estop(True) is True  # running: must stop now
    ended = episodes.end("estop")
    assert ended is not None and ended[0].early and ended[0].number == 1 and holds == [1]
    assert episodes.end("estop") is None and holds == [1]  # a second stop does not hold again
    assert "latched" in str(episodes.refusal(active=True))
    assert episodes.set_estop(False) is False
    assert not episodes.running  # releasing does not resume
    assert episodes.refusal(active=True) is None
    episodes.start(episode(2))
    current = episodes.current
    assert current is not None
    assert [current.commit(), current.commit()] == [False, True]
    ended = episodes.end("completed")
    assert ended is not None and not ended[0].early and holds == [1]  # completion: no hold
    assert ended[0].actions == ended[1].actions == episodes.actions == 2


def test_an_episode_refused_by_its_checks_is_recorded_with_its_own_detail() -> None:
    episodes = Episodes()
    episodes.start(Episode(Counted(), max_actions=5))
    current = episodes.current
    assert current is not None and current.offer(None) and not current.commit()
    assert not current.offer("above upper_limits at index [0]")  # the episode stops itself
    ended = episodes.end("validate")
    assert ended is not None
    end, outcome = ended
    assert (end.reason, end.detail, end.actions, outcome.actions) == (
        "validate",
        "above upper_limits at index [0]",
        1,
        1,
    )


# ---------------------------------------------------------------------- hold


def test_hold_per_action_space_keeps_gripper() -> None:
    last = np.array([0.3, -0.2, 0.7])  # two joints + gripper position
    measured = np.array([1.0, 2.0])
    velocity = hold_command(
        action_space="joint_velocity", gripper_dims=1, last_action=last, measured=measured
    )
    assert velocity is not None
    assert velocity.arm.tolist() == [0.0, 0.0] and velocity.gripper.tolist() == [0.7]
    assert velocity.positions is not None and velocity.positions.tolist() == [1.0, 2.0]
    absolute = hold_command(
        action_space="joint_absolute", gripper_dims=1, last_action=last, measured=measured
    )
    assert absolute is not None and absolute.arm.tolist() == [1.0, 2.0]
    blind = hold_command(
        action_space="joint_absolute", gripper_dims=1, last_action=last, measured=None
    )
    assert blind is not None and blind.arm.tolist() == [0.3, -0.2]  # last target
    delta = hold_command(
        action_space="joint_delta", gripper_dims=0, last_action=last, measured=None
    )
    assert delta is not None and delta.arm.tolist() == [0.0, 0.0, 0.0]
    pose = hold_command(action_space="ee_absolute", gripper_dims=1, last_action=last, measured=None)
    assert pose is not None and pose.arm.tolist() == [0.3, -0.2]
    assert (
        hold_command(
            action_space="joint_velocity", gripper_dims=1, last_action=None, measured=measured
        )
        is None
    )


def test_a_hold_without_a_fresh_reading_is_at_the_last_target_sent() -> None:
    last = np.array([0.3, -0.2, 0.7])
    target, measured = np.array([1.5, 2.5]), np.array([1.0, 2.0])
    stale = hold_command(
        action_space="joint_velocity", gripper_dims=1, last_action=last, measured=None,
        last_target=target,
    )  # fmt: skip
    assert stale is not None and stale.positions is not None
    assert stale.positions.tolist() == [1.5, 2.5] and stale.velocities is not None
    fresh = hold_command(
        action_space="joint_velocity", gripper_dims=1, last_action=last, measured=measured,
        last_target=target,
    )  # fmt: skip
    assert fresh is not None and fresh.positions is not None
    assert fresh.positions.tolist() == [1.0, 2.0]


# ---------------------------------------------------------------------- conversions


def test_read_joints_by_name_and_order() -> None:
    reading = conv.read_joints(["b", "g", "a"], [2.0, 0.4, 1.0], [], ["a", "b"], "g")
    assert reading.positions.tolist() == [1.0, 2.0] and reading.gripper == 0.4
    assert reading.velocities is None  # absent velocities are omitted, never zero-filled
    with_vel = conv.read_joints(["a", "b"], [1.0, 2.0], [0.1, 0.2], ["b", "a"])
    assert with_vel.velocities is not None and with_vel.velocities.tolist() == [0.2, 0.1]
    with pytest.raises(conv.InputProblem, match=r"lacks joints \['c'\]"):
        conv.read_joints(["a"], [1.0], [], ["a", "c"])
    with pytest.raises(conv.InputProblem, match="gripper joint"):
        conv.read_joints(["a"], [1.0], [], ["a"], "g")


def test_read_joints_refuses_non_finite_positions_and_drops_non_finite_velocities() -> None:
    nan = float("nan")
    with pytest.raises(conv.InputProblem, match="non-finite positions"):
        conv.read_joints(["a", "b"], [1.0, nan], [], ["a", "b"])
    with pytest.raises(conv.InputProblem, match="not finite"):
        conv.read_joints(["a", "g"], [1.0, nan], [], ["a"], "g")
    reading = conv.read_joints(["a", "b"], [1.0, 2.0], [0.1, nan], ["a", "b"])
    assert reading.velocities is None and reading.positions.tolist() == [1.0, 2.0]


def test_image_to_rgb_handles_bgr_mono_and_row_padding() -> None:
    bgr = bytes([1, 2, 3, 4, 5, 6, 0, 0])  # 2x1 pixels, 2 bytes of row padding
    rgb = conv.image_to_rgb(1, 2, "bgr8", 8, bgr)
    assert (
        rgb.shape == (1, 2, 3)
        and rgb[0, 0].tolist() == [3, 2, 1]
        and rgb[0, 1].tolist() == [6, 5, 4]
    )
    mono = conv.image_to_rgb(1, 2, "mono8", 2, bytes([7, 9]))
    assert mono[0, 1].tolist() == [9, 9, 9]
    with pytest.raises(conv.InputProblem, match="unsupported"):
        conv.image_to_rgb(1, 1, "yuv422", 2, bytes(2))
    with pytest.raises(conv.InputProblem, match="inconsistent"):
        conv.image_to_rgb(2, 2, "rgb8", 6, bytes(6))


def test_command_from_action_per_space() -> None:
    action, measured = np.array([0.5, -1.0, 0.8]), np.array([1.0, 1.0])
    vel = conv.command_from_action(
        action, action_space="joint_velocity", gripper_dims=1, measured=measured, period_s=0.1
    )
    assert vel.velocities is not None and vel.velocities.tolist() == [0.5, -1.0]
    assert vel.positions is not None and np.allclose(vel.positions, [1.05, 0.9])
    assert vel.gripper.tolist() == [0.8]
    absolute = conv.command_from_action(
        action, action_space="joint_absolute", gripper_dims=0, measured=None, period_s=0.1
    )
    assert absolute.positions is not None and absolute.positions.tolist() == [0.5, -1.0, 0.8]
    delta = conv.command_from_action(
        action, action_space="joint_delta", gripper_dims=1, measured=measured, period_s=0.1
    )
    assert delta.positions is not None and delta.positions.tolist() == [1.5, 0.0]
    ee = conv.command_from_action(
        action, action_space="ee_delta", gripper_dims=1, measured=measured, period_s=0.1
    )
    assert ee.positions is None and ee.arm.tolist() == [0.5, -1.0]


def test_message_builders_fill_humble_fields(types: conv.MessageTypes) -> None:
    array_msg = conv.float64_multi_array(types, np.array([1.0, 2.0]), "action")
    assert list(array_msg.data) == [1.0, 2.0]
    assert (
        array_msg.layout.dim[0].label,
        array_msg.layout.dim[0].size,
        array_msg.layout.dim[0].stride,
    ) == ("action", 2, 2)
    traj = conv.joint_trajectory(
        types, ["a", "b"], [(np.array([1.0, 2.0]), np.array([0.1, 0.2]), 1.25)]
    )
    point = traj.points[0]
    assert traj.joint_names == ["a", "b"] and list(point.positions) == [1.0, 2.0]
    assert list(point.velocities) == [0.1, 0.2] and list(point.accelerations) == []
    assert (point.time_from_start.sec, point.time_from_start.nanosec) == (1, 250_000_000)
    state = conv.joint_state(types, ["a"], None, np.array([0.5]))
    assert state.name == ["a"] and list(state.position) == [] and list(state.velocity) == [0.5]
    chunk = conv.chunk_trajectory(
        types,
        np.array([[1.0, 2.0], [3.0, 4.0]]),
        names=["a", "b"],
        action_space="joint_velocity",
        control_hz=4.0,
    )
    assert [list(p.velocities) for p in chunk.points] == [[1.0, 2.0], [3.0, 4.0]]
    assert [p.time_from_start.nanosec for p in chunk.points] == [0, 250_000_000]
    assert all(list(p.positions) == [] for p in chunk.points)


def test_message_classes_refuse_numpy_arrays_like_rclpy(types: conv.MessageTypes) -> None:
    msg = types.Float64MultiArray()
    with pytest.raises(AssertionError):
        msg.data = np.array([1.0])  # rclpy's generated setter asserts on a Sequence of float
    with pytest.raises(AttributeError):
        msg.bogus = 1  # type: ignore[attr-defined]


# ---------------------------------------------------------------------- diagnostics


def health(**changes: Any) -> diagnostics.Health:
    values: dict[str, Any] = {
        "lifecycle": "active", "model": "pi05-droid", "episode_running": True,
        "episode_number": 1, "actions": 5, "estop_latched": False,
    }  # fmt: skip
    values.update(changes)
    return diagnostics.Health(**values)


def test_diagnostic_levels() -> None:
    assert diagnostics.evaluate(health())[0] == diagnostics.OK
    level, message, _ = diagnostics.evaluate(health(estop_latched=True))
    assert level == diagnostics.ERROR and "e-stop" in message
    level, message, values = diagnostics.evaluate(
        health(input_problem="no joint_states received yet")
    )
    assert level == diagnostics.ERROR and "joint_states" in message
    assert ("input_problem", "no joint_states received yet") in values
    level, message, _ = diagnostics.evaluate(
        health(snapshot={"underruns": 3, "max_seam_jump": 0.01})
    )
    assert level == diagnostics.WARN and "3 underruns" in message
    level, message, _ = diagnostics.evaluate(
        health(snapshot={"underruns": 0, "max_seam_jump": 0.5})
    )
    assert level == diagnostics.WARN and "seam" in message
    from sequence_ai_ros.episode import EpisodeEnd

    stopped = EpisodeEnd(1, "raised:OutOfCredit", 4, True, "top up")
    level, message, values = diagnostics.evaluate(
        health(episode_running=False, last_end=stopped, error=OutOfCredit("no credit", status=402))
    )
    assert level == diagnostics.ERROR and "OutOfCredit" in message
    assert ("last_error", "OutOfCredit: no credit (status=402)") in values
    warm = EpisodeEnd(1, "raised:Unavailable", 4, True)
    level, message, _ = diagnostics.evaluate(
        health(
            episode_running=False,
            last_end=warm,
            error=Unavailable("cold", warming=True, retry_after_s=90),
        )
    )
    assert level == diagnostics.WARN and "retry after 90 s" in message


def test_diagnostics_redact_the_key() -> None:
    secret = "sk-test-0123456789abcdef"
    error = RuntimeError(f"server echoed {secret}")
    _, message, values = diagnostics.evaluate(
        health(input_problem=f"weird {secret}", error=error, secret=secret)
    )
    assert secret not in message and all(secret not in v for _, v in values)
    assert "***" in message


@pytest.mark.parametrize("secret", ["Zq9", "X"])
def test_diagnostics_redact_a_short_key_by_the_package_rule(secret: str) -> None:
    """Diagnostics used to skip keys under 4 characters; one rule now, the client's."""
    assert diagnostics.redact is redaction.redact
    error = RuntimeError(f"server echoed {secret}")
    _, message, values = diagnostics.evaluate(
        health(input_problem=f"weird {secret}", error=error, secret=secret)
    )
    assert secret not in message and all(secret not in v for _, v in values)
    assert redaction.redact(f"a {secret} b", secret) == "a *** b"


def test_the_package_says_it_supports_both_distros() -> None:
    import sequence_ai_ros

    summary = (sequence_ai_ros.__doc__ or "").split("\n\n", 1)[0]
    assert "Humble" in summary and "Jazzy" in summary, summary


# ---------------------------------------------------------------------- inputs


def test_inputs_stale_missing_and_images() -> None:
    clock = [100.0]
    config = parameters.parse(
        raw_params(
            joint_names=["a", "b"],
            camera_views=["front", "wrist"],
            camera_topics=["/front", "/wrist"],
            camera_encodings=["raw", "compressed"],
            image_size=[32, 24],
            max_observation_age_s=0.5,
            instruction="pick",
        )
    )
    store = InputStore(config, monotonic=lambda: clock[0], wall=lambda: 1_700_000_000.0)
    assert store.observe() is None and store.problem == "no joint_states received yet"
    store.on_joint_state(["a", "b"], [0.1, 0.2], [], stamp_s=1_699_999_999.9)
    assert store.observe() is None and store.problem == "no image on /front received yet"
    store.on_image("front", RawImage(2, 2, "rgb8", 6, bytes(12)))
    jpeg = io.BytesIO()
    PILImage.new("RGB", (8, 8), (200, 10, 10)).save(jpeg, format="JPEG")
    store.on_image("wrist", jpeg.getvalue())
    observation = store.observe()
    assert observation is not None and store.problem is None
    assert list(observation.proprioception.joint_positions) == [0.1, 0.2]
    assert observation.proprioception.joint_velocities is None
    assert [f.view for f in observation.images] == ["front", "wrist"]
    assert observation.images[0].timestamp_ms == 1_700_000_000_000  # arrival time (no stamp)
    assert all(PILImage.open(io.BytesIO(f.data)).size == (32, 24) for f in observation.images)
    assert observation.instruction == "pick"
    clock[0] += 0.6
    assert store.observe() is None and "joint_states is 0.60 s old" in str(store.problem)


def test_arm_stale_ends_motion_on_an_old_or_unusable_reading_not_before_the_first() -> None:
    clock = [10.0]
    config = parameters.parse(raw_params(joint_names=["a", "b"], max_observation_age_s=0.5))
    store = InputStore(config, monotonic=lambda: clock[0])
    assert store.arm_stale(0.5) is None  # nothing received: nothing can have been sent
    store.on_joint_state(["a", "b"], [0.1, 0.2], [])
    clock[0] += 0.5
    assert store.arm_stale(0.5) is None
    clock[0] += 0.01
    assert store.arm_stale(0.5) == "joint_states is 0.51 s old (max_observation_age_s=0.5)"
    store.on_joint_state(["a", "b"], [0.1, float("nan")], [])
    assert store.arm_stale(0.5) == "joint_states has non-finite positions"


@pytest.mark.parametrize(
    ("control_hz", "catalogue_hz", "period"),
    [(20.0, 15.0, 1 / 20), (0.0, 15.0, 1 / 15), (0.0, 0.0, None)],
)
def test_the_nodes_timer_period_is_the_engines(
    sim: GatewaySimulator, control_hz: float, catalogue_hz: float, period: float | None
) -> None:
    """The node's timer runs at ``engine.period_s`` from an episode's first tick: the
    parameter, else the catalogue's rate; only with neither does it poll for the first chunk."""
    entry = Model("accounts/x/models/m", "m", "act", "a", "r", 7, 15, catalogue_hz, ("v",))
    settings = parameters.parse(raw_params(control_hz=control_hz)).run.with_catalogue(entry)
    with (
        connect("pi05-droid", api_key=TEST_KEY, base_url=sim.url) as policy,
        PlaybackEngine(policy, settings) as engine,
    ):
        assert engine.period_s == (pytest.approx(period) if period else None)


@pytest.mark.parametrize("max_in_flight", [1, 3, 9])
def test_the_node_sizes_its_pool_by_the_cores_rule(
    sim: GatewaySimulator, max_in_flight: int
) -> None:
    """configure connects with ``connect_arguments``: the pool the core's rule asks for, so
    that ``run()``'s own check of it passes with the node's ``max_in_flight``."""
    config = parameters.parse(raw_params(base_url=sim.url, max_in_flight=max_in_flight))
    arguments = parameters.connect_arguments(config)
    assert arguments["max_connections"] == connections_for(max_in_flight) == max_in_flight + 1
    with connect(api_key=TEST_KEY, **arguments) as policy:
        assert policy.max_connections == connections_for(max_in_flight)
        check_pool(config.run.max_in_flight, policy.max_connections)  # not refused
        with pytest.raises(InvalidSetting, match="max_connections"):
            check_pool(max_in_flight + 1, policy.max_connections)


def test_an_openpi_node_connects_to_its_url_with_its_profile() -> None:
    url = "ws://127.0.0.1:8000"
    config = parameters.parse(raw_params(base_url=url, profile="droid"))
    arguments = parameters.connect_arguments(config)
    assert (arguments["model"], arguments["base_url"], arguments["profile"]) == (url, None, "droid")
