"""A simulated arm as ``run()``'s caller drives it: what it observed, was sent and held."""

from __future__ import annotations

import numpy as np

from sequence_ai_core.types import FloatArray, Observation
from sequence_ai_sim import SimulatedArm


class Robot:
    """``observe``, ``act`` and ``hold`` for ``run()``, each recorded (actions as copies)."""

    def __init__(self, model: str) -> None:
        self.arm = SimulatedArm(model, image_size=(32, 32))
        self.observed: list[Observation] = []
        self.acted: list[FloatArray] = []
        self.holds = 0

    def observe(self) -> Observation:
        self.observed.append(self.arm.observe())
        return self.observed[-1]

    def act(self, action: FloatArray) -> None:
        self.arm.act(action)
        self.acted.append(np.array(action))

    def hold(self) -> None:
        self.holds += 1
