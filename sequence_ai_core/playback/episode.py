"""One bounded episode, the same for every driver: ``Policy.run()`` and the ROS node.

A driver ticks the engine and does the I/O (pacing, ``act`` or a publisher); the episode
decides what each tick means and when the episode ends, so both drivers count, stop and
hold alike (docs/architecture.md §3):

- each action gets the driver's verdict once (``settle``): *sent*, as the command that went
  out, which is journaled and counted (at ``max_actions`` the episode ends ``completed``);
  or *refused*, why (``validate``, the node's safety checks), which ends the episode
  (``validate``) with nothing sent; so does a chunk the chunk gate refused
  (``ChunkRefused``, whichever driver saw it);
- an empty tick after the first action is an underrun (``idle``): one hold per spell, and a
  plan that stays empty past ``stall_timeout_s`` ends the episode (``raised:Stalled``);
- ``stop`` ends it exactly once, however it ends: one hold on an early stop (none when an
  underrun hold is still in force), and the ``RunOutcome``, whose ``actions`` are the
  committed ones, with a person's ``label`` if one was given;
- a person may take the arm over and hand it back (``take_over``, ``hand_back``): while they
  have it nothing is sent and nothing held, the episode stays alive (``max_actions`` counts
  policy actions, the stall clock stops) and the arm is journaled (``watch``); the hand-back
  holds once, and the policy resumes from the arm's measured state (``engine.take_over``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import replace
from typing import Literal, Protocol, get_args, runtime_checkable

from ..errors import ChunkExhausted, ChunkRefused, SequencesError, Stalled
from ..types import FloatArray, Observation
from .engine_config import DEFAULT_STALL_TIMEOUT_S, check_stall_timeout
from .journal import UNRECORDED, Journal
from .outcome import RunOutcome
from .tick import Tick, TickKind

log = logging.getLogger(__name__)

#: How an episode ends, besides ``raised:<Class>`` (built from the error by ``stop``).
StopReason = Literal["completed", "validate", "estop", "stopped", "stale_input"]
#: The driver's verdict on an action: None accepts it; a text (why) or an exception (a
#: validator that answered something other than a boolean) refuses it.
Verdict = str | BaseException | None
#: A person's verdict on how the episode went (``stop(label=)``); empty: none given.
Label = Literal["success", "failure", ""]
LABELS: tuple[Label, ...] = get_args(Label)
#: While taken over, the arm is journaled this often (``watch``): a correction dataset's
#: joint states, at the rate the issue of record asks as a floor.
WATCH_HZ = 10.0


def check_max_actions(max_actions: object) -> None:
    """Every episode is bounded: a positive int, no run-forever."""
    if isinstance(max_actions, bool) or not isinstance(max_actions, int) or max_actions <= 0:
        raise ValueError(f"max_actions must be a positive int, got {max_actions!r}")


class EpisodeEngine(Protocol):
    """What an episode needs from its engine: ``PlaybackEngine`` is one."""

    def commit(self) -> None: ...

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome: ...


@runtime_checkable
class Suspendable(Protocol):
    """An engine a person can take the arm from: ``PlaybackEngine`` is one."""

    def take_over(self, now: float) -> None: ...

    def hand_back(self, now: float) -> None: ...


class Episode:
    """One episode of at most ``max_actions`` committed actions. See module docs.

    ``hold`` is called on an early stop and, unless ``hold_underrun`` is given, on the first
    tick of each underrun; a stop while that underrun hold is in force does not repeat it
    (``run()``). The node passes its own ``hold_underrun`` (absolute targets hold by
    themselves), and then every early stop calls ``hold``. ``stall_timeout_s`` has
    ``RunConfig``'s rule and default: no episode holds on an empty plan unbounded.
    ``journal`` is told of every hold (once it was called) and of the outcome.
    ``hold_release`` holds the arm at a hand-back until the policy's next chunk plays (the
    node's: zeros for speeds, the measured position for targets); by default ``hold``.
    """

    def __init__(
        self,
        engine: EpisodeEngine,
        *,
        max_actions: int,
        hold: Callable[[], None] | None = None,
        hold_underrun: Callable[[], None] | None = None,
        stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
        journal: Journal = UNRECORDED,
        hold_release: Callable[[], None] | None = None,
    ) -> None:
        check_max_actions(max_actions)
        check_stall_timeout(stall_timeout_s)  # the rule and default of RunConfig's field
        self._engine = engine
        self.max_actions = max_actions
        self._hold = hold
        self._hold_underrun = hold_underrun
        self._hold_release = hold_release
        self._stall_timeout_s = stall_timeout_s
        self._journal = journal
        self.actions = 0
        self.detail = ""
        self._held = False  # an underrun hold through ``hold`` is in force
        self._in_underrun = False
        self._empty_since: float | None = None
        self._observe_none_since: float | None = None
        self._outcome: RunOutcome | None = None
        #: A person has the arm (``take_over``), and when the arm is journaled next.
        self.taken_over = False
        self._watch_due = -math.inf

    @property
    def ended(self) -> bool:
        return self._outcome is not None

    @property
    def remaining(self) -> int:
        """Actions still allowed, the one being offered included."""
        return self.max_actions - self.actions

    @property
    def outcome(self) -> RunOutcome:
        """The outcome of the ended episode."""
        if self._outcome is None:
            raise RuntimeError("the episode is still running")
        return self._outcome

    def settle(
        self, tick: Tick, refusal: Verdict = None, *, sent: FloatArray | None = None
    ) -> bool:
        """The driver's verdict on ``tick``'s action, once: sent (as ``sent``, by default the
        action itself) or refused (``refusal``, why). A sent command is journaled and counted
        and ends the episode at ``max_actions``; a refusal ends it. True when it has ended."""
        if refusal is not None:
            self.offer(refusal)
            return True
        command = tick.action if sent is None else sent
        if command is None:
            raise ValueError("settle() needs a tick with an action")
        self._journal.command(tick.at, command)
        if self.commit():
            self.stop("completed")
        return self.ended

    def idle(self, kind: TickKind, now: float) -> bool:
        """A tick with nothing to play (``empty_tick``); True when it ended the episode."""
        ended = self.empty_tick(kind, now)
        if ended is not None:
            self.stop(error=ended, detail=str(ended))
        return self.ended

    def take_over(self, now: float) -> bool:
        """A person has the arm: nothing is sent or held until ``hand_back``, and the stall
        clock stops; a stop meanwhile (an e-stop) still holds. Idempotent; True if this
        call took it over."""
        if self.taken_over or self.ended:
            return False
        engine = self._engine
        if not isinstance(engine, Suspendable):
            raise TypeError(f"{type(engine).__name__} cannot be taken over (no take_over)")
        engine.take_over(now)
        self.taken_over = True
        self._held = self._in_underrun = False  # the person's device commands the arm now
        self._empty_since = None
        self._watch_due = -math.inf
        return True

    def hand_back(self, now: float) -> bool:
        """The person hands the arm back: it is held once (``hold_release``) until the first
        chunk after it plays, and the stall clock runs from now. Idempotent; True if this
        call handed it back."""
        if not self.taken_over or self.ended:
            return False
        engine = self._engine
        assert isinstance(engine, Suspendable)  # take_over checked it
        self.taken_over = False
        engine.hand_back(now)
        self._empty_since = now
        if self._hold_release is not None:
            self._hold_release()
        else:
            self._held = True
            if self._hold is not None:
                self._hold()
        self._journal.hold("release")
        return True

    def watch(self, now: float, observe: Callable[[], Observation | None]) -> None:
        """While taken over: journal the arm (``observe()``) on a ``WATCH_HZ`` grid, at the
        first tick at or after each slot, so any control rate above it keeps the rate."""
        if not self.taken_over or now < self._watch_due - 1e-9:
            return
        observation = observe()
        if observation is None:
            return
        step = 1.0 / WATCH_HZ
        behind = now - self._watch_due > step  # the first, or ticks came late: restart
        self._watch_due = now + step if behind else self._watch_due + step
        self._journal.observed(now, observation)

    def offer(self, verdict: Verdict) -> bool:
        """True if the tick's action may go out; a refusal stops the episode (``validate``).
        ``settle``'s first half, for a driver that asks before sending."""
        if verdict is None:
            return True
        if isinstance(verdict, BaseException):
            self.stop("validate", error=verdict, detail=str(verdict))
        else:
            self.stop("validate", detail=verdict)
        return False

    def commit(self) -> bool:
        """The action went out: count it. True when ``max_actions`` is reached (``settle``
        then ends the episode)."""
        self._engine.commit()
        self.actions += 1
        self._held = self._in_underrun = False
        self._empty_since = None
        return self.actions >= self.max_actions

    def empty_tick(self, kind: TickKind, now: float) -> SequencesError | None:
        """A tick with nothing to play: hold on the first tick of an underrun. Returns the
        error that ends the episode once the plan stayed empty (or ``observe()`` returned
        nothing) past ``stall_timeout_s``; ``idle`` stops with it."""
        if kind in ("early", "human"):
            # the step due went out at an earlier tick (the plan is not empty), or a person
            # has the arm: neither holds nor runs the stall clock
            return None
        if kind == "underrun" and not self._in_underrun:
            self._in_underrun = True
            self._hold_for_underrun()
        if self._empty_since is None:
            self._empty_since = now
        bound = self._stall_timeout_s
        none_since = self._observe_none_since
        if none_since is not None and now - max(none_since, self._empty_since) > bound:
            return ChunkExhausted(
                f"observe() returned None for {now - none_since:.1f}s with nothing left to "
                "play; return an Observation once inputs are ready (a forgotten return?)"
            )
        if kind in ("underrun", "resuming") and now - self._empty_since > bound:
            return Stalled(
                f"no chunk to play for {now - self._empty_since:.1f}s (stall_timeout_s="
                f"{bound:g}); the arm was held when the plan ran out",
                warming=False,
            )
        return None

    def stop(
        self,
        reason: StopReason | None = None,
        *,
        error: BaseException | None = None,
        detail: str = "",
        label: Label = "",
    ) -> RunOutcome | None:
        """End the episode: ``reason``, or when None ``raised:<Class>`` of ``error`` (``validate``
        for a ``ChunkRefused``), with a person's ``label`` if given. Holds once on an early
        stop. None if it had ended already.

        If ``hold`` raises while an error ends the episode, that error is kept and the hold
        failure logged; otherwise the hold failure propagates (the episode has ended)."""
        if self._outcome is not None:
            return None
        if reason is None and error is None:
            raise ValueError("stop() needs a reason or an error")
        if label not in LABELS:
            raise ValueError(f"label must be one of {LABELS}, got {label!r}")
        why = reason if reason is not None else _reason_of(error)
        early = why != "completed"
        outcome = self._engine.outcome(reason=why, stopped_early=early)
        self._outcome = replace(outcome, error=error or outcome.error, label=label)
        self.detail = detail
        try:
            if early and not self._held:
                try:
                    self._call_hold(error if reason is None else None)
                finally:  # the hold first: nothing a journal does can come before it
                    self._journal.hold(why)
        finally:
            self._journal.outcome(self._outcome)
        return self._outcome

    def observing(
        self, observe: Callable[[], Observation | None], clock: Callable[[], float]
    ) -> Callable[[], Observation | None]:
        """``observe`` that notes since when it returns None (``run()``: a forgotten
        ``return`` must not look like a waiting gateway forever)."""

        def wrapped() -> Observation | None:
            observation = observe()
            if observation is None:
                if self._observe_none_since is None:
                    self._observe_none_since = clock()
            else:
                self._observe_none_since = None
            return observation

        return wrapped

    def _hold_for_underrun(self) -> None:
        if self._hold_underrun is not None:
            self._hold_underrun()
            self._journal.hold("underrun")
        elif not self._held:
            self._held = True
            if self._hold is not None:
                self._hold()
            self._journal.hold("underrun")

    def _call_hold(self, original: BaseException | None) -> None:
        self._held = True
        if self._hold is None:
            return
        try:
            self._hold()
        except BaseException as exc:
            if original is None:
                raise
            log.error(
                "hold() raised %s while stopping on %s", type(exc).__name__, original, exc_info=exc
            )


def _reason_of(error: BaseException | None) -> str:
    # a refused chunk is refused like a refused action: both drivers end on ``validate``
    return "validate" if isinstance(error, ChunkRefused) else f"raised:{type(error).__name__}"
