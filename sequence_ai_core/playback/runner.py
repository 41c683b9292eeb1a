"""``Policy.run()``: the blocking control loop around ``PlaybackEngine``.

Which loop to use:

- ``policy.next_action(observation)`` — the simplest loop. It requests a chunk when its buffer
  is empty and blocks meanwhile, so the arm stops for one round trip per chunk. Fine for
  trying a model out; it never prefetches.
- ``policy.run(observe, act, max_actions=...)`` — this module. It paces ``act`` to the
  chunk's rate, keeps refills in flight ahead of time and measures the result.
- ``PlaybackEngine.play`` then ``refill`` (or ``tick``, both at once) — for a loop you
  already own (a ROS timer, a real-time thread): once per period, publish what ``play``
  returns, then let ``refill`` start a request if one is due.

Errors: a typed ``SequencesError`` ends the episode; hold is called and the returned
``RunOutcome`` has ``reason="raised:<Class>"`` and the error in ``.error`` (a controller
usually wants the counts of the failed episode as much as the error). That includes an
observation the client refuses to send (e.g. a NaN joint reading, or one the model's
catalogue entry cannot take: ``InvalidRequest``). Any other exception, from ``observe``,
``act``, ``validate``, ``validate_chunk`` or a callback, is a bug in the caller's code: hold
is called, then it propagates unchanged (and if ``hold`` itself raises, the original error
still wins). A chunk ``validate_chunk`` refuses (``ChunkRefused``) ends the run with reason
``validate``, as a refused action does.

The journaling, counting, stopping and holding are ``episode.Episode``'s, the same object
the ROS node drives: ``drive`` supplies only the pacing and, for each action, ``act`` or why
not (``validate``). Every end holds, on time
(docs/architecture.md §3). The first tick with nothing to play calls ``hold``
(velocity spaces would otherwise keep executing the last command), so hold comes within one
control period of the last planned step, and again after each recovery; a plan that stays
empty for ``stall_timeout_s`` ends the run (``Stalled``, or ``ChunkExhausted`` when
``observe()`` kept returning None) without a second hold. SIGTERM during ``run()`` on the
main thread holds and then exits (status 143), as SIGINT does via ``KeyboardInterrupt``.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import SequencesError
from ..types import FloatArray, Model, Observation, Prediction
from .chunk_gate import ChunkCheck
from .engine import PlaybackEngine
from .engine_config import DEFAULT_STALL_TIMEOUT_S, EngineConfig, RunConfig, check_pool
from .episode import Episode, check_max_actions
from .journal import UNRECORDED, Journal
from .outcome import RunOutcome
from .pacing import WAITING_POLL_S, Pacer
from .source import ChunkSource
from .stops import hold_on_sigterm, interruptible, is_bool, refusal
from .tick import Tick

__all__ = ["Player", "RunnableSource", "drive", "run_policy"]

_warned_unvalidated = False
_warn_lock = threading.Lock()


class Player(Protocol):
    """What ``drive`` needs: ``PlaybackEngine`` is one; the benchmarks add baselines."""

    @property
    def period_s(self) -> float | None:
        """The control period; None while no rate is known (waiting ticks then poll)."""

    def play(self, now: float) -> Tick:
        """The step due at ``now`` (``PlaybackEngine.play``)."""

    def refill(self, now: float, observe: Callable[[], Observation | None]) -> None:
        """After the step went out (or none did): start a request if one is due."""

    def commit(self) -> None: ...

    def wait_any(self, timeout_s: float) -> bool: ...

    def outcome(self, *, reason: str, stopped_early: bool) -> RunOutcome: ...


class RunnableSource(ChunkSource, Protocol):
    """What ``run_policy`` needs beyond a ``ChunkSource``: ``Policy`` is one."""

    @property
    def max_connections(self) -> int | None:
        """The size of the source's connection pool, None if unknown."""

    @property
    def closed_event(self) -> threading.Event:
        """Set when the source closes: a run paced on another thread wakes and ends."""

    def check_observation(self, observation: Observation) -> None:
        """Raise ``InvalidRequest`` for an observation the model cannot take."""

    def cancel_requests(self) -> int:
        """Abort the requests in flight; the source stays open."""

    def describe(self) -> Model:
        """The model's catalogue entry (its chunk length and rate pace the first ticks)."""


