"""The ``chunk_validator`` parameter: every chunk offered to a ``ValidateChunk`` service before
any of its steps is sent.

The engine calls ``check`` on its refill worker, after the chunk's own checks and before the
chunk joins the plan, so the service's time counts in the refill that prefetch plans for
(the core's chunk gate, ``run(validate_chunk=)``). A refusal, or no answer within
``chunk_validator_timeout_s``, raises ``ChunkRefused``: the episode ends with reason
``validate`` and one hold, and the service's reason is the outcome's error. The answer
arrives through the node's executor, which keeps spinning meanwhile.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from sequence_ai_core import ActionChunk, ChunkRefused, Observation
from sequence_ai_ros.srv import ValidateChunk

from . import conversions as conv
from .conversions import MessageTypes


class ChunkValidator:
    def __init__(
        self,
        node: Any,
        service: str,
        *,
        timeout_s: float,
        model: str,
        names: list[str],
        arm_names: list[str],
        types: MessageTypes,
    ) -> None:
        self._node = node
        self.service = service
        self._timeout_s = timeout_s
        self._model = model
        self._names = names  # every dimension: arm joints, then gripper dims
        self._arm_names = arm_names
        self._types = types
        self._client = node.create_client(ValidateChunk, service)

    def absent(self) -> str | None:
        """Why an episode may not start: the service is not there."""
        if self._client.service_is_ready():
            return None
        return f"chunk validator {self.service} is not available"

    def request(self, chunk: ActionChunk, observation: Observation) -> Any:
        """The chunk as a trajectory from its anchor, and the arm state it was asked from."""
        names = self._names
        if len(names) != chunk.action_dim:
            names = [f"dim_{i}" for i in range(chunk.action_dim)]
        stamp = conv.stamp(self._types, self._node.get_clock().now().nanoseconds)
        proprio = observation.proprioception
        request = ValidateChunk.Request()
        request.model = self._model
        request.action_space = chunk.action_space
        request.chunk = conv.chunk_trajectory(
            self._types,
            chunk.steps,
            names=names,
            action_space=chunk.action_space,
            control_hz=chunk.control_frequency_hz,
            stamp=stamp,
        )
        velocities = proprio.joint_velocities
        request.state = conv.joint_state(
            self._types,
            self._arm_names[: len(proprio.joint_positions)],
            np.asarray(proprio.joint_positions, dtype=np.float64),
            None if velocities is None else np.asarray(velocities, dtype=np.float64),
            stamp,
        )
        return request

    def check(self, chunk: ActionChunk, observation: Observation) -> bool:
        """On a refill worker: ask the service and wait for its verdict."""
        answered = threading.Event()
        future = self._client.call_async(self.request(chunk, observation))
        future.add_done_callback(lambda _: answered.set())
        if not answered.wait(self._timeout_s):
            self._client.remove_pending_request(future)
            raise ChunkRefused(
                f"chunk validator {self.service} did not answer within {self._timeout_s:g} s"
            )
        response = future.result()
        if response is None or not response.accept:
            why = getattr(response, "reason", "") or "no reason given"
            raise ChunkRefused(f"chunk validator {self.service} refused the chunk: {why}")
        return True

    def destroy(self) -> None:
        self._node.destroy_client(self._client)
