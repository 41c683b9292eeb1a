"""A person takes the arm over and hands it back: ``run()``'s loop (``runner.drive``) on the
exact fake clock, with the engine and episode both drivers share.

The rig (``seam_rig``) answers each request with a ramp (1 unit/s on two arm dimensions at
10 Hz, so the largest in-chunk step is 0.1, plus a gripper column) at the 0.79 s refill. The
arm follows absolute targets or integrates speeds; while a person has it, their device moves
it elsewhere. No assertion here is about wall time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pytest
from support.engine_clock import LATENCY_S, Clock, NoHttp
from support.seam_rig import HZ, STEPS, Scripted, ramp

from sequence_ai_core.errors import Stalled
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.episode import Episode
from sequence_ai_core.playback.journal import Unrecorded
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.types import FloatArray, Observation, Prediction, Proprioception

PERIOD = 1 / HZ
STEP = 0.1  # the ramp's largest in-chunk step
#: Where the person's device moves the arm, per second, while they have it.
OPERATOR_SPEED = np.array([0.6, -0.4])


class Journaled(Unrecorded):
    """What the episode and engine told their journal."""

    def __init__(self) -> None:
        self.chunks: list[tuple[float, int, float]] = []  # (now, seq, observed_at)
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        self.holds: list[str] = []
        self.watched: list[float] = []
        self.commands: list[float] = []

    def chunk(
        self, now: float, number: int, seq: int, prediction: Prediction, observed_at: float,
        anchor: float, period_s: float, grippers: tuple[int, ...],
    ) -> None:  # fmt: skip
        self.chunks.append((now, seq, observed_at))

    def event(self, now: float, name: str, values: dict[str, Any]) -> None:
        self.events.append((now, name, values))

    def hold(self, reason: str) -> None:
        self.holds.append(reason)

    def observed(self, now: float, observation: Observation) -> None:  # type: ignore[override]
        self.watched.append(now)

    def command(self, now: float, action: FloatArray) -> None:
        self.commands.append(now)


@dataclass
class Arm:
    """Follows absolute targets or integrates speeds; a person's device moves it meanwhile."""

    velocity: bool
    position: FloatArray = field(default_factory=lambda: np.zeros(2))
    sent: list[tuple[float, FloatArray, FloatArray]] = field(default_factory=list)
    holds: list[float] = field(default_factory=list)
    human: bool = False
    #: The speed in force (velocity spaces): the last command, until a hold.
    speed: FloatArray | None = None

    def observe(self, clock: Clock) -> Observation:
        joints = [float(v) for v in self.position]
        return Observation(proprioception=Proprioception(joint_positions=joints, gripper=0.5))

    def act(self, clock: Clock, action: FloatArray) -> None:
        self.sent.append((clock.now, action.copy(), self.position.copy()))
        if self.velocity:
            self.speed = action[:2].copy()
        else:
            self.position = action[:2].copy()

    def hold(self, clock: Clock) -> None:
        self.holds.append(clock.now)
        self.speed = None

    def move(self, dt: float) -> None:
        if self.human:
            self.speed = None  # the device commands the arm now
            self.position = self.position + OPERATOR_SPEED * dt
        elif self.speed is not None:
            self.position = self.position + self.speed * dt


@dataclass
class Ran:
    outcome: RunOutcome
    arm: Arm
    journal: Journaled
    gateway: Scripted
    released_at: list[float]


