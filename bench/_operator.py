"""A scripted person with a teleop device, for ``bench/takeover.py``.

Asked to take the arm (``grab``), they move every arm joint ``DISTANCE`` rad away over
``MOVE_S`` seconds (a smooth start and stop; each joint its own seeded direction, reversed at
every takeover so the arm does not wander off), keep it still for ``STILL_S`` and let go. The
device streams commands in the model's action space at the model's rate, on a thread of its
own as a real device is its own process: positions for an absolute arm, speeds for a
velocity arm (zeros while still, so the arm is at rest when they let go).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from sequence_ai_core.action_spaces import kind_of
from sequence_ai_core.types import FloatArray
from sequence_ai_sim import SimulatedArm

DISTANCE = 0.3  # rad, every arm joint
MOVE_S = 1.5
STILL_S = 0.3


class Operator:
    """See the module docs. ``has_arm`` is what a driver's ``takeover()`` reads."""

    def __init__(self, arm: SimulatedArm, seed: int) -> None:
        self._arm = arm
        self._velocity = kind_of(arm.model.action_space) == "velocity"
        self._signs = np.random.default_rng(seed).choice([-1.0, 1.0], arm.model.joint_count)
        self._period_s = 1.0 / arm.model.control_hz
        self._start: FloatArray = arm.joint_positions
        self._grabbed_at = 0.0
        self.has_arm = False
        self.grabs = 0
        #: When they let go of the arm each time (time.monotonic()).
        self.released_at: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="operator", daemon=True)

    def __enter__(self) -> Operator:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def holds(self) -> bool:
        """Whether the person has the arm: the driver's ``takeover()``."""
        return self.has_arm

    def grab(self, now: float) -> None:
        """Take the arm now (its position then is where the move starts)."""
        self._start, self._grabbed_at = self._arm.joint_positions, now
        self.grabs += 1
        self.has_arm = True

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            if self.has_arm:
                self._command(time.monotonic())
            due = max(due + self._period_s, time.monotonic())
            self._stop.wait(max(0.0, due - time.monotonic()))

    def _command(self, now: float) -> None:
        held_s = now - self._grabbed_at
        if held_s >= MOVE_S + STILL_S:
            self.released_at.append(now)  # before has_arm: a driver that sees it finds this
            self.has_arm = False
            return
        s = min(held_s / MOVE_S, 1.0)
        away = DISTANCE * self._signs * (-1.0) ** self.grabs
        if self._velocity:
            values = away * 6.0 * s * (1.0 - s) / MOVE_S  # d/dt of the smoothstep below
        else:
            values = self._start + away * s * s * (3.0 - 2.0 * s)
        self._arm.act(np.append(values, self._arm.gripper))
