"""Episodes as a ROS 2 action (``~/run_episode``, ``RunEpisode``) and every episode's outcome
on ``~/outcome``.

Both live as long as the node, not one configuration: a goal that a cleanup or shutdown ends
still gets its result, and a client sees the server in every lifecycle state (goals are
rejected unless the node is active). A goal starts an episode at once; its result is that
episode's ``RunOutcome``: succeeded on ``completed``, canceled after a cancel request, aborted
on any other end. A cancel stops the episode from its callback (one hold, reason
``stopped``), not at the next tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from rclpy.action.server import ActionServer, CancelResponse, GoalResponse
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from sequence_ai_ros.action import RunEpisode
from sequence_ai_ros.msg import RunOutcome

from .outcome_message import feedback_message, feedback_state

#: Feedback goes out on every state change, and at least this often.
FEEDBACK_PERIOD_S = 1.0


class GoalController(Protocol):
    """What the action needs of the node."""

    def start_refusal(self) -> str | None: ...

    def start_episode(self, *, instruction: str = "", max_actions: int = 0) -> str | None: ...

    def stop_episode(self, reason: Any, *, detail: str) -> bool: ...

    @property
    def episode_number(self) -> int: ...


class _Goal:
    """The goal being executed: its handle, its episode and the outcome once it ended."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.episode = 0
        self.started_at = time.monotonic()
        self.ended: Future = Future()
        self.phase = self.state = ""
        self.fed_at = -float("inf")


class EpisodeAction:
    def __init__(self, node: Any, controller: GoalController) -> None:
        self._node = node
        self._controller = controller
        self._goal: _Goal | None = None
        self._accepted: dict[bytes, _Goal] = {}  # until their execution starts
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self._outcomes = node.create_publisher(RunOutcome, "~/outcome", latched)
        self._server = ActionServer(
            node,
            RunEpisode,
            "~/run_episode",
            execute_callback=self._execute,
            goal_callback=self._on_goal,
            handle_accepted_callback=self._on_accepted,
            cancel_callback=self._on_cancel,
        )

    @property
    def running(self) -> bool:
        """A goal is being executed (its result not yet given)."""
        return self._goal is not None

    def _on_goal(self, goal: Any) -> GoalResponse:
        problem = self._controller.start_refusal()
        if problem is None and self._goal is not None:
            problem = "a goal is already running"
        if problem is not None:
            self._node.get_logger().warning(f"run_episode goal rejected: {problem}")
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_accepted(self, handle: Any) -> None:
        goal = _Goal(handle)
        request = handle.request
        problem = self._controller.start_episode(
            instruction=request.instruction, max_actions=int(request.max_actions)
        )
        if problem is None:
            goal.episode = self._controller.episode_number
            self._goal = goal
        else:  # the goal check and this run back to back on the executor: a defence only
            self._node.get_logger().warning(f"run_episode goal aborted: {problem}")
            goal.ended.set_result(RunOutcome(error=problem))
        self._accepted[bytes(handle.goal_id.uuid)] = goal
        handle.execute()

    def _on_cancel(self, handle: Any) -> CancelResponse:
        goal = self._goal
        if goal is None or goal.handle is not handle:
            return CancelResponse.REJECT
        self._controller.stop_episode("stopped", detail="run_episode goal canceled")
        return CancelResponse.ACCEPT

    async def _execute(self, handle: Any) -> Any:
        goal = self._accepted.pop(bytes(handle.goal_id.uuid))
        outcome = await goal.ended
        if self._goal is goal:
            self._goal = None
        result = RunEpisode.Result(outcome=outcome)
        if handle.is_cancel_requested:
            handle.canceled()
        elif outcome.reason == "completed" or outcome.label == "success":
            handle.succeed()
        else:
            handle.abort()
        return result

    def ended(self, outcome: Any) -> None:
        """An episode ended (however it was started): latch its outcome, and give the goal
        that started it its result."""
        self._outcomes.publish(outcome)
        goal = self._goal
        if goal is not None and goal.episode == outcome.episode and not goal.ended.done():
            goal.ended.set_result(outcome)
            # From the control clock's thread the executor would see it at its next wake only.
            executor = self._node.executor
            if executor is not None:
                executor.wake()

    def feedback(
        self, phase: str, snapshot_of: Callable[[], Mapping[str, Any]], actions: int
    ) -> None:
        """From the control tick (on the clock's thread): feedback on a state change and at
        least once a period. The engine's ``snapshot_of()`` costs a dict: taken only when
        feedback is due, or while waiting for the first chunk (when warming is told apart
        from waiting)."""
        goal = self._goal
        if goal is None or goal.ended.done():
            return
        now = time.monotonic()
        if phase != "waiting" and phase == goal.phase and now - goal.fed_at < FEEDBACK_PERIOD_S:
            return
        snapshot = snapshot_of()
        state = feedback_state(snapshot)
        if state == goal.state and now - goal.fed_at < FEEDBACK_PERIOD_S:
            return
        goal.phase, goal.state, goal.fed_at = phase, state, now
        msg = feedback_message(
            RunEpisode.Feedback, snapshot, actions=actions, elapsed_s=now - goal.started_at
        )
        goal.handle.publish_feedback(msg)

    def destroy(self) -> None:
        self._server.destroy()
        self._node.destroy_publisher(self._outcomes)