def run(
    *,
    velocity: bool = False,
    human: Callable[[float], bool] = lambda t: 2.05 <= t < 3.55,
    max_actions: int = 60,
    config: EngineConfig | None = None,
    latency: Callable[[int], float] = lambda n: LATENCY_S,
    stall_timeout_s: float = 5.0,
    takeover: Callable[[float], Any] | None = None,
) -> Ran:
    clock = Clock()
    space = "joint_velocity" if velocity else "joint_absolute"
    gateway = Scripted(clock, ramp(lambda n: np.array([0.3 * (-1) ** n, 0.1 * n])), space, latency)
    settings = replace(
        config or EngineConfig(gripper_dims=1), expected_covers_s=STEPS / HZ, expected_control_hz=HZ
    )
    journal = Journaled()
    engine = PlaybackEngine(NoHttp(), settings, clock=clock, executor=gateway, journal=journal)
    arm = Arm(velocity)
    released: list[float] = []

    def sleep(seconds: float) -> None:
        arm.move(seconds)
        clock.now += seconds
        gateway.advance(clock.now)

    def asked() -> Any:
        was, arm.human = arm.human, bool(human(clock.now))
        if was and not arm.human:
            released.append(clock.now)
        return arm.human if takeover is None else takeover(clock.now)

    with engine:
        outcome = drive(
            engine,
            lambda: arm.observe(clock),
            lambda action: arm.act(clock, action),
            max_actions=max_actions,
            hold=lambda: arm.hold(clock),
            clock=clock,
            sleep=sleep,
            stall_timeout_s=stall_timeout_s,
            journal=journal,
            takeover=asked,
        )
    return Ran(outcome, arm, journal, gateway, released)


def _during(
    sent: list[tuple[float, FloatArray, FloatArray]], start: float, end: float
) -> list[float]:
    return [t for t, _, _ in sent if start - 1e-9 <= t < end - 1e-9]


@pytest.mark.parametrize("velocity", [False, True], ids=["absolute", "velocity"])
def test_nothing_reaches_the_arm_while_a_person_has_it(velocity: bool) -> None:
    ran = run(velocity=velocity)
    (released,) = ran.released_at
    assert _during(ran.arm.sent, 2.05, released) == []
    assert ran.arm.holds == [pytest.approx(released)]  # the hand-back's hold, and no other
    assert ran.journal.holds == ["release"]
    assert ran.outcome.reason == "completed" and ran.outcome.actions == 60
    assert ran.outcome.takeovers == 1
    assert ran.outcome.takeover_s == pytest.approx(released - 2.1)  # from the tick that saw it


def test_no_request_goes_out_and_no_answer_from_before_plays() -> None:
    ran = run()
    (released,) = ran.released_at
    taken = next(t for t, name, _ in ran.journal.events if name == "takeover")
    assert ran.gateway.requests >= 3
    # every chunk accepted after the takeover was observed after the release
    late = [(now, observed) for now, _, observed in ran.journal.chunks if now >= taken]
    assert late and all(observed >= released - 1e-9 for _, observed in late)
    # and the chunk in flight at the takeover was dropped, as a wasted request
    assert ran.outcome.wasted_requests >= 1
    assert [name for _, name, _ in ran.journal.events if name in ("takeover", "release")] == [
        "takeover",
        "release",
    ]


@pytest.mark.parametrize("velocity", [False, True], ids=["absolute", "velocity"])
def test_the_hand_back_starts_from_the_measured_arm_within_one_step(velocity: bool) -> None:
    ran = run(velocity=velocity)
    (released,) = ran.released_at
    after = [(t, action, measured) for t, action, measured in ran.arm.sent if t >= released]
    t, first, measured = after[0]
    reference = np.zeros(2) if velocity else measured
    assert np.max(np.abs(first[:2] - reference)) <= 1.0 * STEP + 1e-12
    # the person moved the arm well away from where the policy had it
    before = [m for tt, _, m in ran.arm.sent if tt < 2.05][-1]
    assert np.max(np.abs(measured - before)) > 5 * STEP or velocity
    # the first policy command follows the release within the refill's p95 and a period
    outcome = ran.outcome
    assert t - released == pytest.approx(outcome.max_resume_s)
    assert outcome.max_resume_s <= outcome.latency_p95_s + PERIOD + 1e-9
    # the jump is the plan's, before the hand-over, in in-chunk steps
    assert outcome.max_resume_jump > 1.0


def test_a_resumed_absolute_plan_steps_on_no_more_than_a_seam_does() -> None:
    ran = run()
    (released,) = ran.released_at
    sent = np.array([a[:2] for t, a, _ in ran.arm.sent if t >= released])
    _, _, measured = next(s for s in ran.arm.sent if s[0] >= released)
    steps = np.abs(np.diff(np.vstack([measured, sent]), axis=0))
    assert steps.max() <= 1.5 * STEP + 1e-9  # the hand-over's bound at any seam


