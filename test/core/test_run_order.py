"""A tick sends its command before it starts a request: ``run()``'s loop (``runner.drive``)
calls ``PlaybackEngine.play``, then ``act``, then ``refill``, which calls ``observe``. On the
exact fake clock, so every call of one tick shares its ``now``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support.engine_clock import Clock, NoHttp
from support.seam_rig import HZ, STEPS, Scripted, ramp

from sequence_ai_core.errors import InvalidRequest
from sequence_ai_core.images import encode_image
from sequence_ai_core.playback import inflight
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.types import Observation, Prediction, Proprioception

OBSERVATION = Observation(proprioception=Proprioception(joint_positions=[0.0, 0.0], gripper=0.5))


def _engine(clock: Clock, gateway: Scripted) -> PlaybackEngine:
    settings = replace(
        EngineConfig(gripper_dims=1), expected_covers_s=STEPS / HZ, expected_control_hz=HZ
    )
    return PlaybackEngine(NoHttp(), settings, clock=clock, executor=gateway)


def _gateway(clock: Clock) -> Scripted:
    return Scripted(clock, ramp(lambda n: np.array([0.1 * n, 0.0])), "joint_absolute")


def _drive(observe_error: Exception | None = None) -> tuple[list[tuple[float, str]], RunOutcome]:
    clock = Clock()
    gateway = _gateway(clock)
    calls: list[tuple[float, str]] = []

    def observe() -> Observation:
        calls.append((clock.now, "observe"))
        if observe_error is not None and any(kind == "act" for _, kind in calls):
            raise observe_error
        return OBSERVATION

    def sleep(seconds: float) -> None:
        clock.now += seconds
        gateway.advance(clock.now)

    with _engine(clock, gateway) as engine:
        outcome = drive(
            engine,
            observe,
            lambda action: calls.append((clock.now, "act")),
            max_actions=40,
            hold=lambda: calls.append((clock.now, "hold")),
            clock=clock,
            sleep=sleep,
        )
    return calls, outcome


def test_the_command_goes_out_before_the_request_of_its_tick() -> None:
    calls, outcome = _drive()
    acted = {now for now, kind in calls if kind == "act"}
    observed_while_playing = [now for now, kind in calls if kind == "observe" and now in acted]
    assert len(observed_while_playing) >= 3  # refills started while a chunk played
    for now in observed_while_playing:
        same_tick = [kind for t, kind in calls if t == now]
        assert same_tick == ["act", "observe"]
    assert outcome.reason == "completed"


def test_an_observation_refused_after_the_command_still_holds_once() -> None:
    calls, outcome = _drive(InvalidRequest("joint reading is NaN"))
    kinds = [kind for _, kind in calls]
    assert kinds.count("hold") == 1
    assert kinds[-3:] == ["act", "observe", "hold"]  # the tick's command, its refused request
    assert outcome.reason == "raised:InvalidRequest"
    assert outcome.actions == kinds.count("act")


def test_refill_looks_once_per_play_and_never_while_a_person_has_the_arm() -> None:
    clock = Clock()
    gateway = _gateway(clock)
    observed: list[float] = []

    def observe() -> Observation:
        observed.append(clock.now)
        return OBSERVATION

    with _engine(clock, gateway) as engine:
        engine.refill(0.0, observe)  # no play yet: nothing to look at
        assert observed == [] and gateway.requests == 0
        assert engine.play(0.0).kind == "waiting"
        engine.refill(0.0, observe)
        engine.refill(0.0, observe)
        assert observed == [0.0] and gateway.requests == 1
        engine.play(0.1)
        engine.take_over(0.1)  # between play and refill: nothing goes out
        engine.refill(0.1, observe)
        assert observed == [0.0] and gateway.requests == 1
        assert engine.play(0.2).kind == "human"
        engine.refill(0.2, observe)
        assert observed == [0.0]


@pytest.mark.parametrize("method", ["play", "refill"])
def test_a_closed_engine(method: str) -> None:
    clock = Clock()
    engine = _engine(clock, _gateway(clock))
    engine.play(0.0)
    engine.close()
    if method == "play":
        with pytest.raises(RuntimeError, match="closed"):
            engine.play(0.1)
    else:
        engine.refill(0.0, lambda: pytest.fail("a closed engine observed"))  # type: ignore[arg-type,return-value]


@pytest.mark.parametrize("images", [1, 0])
def test_a_request_with_images_waits_on_its_worker_before_its_body_is_built(
    monkeypatch: pytest.MonkeyPatch, images: int
) -> None:
    """The tick's command is still on its way to the arm when its request starts: the worker
    lets it go before it encodes images (inflight.ENCODE_AFTER_S); a request without images
    has nothing heavy to build and does not wait."""
    events: list[tuple[str, float]] = []

    class WorkerTime:
        @staticmethod
        def sleep(seconds: float) -> None:
            events.append(("sleep", seconds))

    class Recorded(NoHttp):
        def fetch(self, observation: Observation, options: object) -> Prediction:
            events.append(("fetch", len(observation.images)))
            return super().fetch(observation, {})

    monkeypatch.setattr(inflight, "time", WorkerTime)
    frame = encode_image(np.zeros((2, 2, 3), np.uint8), view="front")
    observation = replace(OBSERVATION, images=[frame] * images)
    clock = Clock()
    gateway = _gateway(clock)
    settings = EngineConfig(gripper_dims=1, expected_control_hz=HZ)
    with PlaybackEngine(Recorded(), settings, clock=clock, executor=gateway) as engine:
        engine.tick(0.0, lambda: observation)
        assert events == []  # handed to the worker, not yet run
        gateway.advance(1.0)
    assert events == [("sleep", inflight.ENCODE_AFTER_S)] * images + [("fetch", images)]
