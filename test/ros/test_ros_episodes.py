"""The node's episodes (sequence_ai_ros/episode.py), ROS-free: numbering, the e-stop latch and
one end per episode around the core ``Episode``."""

from __future__ import annotations

import numpy as np

from sequence_ai_core.playback.episode import Episode
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.playback.stats import ActionRecord, PlaybackStats
from sequence_ai_ros.episode import Episodes


class Counted:
    """The engine side of an episode: the real statistics, fed what was committed."""

    def __init__(self) -> None:
        self.stats = PlaybackStats()

    def commit(self) -> None:
        now = float(self.stats.actions)
        self.stats.commit(ActionRecord(now, np.zeros(2), 0.0, 0.1, new_chunk=False, steady=False))

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        return self.stats.outcome(
            reason=reason,
            stopped_early=stopped_early,
            elapsed_s=0.0,
            action_space=None,
            retries=0,
            requests=0,
            error=None,
        )


def test_estop_latches_and_each_episode_ends_once() -> None:
    holds: list[int] = []
    episodes = Episodes()

    def episode(max_actions: int) -> Episode:
        return Episode(Counted(), max_actions=max_actions, hold=lambda: holds.append(1))

    assert episodes.refusal(active=False) == "node is not active"
    assert episodes.refusal(active=True) is None
    episodes.start(episode(3), 0.0)
    assert "already running" in str(episodes.refusal(active=True))
    assert episodes.set_estop(True) is True  # running: must stop now
    ended = episodes.end("estop")
    assert ended is not None and ended[0].early and ended[0].number == 1 and holds == [1]
    assert episodes.end("estop") is None and holds == [1]  # a second stop does not hold again
    assert "latched" in str(episodes.refusal(active=True))
    assert episodes.set_estop(False) is False
    assert not episodes.running  # releasing does not resume
    assert episodes.refusal(active=True) is None
    episodes.start(episode(2), 0.0)
    current = episodes.current
    assert current is not None
    assert [current.commit(), current.commit()] == [False, True]
    ended = episodes.end("completed")
    assert ended is not None and not ended[0].early and holds == [1]  # completion: no hold
    assert ended[0].actions == ended[1].actions == episodes.actions == 2


def test_an_episode_refused_by_its_checks_is_recorded_with_its_own_detail() -> None:
    episodes = Episodes()
    episodes.start(Episode(Counted(), max_actions=5), 0.0)
    current = episodes.current
    assert current is not None and current.offer(None) and not current.commit()
    assert not current.offer("above upper_limits at index [0]")  # the episode stops itself
    ended = episodes.end("validate")
    assert ended is not None
    end, outcome = ended
    assert (end.reason, end.detail, end.actions, outcome.actions) == (
        "validate",
        "above upper_limits at index [0]",
        1,
        1,
    )
