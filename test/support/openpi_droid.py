"""DROID as openpi's example client sends it, for the openpi backend's tests against openpi's
real ``WebsocketPolicyServer`` and against servers that misbehave."""

from __future__ import annotations

import dataclasses

import numpy as np

import sequence_ai_core as sai
from sequence_ai_core.frames import RawFrame
from sequence_ai_core.openpi import BUILTIN

STAMP = ("observation/timestamp",)
#: DROID as openpi's example sends it, plus the observation's time (openpi's own DROID
#: policy ignores keys it does not read) so the peer's trajectory is anchored like a model's.
DROID = dataclasses.replace(BUILTIN["droid"], timestamp_key=STAMP)


def droid_observation(width: int = 320, height: int = 240) -> sai.Observation:
    rng = np.random.default_rng(0)
    return sai.Observation(
        proprioception=sai.Proprioception(joint_positions=[0.1] * 7, gripper=0.25),
        images=[
            RawFrame("exterior_1", rng.integers(0, 255, (height, width, 3), dtype=np.uint8)),
            RawFrame("wrist_left", rng.integers(0, 255, (224, 224, 3), dtype=np.uint8)),
        ],
        instruction="put the cup in the sink",
    )
