"""Shared pieces of the fault tests: an episode recorder, the invariants every faulty run
must keep, and a fixture that checks nothing leaks (threads, sockets, the key in any log)."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from sequence_ai_core import ImageFrame, Observation, Proprioception, SequencesError
from sequence_ai_core.images import encode_image
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.policy import Policy
from sequence_ai_core.types import FloatArray
from sequence_ai_sim import CATALOGUE, Fault, GatewaySimulator
from support import TEST_KEY

MODEL = "lingbot-vla-v2-6b"  # 30 Hz: the catalogue's fastest control rate
DIM = CATALOGUE[MODEL].action_dim
#: Chunks of 3 steps (0.10 s; the simulator honours the action_horizon option) keep each case
#: short; MAX_ACTIONS spans three of them, so faults injected after the first action land on
#: a refill in the middle of the episode.
HORIZON = 3
MAX_ACTIONS = 3 * HORIZON
PERSISTENT = 1000  # "times" for a fault that lasts longer than any episode here
LATENCY_S = 0.015


def camera_frames(model: str) -> tuple[ImageFrame, ...]:
    """One small JPEG per camera view of ``model``: run() refuses observations without the
    views the catalogue lists."""
    pixels = np.zeros((8, 8, 3), dtype=np.uint8)
    views = CATALOGUE[model].camera_views
    frames = (encode_image(pixels, view=view, size=None) for view in views)
    return tuple(ImageFrame(view=frame.view, data=frame.data) for frame in frames)  # no time


OBSERVATION = Observation(
    Proprioception(joint_positions=[0.0] * (DIM - 1)),
    images=camera_frames(MODEL),
    instruction="fault matrix",
)


def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    """Poll ``predicate`` (a hang guard, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return predicate()
        time.sleep(0.01)
    return True


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@dataclass
class Episode:
    """Records what a run did to the robot: every action, every hold."""

    sim: GatewaySimulator | None = None
    fault: Fault | None = None
    times: int = 1
    inject_after: int = 0
    on_action: Callable[[int], None] | None = None
    actions: list[FloatArray] = field(default_factory=list)
    holds: int = 0
    #: "act" and "hold", in order.
    events: list[str] = field(default_factory=list)

    def observe(self) -> Observation:
        return OBSERVATION

    def act(self, action: FloatArray) -> None:
        self.events.append("act")
        self.actions.append(np.array(action, copy=True))
        if (
            self.fault is not None
            and self.sim is not None
            and len(self.actions) == self.inject_after
        ):
            self.sim.inject(self.fault, times=self.times)
        if self.on_action is not None:
            self.on_action(len(self.actions))

    def hold(self) -> None:
        self.events.append("hold")
        self.holds += 1

    def run(
        self,
        policy: Policy,
        max_actions: int = MAX_ACTIONS,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> RunOutcome:
        if self.fault is not None and self.sim is not None and self.inject_after == 0:
            self.sim.inject(self.fault, times=self.times)
        return policy.run(
            self.observe,
            self.act,
            max_actions=max_actions,
            validate=lambda action: True,  # the engine's own checks are under test
            hold=self.hold,
            options={"action_horizon": HORIZON, **(options or {})},
            **kwargs,
        )


def assert_safe_actions(actions: list[FloatArray], dim: int = DIM) -> None:
    for i, action in enumerate(actions):
        assert isinstance(action, np.ndarray), f"action {i} is {type(action)}"
        assert action.dtype == np.float64, f"action {i} dtype {action.dtype}"
        assert action.shape == (dim,), f"action {i} shape {action.shape}"
        assert np.all(np.isfinite(action)), f"action {i} not finite: {action}"


def assert_outcome_consistent(outcome: RunOutcome, episode: Episode, max_actions: int) -> None:
    """Counters agree with what the robot saw. Hold fires once per stop: on every stall (an
    underrun spell) and at an early end, never twice in a row, and an early end always
    leaves the arm held."""
    assert outcome.actions == len(episode.actions)
    assert outcome.stopped_early == (outcome.reason != "completed")
    assert "hold,hold" not in ",".join(episode.events), episode.events
    if outcome.stopped_early:
        assert episode.events and episode.events[-1] == "hold", episode.events
        assert outcome.stalls <= episode.holds <= outcome.stalls + 1
    else:
        assert episode.holds == outcome.stalls, (episode.events, outcome.stalls)
    assert outcome.requests >= outcome.chunks
    assert outcome.retries <= outcome.requests
    if outcome.reason == "completed":
        assert outcome.actions == max_actions
        assert outcome.error is None
    else:
        assert outcome.actions < max_actions
        assert isinstance(outcome.error, SequencesError)
        assert outcome.reason == f"raised:{type(outcome.error).__name__}"
    if outcome.actions:
        assert outcome.chunks >= 1
        assert outcome.action_space == "joint_velocity"


def key_free_texts(outcome: RunOutcome) -> list[str]:
    """Every text a user or a log could see from one outcome and its error chain."""
    texts = [repr(outcome), outcome.summary()]
    error: BaseException | None = outcome.error
    while error is not None:
        texts += [str(error), repr(error), repr(getattr(error, "body", None))]
        error = error.__cause__ or error.__context__
    return texts


def held_reprs(obj: object, depth: int = 2) -> list[str]:
    """The repr of ``obj`` and of every object of this project it holds, ``depth`` levels
    down (the backend and its transport under a policy): a key kept anywhere in them and
    printed by any of their reprs shows up here."""
    texts = [repr(obj)]
    if depth > 0:
        for value in getattr(obj, "__dict__", {}).values():
            if type(value).__module__.startswith(("sequence_ai_core", "sequence_ai_ros")):
                texts += held_reprs(value, depth - 1)
    return texts


def assert_key_absent(texts: list[str]) -> None:
    for text in texts:
        assert TEST_KEY not in text
        assert "Bearer " not in text


@pytest.fixture
def harness(
    clean_env: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> Iterator[dict[str, Any]]:
    """Baseline threads and fds before anything starts; afterwards: the key in no log or
    output, and nothing left behind once every policy and simulator is closed."""
    caplog.set_level(logging.DEBUG)
    threads = set(threading.enumerate())
    fds = open_fds()
    state: dict[str, Any] = {}
    yield state
    out, err = capfd.readouterr()
    assert_key_absent([out, err, *(record.getMessage() for record in caplog.records)])
    assert_key_absent([repr(record.args) for record in caplog.records])
    assert wait_until(lambda: set(threading.enumerate()) <= threads), threading.enumerate()
    assert wait_until(lambda: open_fds() <= fds), (open_fds(), fds)
