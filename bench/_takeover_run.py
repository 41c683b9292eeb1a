"""One run of ``bench/takeover.py``: a resume approach on one model, with takeovers.

The real engine and ``runner.drive`` (``run()``'s loop) against the gateway simulator over
HTTP, in real time, playing into an in-process ``SimulatedArm``. After ``POLICY_S`` of
policy commands a scripted person (``_operator``) takes the arm, moves it and lets go; after
the last takeover the policy plays ``POLICY_S`` more. The approaches differ only in what the
engine is told:

- ``ours``: ``drive(takeover=)``: ``Episode.take_over`` / ``hand_back`` (measured state);
- ``plan``: nothing: the engine ticks on, and the driver drops its commands (and holds)
  while the person has the arm, and on release sends what the plan holds;
- ``blend``: ``take_over``, then ``hand_back(start_from=<the last policy command>)``.

What is kept of each resume: when the person let go, the first ``FEW`` policy commands after
it, the arm's state before the first (measured position, or rest for speeds), and the
largest in-chunk step of the first command's chunk.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from bench._common import BENCH_KEY
from bench._operator import MOVE_S, STILL_S, Operator
from bench._tapped import Tapped
from sequence_ai_core.action_spaces import kind_of
from sequence_ai_core.playback.engine import PlaybackEngine
from sequence_ai_core.playback.engine_config import RunConfig
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.runner import drive
from sequence_ai_core.policy import connect
from sequence_ai_core.types import FloatArray
from sequence_ai_sim import CATALOGUE, GatewaySimulator, SimulatedArm

APPROACHES = ("ours", "plan", "blend")
POLICY_S = 2.0
FEW = 5
LATENCY_S = 0.79  # the gateway's median refill (bench/continuity.py)
JITTER = 0.3  # lognormal sigma: p99 = 2x the median


@dataclass
class Resume:
    released_at: float
    first_at: float
    #: The arm's state the first command is compared with, arm joints only.
    reference: FloatArray
    in_chunk_step: float
    commands: list[FloatArray] = field(default_factory=list)


@dataclass
class RunResult:
    model: str
    approach: str
    seed: int
    resumes: list[Resume]
    outcome: RunOutcome


class Driver(Tapped):
    """The player ``drive`` ticks (the engine, told what ``approach`` tells it) and the arm's
    side: ``act`` and ``hold``, which also keep the resumes and ask the person in."""

    def __init__(
        self, engine: PlaybackEngine, arm: SimulatedArm, operator: Operator, approach: str,
        takeovers: int,
    ) -> None:  # fmt: skip
        super().__init__(engine)
        self.arm, self.operator, self.approach = arm, operator, approach
        self.joints = arm.model.joint_count
        self._velocity = kind_of(arm.model.action_space) == "velocity"
        self._takeovers = takeovers
        self._policy_steps = round(POLICY_S * arm.model.control_hz)
        self._since_resume = 0
        self._last: FloatArray | None = None
        self.resumes: list[Resume] = []

    # the player: drive's side
    def hand_back(self, now: float) -> None:
        start_from = self._last if self.approach == "blend" else None
        self.engine.hand_back(now, start_from=start_from)

    # the arm's side
    def act(self, action: FloatArray) -> None:
        if self.operator.has_arm:
            return  # "plan": the driver stops sending; the engine is never told
        self._keep(action)
        self.arm.act(action)
        self._last = np.array(action, dtype=np.float64)
        self._since_resume += 1
        if self._since_resume >= self._policy_steps and self.operator.grabs < self._takeovers:
            self._since_resume = 0
            self.operator.grab(time.monotonic())

    def hold(self) -> None:
        if self.operator.has_arm:
            return
        joints = np.zeros(self.joints) if self._velocity else self.arm.joint_positions
        self.arm.act(np.append(joints, self.arm.gripper))

    def _keep(self, action: FloatArray) -> None:
        released = self.operator.released_at
        if len(self.resumes) < len(released):
            self._since_resume = 0
            self.resumes.append(self._resume(released[len(self.resumes)]))
        if self.resumes and len(self.resumes[-1].commands) < FEW:
            self.resumes[-1].commands.append(np.array(action[: self.joints], dtype=np.float64))

    def _resume(self, released_at: float) -> Resume:
        assert self.last is not None and self.last.chunk is not None
        steps = np.asarray(self.last.chunk.steps, dtype=np.float64)[:, : self.joints]
        largest = float(np.max(np.abs(np.diff(steps, axis=0))))
        state = np.zeros(self.joints) if self._velocity else self.arm.joint_positions
        return Resume(released_at, time.monotonic(), state, largest)


def max_actions(model: str, approach: str, takeovers: int) -> int:
    """Policy commands for the run; ``plan``'s episode also counts those dropped."""
    hz = CATALOGUE[model].control_hz
    actions = round(POLICY_S * hz) * (takeovers + 1)
    if approach == "plan":
        actions += round((MOVE_S + STILL_S + 1.0) * hz) * takeovers
    return actions


def one_run(model: str, approach: str, seed: int, takeovers: int, start_at: float) -> RunResult:
    time.sleep(max(0.0, start_at - time.time()))  # the approaches' processes start together
    with (
        GatewaySimulator(
            api_key=BENCH_KEY, latency_s=LATENCY_S, jitter=JITTER, seed=seed,
            disagreement="calibrated", disagreement_seed=seed, state_conditioned=True,
        ) as sim,
        connect(model, api_key=BENCH_KEY, base_url=sim.url, allow_insecure_http=True) as policy,
    ):  # fmt: skip
        config = RunConfig(gripper_dims=1).with_catalogue(policy.describe())
        engine = PlaybackEngine(policy, config)
        arm = SimulatedArm(model)
        with Operator(arm, seed) as operator:
            driver = Driver(engine, arm, operator, approach, takeovers)
            try:
                outcome = drive(
                    driver,
                    arm.observe,
                    driver.act,
                    max_actions=max_actions(model, approach, takeovers),
                    validate=lambda action: bool(np.all(np.isfinite(action))),
                    hold=driver.hold,
                    stall_timeout_s=config.stall_timeout_s,
                    takeover=None if approach == "plan" else operator.holds,
                )
            finally:
                policy.cancel_requests()
                engine.close()
    return RunResult(model, approach, seed, driver.resumes, outcome)