def test_max_actions_counts_the_policy_and_the_stall_clock_stops() -> None:
    # taken over for longer than the stall bound, with nothing planned meanwhile
    ran = run(human=lambda t: 2.05 <= t < 9.05, stall_timeout_s=2.0, max_actions=40)
    assert ran.outcome.reason == "completed"
    assert ran.outcome.actions == 40 == len(ran.arm.sent)
    assert ran.outcome.takeover_s == pytest.approx(7.0)
    # the person's seconds are neither a gap between commands nor an underrun
    outcome = ran.outcome
    assert (outcome.underruns, outcome.underrun_s, outcome.duty_cycle) == (0, 0.0, 1.0)
    assert outcome.max_gap_s == pytest.approx(PERIOD)


def test_the_arm_is_journaled_at_ten_hertz_while_taken_over() -> None:
    ran = run()
    (released,) = ran.released_at
    watched = ran.journal.watched
    assert len(watched) == round((released - 2.1) * 10)
    assert np.all(np.diff(watched) >= 0.1 - 1e-9)
    assert all(2.05 <= t < released for t in watched)


def test_a_resume_that_never_answers_ends_stalled_with_the_one_hold() -> None:
    ran = run(latency=lambda n: 1000.0 if n >= 3 else LATENCY_S, stall_timeout_s=1.5)
    (released,) = ran.released_at
    assert ran.outcome.reason == "raised:Stalled"
    assert isinstance(ran.outcome.error, Stalled)
    assert ran.arm.holds == [pytest.approx(released)]  # the release's hold is in force
    assert ran.journal.holds == ["release"]


def test_a_takeover_before_the_first_chunk_waits_as_a_start_does() -> None:
    ran = run(human=lambda t: 0.3 <= t < 1.55, max_actions=20)
    assert ran.outcome.reason == "completed" and ran.outcome.actions == 20
    first_sent = ran.arm.sent[0][0]
    assert first_sent >= 1.55 + LATENCY_S - 1e-9


def test_a_takeover_that_is_not_a_bool_stops_the_run_with_one_hold() -> None:
    with pytest.raises(TypeError, match="takeover"):
        run(takeover=lambda t: "yes" if t > 2.0 else False)


def test_taking_over_twice_and_handing_back_twice_change_nothing() -> None:
    clock = Clock()
    gateway = Scripted(clock, ramp(lambda n: np.zeros(2)))
    engine = PlaybackEngine(NoHttp(), EngineConfig(gripper_dims=1), clock=clock, executor=gateway)
    holds: list[float] = []
    episode = Episode(engine, max_actions=5, hold=lambda: holds.append(clock.now))
    assert episode.take_over(1.0) and not episode.take_over(1.5)
    assert episode.hand_back(2.0) and not episode.hand_back(2.5)
    assert holds == [0.0]
    outcome = episode.stop("stopped", label="failure")
    assert outcome is not None and outcome.takeovers == 1 and outcome.label == "failure"
    assert outcome.takeover_s == pytest.approx(1.0)
    engine.close()


def test_a_label_is_one_of_two_words() -> None:
    clock = Clock()
    engine = PlaybackEngine(
        NoHttp(), EngineConfig(), clock=clock, executor=Scripted(clock, ramp(lambda n: np.zeros(2)))
    )
    episode = Episode(engine, max_actions=5)
    with pytest.raises(ValueError, match="label"):
        episode.stop("stopped", label="great")  # type: ignore[arg-type]
    assert episode.stop("stopped", label="success").label == "success"  # type: ignore[union-attr]
    engine.close()


def test_a_stop_while_taken_over_holds_once() -> None:
    clock = Clock()
    engine = PlaybackEngine(
        NoHttp(), EngineConfig(), clock=clock, executor=Scripted(clock, ramp(lambda n: np.zeros(2)))
    )
    holds: list[str] = []
    episode = Episode(engine, max_actions=5, hold=lambda: holds.append("hold"))
    episode.take_over(0.5)
    outcome = episode.stop("estop")
    assert holds == ["hold"] and outcome is not None and outcome.takeovers == 1
    assert not episode.hand_back(1.0)  # an ended episode is not handed back
    assert holds == ["hold"]
    engine.close()
