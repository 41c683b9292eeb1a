"""A recorded episode's takeovers: when a person had the arm, and how long each hand-back
took, from the ``takeover`` and ``release`` events (``topics.EVENTS``) and the commands.

A bag without takeover events (every bag before them) has no spans and no resumes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .recorded import RecordedEpisode


@dataclass(frozen=True)
class Takeover:
    """One span a person had the arm, in seconds from the bag's first message."""

    start_t: float
    #: The release; None when the bag ends taken over.
    end_t: float | None

    def until(self, bag_end_t: float) -> float:
        """Its release; one still under way runs to the bag's end."""
        return bag_end_t if self.end_t is None else self.end_t

    def seconds(self, bag_end_t: float) -> float:
        return self.until(bag_end_t) - self.start_t


def takeovers(episode: RecordedEpisode) -> tuple[Takeover, ...]:
    """Each takeover event paired with the release after it; a release with no takeover open
    (its takeover not recorded) is left out, as is a second takeover while one is open."""
    spans: list[Takeover] = []
    started: float | None = None
    for event in episode.events:
        if event.name == "takeover" and started is None:
            started = event.t
        elif event.name == "release" and started is not None:
            spans.append(Takeover(started, event.t))
            started = None
    if started is not None:
        spans.append(Takeover(started, None))
    return tuple(spans)


def had_takeovers(episode: RecordedEpisode) -> bool:
    """The bag or its outcome has a takeover: the report then shows what it measured."""
    return bool(takeovers(episode)) or episode.outcome.get("takeovers", "0") not in ("", "0")


def resume_times(episode: RecordedEpisode, spans: tuple[Takeover, ...]) -> list[float]:
    """From each release to the first command after it, for the releases a command followed
    before the next takeover (``RunOutcome.max_resume_s`` is the largest)."""
    times = episode.command_t
    found = []
    for k, span in enumerate(spans):
        if span.end_t is None:
            continue
        after = times[times >= span.end_t]
        following = spans[k + 1].start_t if k + 1 < len(spans) else np.inf
        if after.size and after[0] < following:
            found.append(float(after[0]) - span.end_t)
    return found
