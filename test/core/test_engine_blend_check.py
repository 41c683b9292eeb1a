"""A hand-over's action is checked again before it goes out, on every tick it lasts.

A chunk's steps are checked when it arrives; a hand-over adds a correction computed on the
control thread, so each blended action is checked again (finite, the run's size) however the
tick plays it: the seam's own tick, or the steady ticks after it, which skip the plan's
search. Here the chunks sit near the largest float, so that the sum of a step and its
correction overflows a few steps after the seam. Exact fake clock (``seam_rig``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.engine_clock import Clock, NoHttp
from support.seam_rig import HZ, STEPS, Scripted

from sequence_ai_core.errors import InvalidResponse
from sequence_ai_core.playback.engine import EngineConfig, PlaybackEngine, Tick
from sequence_ai_core.types import FloatArray, Observation, Proprioception

HIGH = 1.79e308  # the first chunk's value: just under the largest float (1.797e308)
LOW, RAMP = 1.0e308, 7e306  # the next chunks climb from LOW by RAMP a step


def _near_the_limit(n: int, observed_at: float) -> FloatArray:
    if n == 0:
        return np.full((STEPS, 2), HIGH)
    return np.repeat((LOW + RAMP * np.arange(STEPS))[:, None], 2, axis=1)


@pytest.mark.parametrize(
    ("space", "handover"),
    [("joint_velocity", "smooth"), ("joint_velocity", "slew"), ("joint_absolute", "smooth")],
)
def test_a_blend_that_overflows_after_its_seam_is_refused_and_ends_the_engine(
    space: str, handover: str
) -> None:
    """Steered (velocity) and fixed (absolute) corrections alike."""
    clock = Clock()
    gateway = Scripted(clock, _near_the_limit, space)
    config = EngineConfig(
        handover=handover, gripper_dims=0, expected_covers_s=STEPS / HZ, expected_control_hz=HZ
    )
    engine = PlaybackEngine(NoHttp(), config, clock=clock, executor=gateway)
    sent: list[Tick] = []
    with engine:
        with pytest.raises(InvalidResponse, match="not finite") as refused:
            for k in range(round(10 * HZ)):
                clock.now = k / HZ
                gateway.advance(clock.now)
                tick = engine.tick(clock.now, lambda: _observe(clock))
                if tick.action is not None:
                    engine.commit()
                    sent.append(tick)
        with pytest.raises(InvalidResponse) as again:  # every tick after raises it again
            engine.tick(clock.now + 1 / HZ, lambda: _observe(clock))
        assert again.value is refused.value
        assert engine.snapshot()["state"] == "failed"
    assert all(math.isfinite(value) for tick in sent for value in tick.action.tolist())
    # the refused step came after the seam and after blended steps that did go out
    seam = next(i for i, tick in enumerate(sent) if tick.chunk_seq == 2)
    assert sent[seam].new_chunk and len(sent) > seam
    blended = [t for t in sent[seam:] if not np.array_equal(t.action, t.planned.rows[t.step_index])]
    assert len(blended) == len(sent) - seam


def _observe(clock: Clock) -> Observation:
    return Observation(proprioception=Proprioception(joint_positions=[clock.now]))
