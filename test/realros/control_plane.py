"""The package's own interfaces from the operator's and the safety system's side: a
``RunEpisode`` action client, the latched ``~/outcome``, and ``ValidateChunk`` servers.

A validator runs in a node of its own with its own executor thread, so that one which never
answers blocks nothing of the probe's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import rclpy
from action_msgs.msg import GoalStatus
from rclpy.action import ActionClient
from rclpy.executors import SingleThreadedExecutor
from sequence_ai_ros.action import RunEpisode
from sequence_ai_ros.msg import RunOutcome
from sequence_ai_ros.srv import ValidateChunk

from . import START_S, WAIT_S, Recording, Tier
from .nodes import LATCHED, NODE

STATUS = {
    GoalStatus.STATUS_SUCCEEDED: "succeeded",
    GoalStatus.STATUS_ABORTED: "aborted",
    GoalStatus.STATUS_CANCELED: "canceled",
}


class EpisodeClient:
    """The ``RunEpisode`` action of the node in ``tier``, and its ``~/outcome``.

    Its node is spun only by its own waits, on the test's thread: rclpy's action client
    registers a goal after sending it, so a background spin can take the answer first and
    drop it ("Ignoring unexpected goal response")."""

    def __init__(self, tier: Tier) -> None:
        self._node = rclpy.create_node(
            "episode_client", namespace=tier.namespace, context=tier.context
        )
        self._executor = SingleThreadedExecutor(context=tier.context)
        self._executor.add_node(self._node)
        self.client = ActionClient(self._node, RunEpisode, f"{NODE}/run_episode")
        self.outcomes = tier.probe.listen(RunOutcome, f"{NODE}/outcome", LATCHED)
        tier.closers.append(self.close)

    def spin_until(self, condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
            self._executor.spin_once(timeout_sec=0.02)
        return condition()

    def send(self, instruction: str = "", max_actions: int = 0) -> Goal:
        self.spin_until(self.client.server_is_ready, START_S, "the run_episode server")
        return Goal(self, RunEpisode.Goal(instruction=instruction, max_actions=max_actions))

    def close(self) -> None:
        self.client.destroy()
        self._executor.shutdown(timeout_sec=1)
        self._node.destroy_node()


class Goal:
    """One goal sent to ``~/run_episode``: its acceptance, feedback and result."""

    def __init__(self, client: EpisodeClient, goal: Any) -> None:
        self._spin = client.spin_until
        self.feedback = Recording("feedback")
        sent = client.client.send_goal_async(goal, feedback_callback=self._on_feedback)
        self._spin(sent.done, WAIT_S, "the goal's acceptance")
        self.handle = sent.result()
        self.accepted = bool(self.handle.accepted)
        self._result = self.handle.get_result_async() if self.accepted else None

    def _on_feedback(self, message: Any) -> None:
        self.feedback(message.feedback)

    def wait_feedback(self, check: Callable[[Any], bool], what: str) -> Any:
        """Spin until a feedback message for which ``check`` holds has arrived; that one."""

        def found() -> Any:
            return next((f for f in self.feedback.snapshot() if check(f)), None)

        return self._spin(found, WAIT_S, what)

    def result(self, timeout_s: float = 30.0) -> tuple[str, Any]:
        """(succeeded | aborted | canceled, the RunOutcome) once the goal ended."""
        assert self._result is not None, "the goal was rejected"
        self._spin(self._result.done, timeout_s, "the goal's result")
        answer = self._result.result()
        return STATUS.get(answer.status, str(answer.status)), answer.result.outcome

    def cancel(self) -> None:
        canceling = self.handle.cancel_goal_async()
        self._spin(canceling.done, WAIT_S, "the cancel's answer")
        assert canceling.result().goals_canceling, "the cancel was refused"


Verdict = Callable[[Any], tuple[bool, str]]


class Validator:
    """A ``ValidateChunk`` server. ``verdict(request)`` answers each call (after ``delay_s``,
    during which its executor is busy, as a slow safety system's would be)."""

    def __init__(self, tier: Tier, name: str, verdict: Verdict, *, delay_s: float = 0.0) -> None:
        self.requests: list[Any] = []
        self.name = f"{tier.namespace}/{name}"
        self._verdict = verdict
        self._delay_s = delay_s
        self._node = rclpy.create_node(f"validator_{name}", context=tier.context)
        self._node.create_service(ValidateChunk, self.name, self._serve)
        self._executor = SingleThreadedExecutor(context=tier.context)
        self._executor.add_node(self._node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self._executor.spin_once(timeout_sec=0.05)

    def _serve(self, request: Any, response: Any) -> Any:
        self.requests.append(request)
        deadline = time.monotonic() + self._delay_s
        while time.monotonic() < deadline and not self._stop.is_set():
            time.sleep(0.01)
        response.accept, response.reason = self._verdict(request)
        return response

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._executor.shutdown(timeout_sec=1)
        self._node.destroy_node()
