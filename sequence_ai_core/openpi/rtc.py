"""Real-time chunking (RTC) requests: the two keys a profile with ``rtc`` adds.

RTC (Black et al. 2025) conditions a policy on the actions that will run while it infers, so
its new chunk starts where those end. openpi servers take whatever keys the observation has,
so a profile with ``rtc`` sends with every observation:

- ``prev_chunk_left_over``: float32, shape (k, action_dim): what the engine plans to play
  from the observation on, step ``j`` due ``j`` periods after it
  (``playback.prefix`` says how far that is known);
- ``inference_delay``: int, how many periods after the observation the new chunk's first
  step is due; ``k <= inference_delay``, the steps in between come from chunks still in
  flight. Both are 0-sized / 0 when nothing is planned (``predict()``, the first request,
  after an underrun).

The names are LeRobot's (``lerobot.policies.rtc``: ``predict_action_chunk(...,
inference_delay=, prev_chunk_left_over=)``, which RTC servers built on openpi's websocket
server read from the observation); either can be renamed, or nested. The answer's
``actions[0]`` is the step due at the delay (``answer_from: delay``): the new chunk starts
where the prefix ends. A server that answers from the observation on, with its first
``inference_delay`` steps standing for the prefix (LeRobot's queue drops them), is
``answer_from: observation``: the client drops them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigurationError, InvalidRequest

if TYPE_CHECKING:
    from ..playback.source import PlannedPrefix

#: Where the answer's first step is due: at the delay, or at the observation.
ANSWER_FROM = ("delay", "observation")


@dataclass(frozen=True)
class RtcSpec:
    """Where a profile puts the prefix and the delay, and where its answers start."""

    prefix_key: tuple[str, ...] = ("prev_chunk_left_over",)
    delay_key: tuple[str, ...] = ("inference_delay",)
    answer_from: str = "delay"

    def __post_init__(self) -> None:
        if self.answer_from not in ANSWER_FROM:
            raise ConfigurationError(
                f"rtc.answer_from must be one of {ANSWER_FROM}, got {self.answer_from!r}"
            )
        if self.prefix_key == self.delay_key:
            raise ConfigurationError("rtc.prefix_key and rtc.delay_key must differ")

    def values(
        self, planned: PlannedPrefix | None, action_dim: int
    ) -> tuple[np.ndarray[Any, Any], int]:
        """The prefix as float32 (k, action_dim), and the delay; nothing planned (no engine,
        or nothing played yet) is (0, action_dim) and 0."""
        if planned is None or planned.steps.shape[0] == 0:
            delay = 0 if planned is None else planned.delay_steps
            return np.zeros((0, action_dim), dtype=np.float32), int(delay)
        steps = planned.steps
        if steps.ndim != 2 or steps.shape[1] != action_dim:
            raise InvalidRequest(
                f"the planned prefix has shape {steps.shape}; the profile has {action_dim} "
                "action dimensions"
            )
        prefix: np.ndarray[Any, Any] = np.ascontiguousarray(steps, dtype=np.float32)
        return prefix, int(planned.delay_steps)

    def skipped(self, planned: PlannedPrefix | None) -> int:
        """Steps of an answer that stand for the prefix: dropped before it is played."""
        if self.answer_from != "observation" or planned is None:
            return 0
        return int(planned.delay_steps)