def run_policy(
    policy: RunnableSource,
    observe: Callable[[], Observation | None],
    act: Callable[[FloatArray], None],
    *,
    max_actions: int,
    validate: Callable[[FloatArray], Any] | None = None,
    hold: Callable[[], None] | None = None,
    on_chunk: Callable[[Prediction], None] | None = None,
    on_underrun: Callable[[float], None] | None = None,
    config: EngineConfig | None = None,
    journal: Journal = UNRECORDED,
    validate_chunk: ChunkCheck | None = None,
    takeover: Callable[[], Any] | None = None,
) -> RunOutcome:
    """Play ``max_actions`` actions through ``act``, refilling ahead of time.

    ``observe()`` returns the current Observation (or None when inputs are not ready; nothing
    is sent that tick). ``validate(action)`` runs before every ``act`` and must return
    ``True`` or ``False`` (a ``bool`` or ``numpy.bool_``); False, or anything else, stops the
    run (reason ``validate``). ``validate_chunk(chunk, observation)`` checks each whole chunk
    (the ``ActionChunk`` as the gateway returned it, the ``Observation`` it was asked with) on
    a worker before any step of it plays, by the same rule; raising ``ChunkRefused("why")``
    refuses it with a reason, and no answer within ``chunk_validator_timeout_s`` refuses it
    (``chunk_gate``). ``hold()`` is called on every early stop and whenever the plan
    runs out (underrun), once each time, never on completion.

    ``takeover()`` is asked every tick, on this thread, whether a person has the arm (a
    ``bool``; anything else is a bug and stops the run). While it is True nothing reaches
    ``act`` or ``hold``, no request goes out and the episode stays alive: ``max_actions``
    counts the policy's actions and the stall clock stops. When it turns False, ``hold()``
    is called once, a fresh observation is sent at once, and the first chunk plays from its
    first step, handed over from the arm's measured state (``Episode.hand_back``).

    The settings are one ``RunConfig`` (an ``EngineConfig`` plus ``stall_timeout_s``; an
    ``EngineConfig`` gets the default bound): ``prefetch=False`` is the strictly closed loop,
    ``startup_timeout_s`` waits for a warming worker before the first action,
    ``stall_timeout_s`` bounds how long the plan may stay empty, and ``options`` go to
    ``/v1/act`` as they are (e.g. ``{"seed": 1}``). The control period is the engine's: from
    ``connect(control_hz=)``, else the config, else the chunks (the catalogue's rate until
    the first arrives); the chunk length is the catalogue's. The handle is held for the
    whole run: a second thread driving it raises ``SequencesError`` at once. ``journal``
    is told what happens (a flight recorder: ``Policy.run(record=)``).
    """
    check_max_actions(max_actions)
    run_config = RunConfig.of(config)  # checked when it was built, before any I/O
    check_pool(run_config.max_in_flight, policy.max_connections)
    if validate is None:
        _warn_unvalidated()
    run_config = run_config.with_catalogue(_catalogue_entry(policy))
    # the engine takes the one-driver guard: a second driver is refused before any act request
    engine = PlaybackEngine(
        policy, run_config, on_chunk=on_chunk, on_underrun=on_underrun, journal=journal,
        validate_chunk=validate_chunk,
    )  # fmt: skip

    def observe_checked() -> Observation | None:
        observation = observe()
        if observation is not None:
            policy.check_observation(observation)
        return observation

    try:
        with hold_on_sigterm():
            return drive(
                engine,
                observe_checked,
                act,
                max_actions=max_actions,
                validate=validate,
                hold=hold,
                stall_timeout_s=run_config.stall_timeout_s,
                stop_event=policy.closed_event,
                journal=journal,
                takeover=takeover,
            )
    finally:
        policy.cancel_requests()  # nothing in flight outlives the run
        engine.close()


