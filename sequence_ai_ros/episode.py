"""The node's episodes: numbering and the e-stop latch around the core ``Episode``.

Plain state with no ROS and no I/O, so the rules are testable on their own:
- an episode starts only when the node is active, none is running and the e-stop is released;
- the e-stop latches: while it is latched nothing starts, and releasing it does not resume;
- a person may take the arm over and hand it back (``set_takeover``): the state is the node's,
  so an episode started while they have it waits for the hand-back;
- counting, stopping and holding are the core ``sequence_ai_core.playback.episode.Episode``'s, the
  same as ``Policy.run()``'s: every episode ends exactly once, only that end holds, and the
  counts in diagnostics are the outcome's.
"""

from __future__ import annotations

from dataclasses import dataclass

from sequence_ai_core import Episode, RunOutcome
from sequence_ai_core.node_api import Label, StopReason


@dataclass(frozen=True)
class EpisodeEnd:
    number: int
    reason: str  # a StopReason, or raised:<Class>
    actions: int
    early: bool
    detail: str = ""


class Episodes:
    def __init__(self) -> None:
        self.number = 0
        self.current: Episode | None = None
        self.estop_latched = False
        #: A person has the arm (the takeover topic, ~/set_takeover).
        self.taken_over = False
        self.last_end: EpisodeEnd | None = None
        self._recorded: Episode | None = None  # the episode whose end is last_end

    @property
    def running(self) -> bool:
        return self.current is not None and not self.current.ended

    @property
    def actions(self) -> int:
        """Actions committed in the running (or last) episode."""
        return self.current.actions if self.current is not None else 0

    def refusal(self, *, active: bool) -> str | None:
        """Why no episode may start now, or None."""
        if not active:
            return "node is not active"
        if self.estop_latched:
            return "e-stop is latched; release it first"
        if self.running:
            return f"episode {self.number} is already running"
        return None

    def start(self, episode: Episode, now: float) -> None:
        """Number and run ``episode`` (after ``refusal`` said it may start); taken over at
        once if a person has the arm."""
        if self.running:
            raise RuntimeError(f"episode {self.number} is already running")
        self.number += 1
        self.current = episode
        if self.taken_over:
            episode.take_over(now)

    def set_takeover(self, engaged: bool, now: float) -> bool:
        """A person takes the arm (True) or hands it back, at ``now``; True if it changed.
        The running episode follows (its one hold at the hand-back included)."""
        if engaged == self.taken_over:
            return False
        self.taken_over = engaged
        episode = self.current
        if episode is not None and not episode.ended:
            if engaged:
                episode.take_over(now)
            else:
                episode.hand_back(now)
        return True

    def set_estop(self, engaged: bool) -> bool:
        """Apply an e-stop message; True if a running episode must stop now."""
        if not engaged:
            self.estop_latched = False
            return False
        self.estop_latched = True
        return self.running

    def end(
        self,
        reason: StopReason | None,
        *,
        error: BaseException | None = None,
        detail: str = "",
        label: Label = "",
    ) -> tuple[EpisodeEnd, RunOutcome] | None:
        """Stop the running episode from outside its ticks (an e-stop, a cancel, a failed
        callback, a person's label: its one hold included) and record its end (``record``)."""
        episode = self.current
        if episode is not None and not episode.ended:
            episode.stop(reason, error=error, detail=detail, label=label)
        return self.record()

    def record(self) -> tuple[EpisodeEnd, RunOutcome] | None:
        """Record the end of the current episode, as the episode decided it (a tick or
        ``end``); None if it is still running or its end was recorded already."""
        episode = self.current
        if episode is None or not episode.ended or episode is self._recorded:
            return None
        outcome = episode.outcome
        self._recorded = episode
        end = EpisodeEnd(
            self.number, outcome.reason, episode.actions, outcome.stopped_early, episode.detail
        )
        self.last_end = end
        return end, outcome
