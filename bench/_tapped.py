"""The engine as ``runner.drive`` ticks it, for a benchmark that must see every tick.

``Tapped`` passes each call on to the engine once; ``last`` is the tick it handed out last,
and ``seen(tick)`` (a subclass's) is told of each one as it goes by.
"""

from __future__ import annotations

from collections.abc import Callable

from sequence_ai_core.playback.engine import PlaybackEngine, Tick
from sequence_ai_core.playback.outcome import RunOutcome
from sequence_ai_core.types import Observation


class Tapped:
    def __init__(self, engine: PlaybackEngine) -> None:
        self.engine = engine
        self.last: Tick | None = None

    def seen(self, tick: Tick) -> None:
        """Each tick as the engine handed it out (nothing here)."""

    @property
    def period_s(self) -> float | None:
        return self.engine.period_s

    def play(self, now: float) -> Tick:
        self.last = self.engine.play(now)
        self.seen(self.last)
        return self.last

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        self.engine.refill(now, observe)

    def commit(self) -> None:
        self.engine.commit()

    def wait_any(self, timeout_s: float) -> bool:
        return self.engine.wait_any(timeout_s)

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome:
        return self.engine.outcome(reason=reason, stopped_early=stopped_early)

    def take_over(self, now: float) -> None:
        self.engine.take_over(now)

    def hand_back(self, now: float) -> None:
        self.engine.hand_back(now)