def drive(
    player: Player,
    observe: Callable[[], Observation | None],
    act: Callable[[FloatArray], None],
    *,
    max_actions: int,
    validate: Callable[[FloatArray], Any] | None = None,
    hold: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    stop_event: threading.Event | None = None,
    journal: Journal = UNRECORDED,
    takeover: Callable[[], Any] | None = None,
) -> RunOutcome:
    """The paced loop shared by ``run_policy`` and the benchmark baselines.

    The player's ``period_s`` paces every tick, those before the first chunk too
    (``PlaybackEngine`` has the catalogue's rate then), so that every observation is taken
    on the grid the plan is played on. While it is None (no rate known), waiting ticks poll.
    ``stop_event`` (set by ``Policy.close()``) wakes the pacer and ends the run.
    """
    if stop_event is not None:
        sleep = interruptible(stop_event)
    pacer = Pacer(clock, sleep)
    episode = Episode(
        player, max_actions=max_actions, hold=hold, stall_timeout_s=stall_timeout_s,
        journal=journal,
    )  # fmt: skip
    observe = episode.observing(observe, clock)
    try:
        while True:
            if stop_event is not None and stop_event.is_set():
                raise SequencesError("the policy handle was closed during run()")
            now = clock()
            if takeover is not None and _follow(episode, takeover, now, observe):
                pacer.wait(now, player.period_s)
                continue
            tick = player.play(now)
            action = tick.action
            if action is None:
                if episode.idle(tick.kind, clock()):
                    return episode.outcome
                player.refill(now, observe)
                _pace(player, pacer, tick, now, clock, sleep)
                continue
            refused = refusal(validate, action)
            if refused is None:
                act(action)
            if episode.settle(tick, refused):  # journaled and counted, or refused
                return episode.outcome
            player.refill(now, observe)  # after act: a request never delays the command
            pacer.wait(now, player.period_s)
    except SequencesError as exc:
        episode.stop(error=exc)
        return episode.outcome
    except BaseException as exc:
        episode.stop(error=exc)  # hold, then the caller's bug propagates unchanged
        raise


def _follow(
    episode: Episode,
    takeover: Callable[[], Any],
    now: float,
    observe: Callable[[], Observation | None],
) -> bool:
    """Ask ``takeover()`` who has the arm and tell the episode; True while a person has it."""
    human = takeover()
    if not is_bool(human):
        raise TypeError(f"takeover() must return a bool, got {type(human).__name__}")
    if human:
        episode.take_over(now)
        episode.watch(now, observe)
        return True
    episode.hand_back(now)
    return False


def _pace(
    player: Player,
    pacer: Pacer,
    tick: Tick,
    now: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> None:
    period = player.period_s
    if tick.kind == "waiting" and period is None:
        started = clock()
        if not player.wait_any(WAITING_POLL_S) and clock() - started < WAITING_POLL_S:
            sleep(WAITING_POLL_S)  # nothing in flight (inputs not ready, retry later)
    else:
        pacer.wait(now, period)


def _catalogue_entry(policy: RunnableSource) -> Model | None:
    """The catalogue entry, or None when it cannot be read: the first chunk will tell the
    rate and length, at the cost of a stall at the first seam for chunks shorter than the
    round trip."""
    try:
        return policy.describe()
    except SequencesError:
        return None


def _warn_unvalidated() -> None:
    global _warned_unvalidated
    with _warn_lock:
        if _warned_unvalidated:
            return
        _warned_unvalidated = True
    warnings.warn(
        "run() without validate=: model actions reach act() checked only for finiteness "
        "and size; pass validate= with your robot's limits",
        UserWarning,
        stacklevel=3,
    )
