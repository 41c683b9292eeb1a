"""How a ``run()`` stops: one hold per stop, the empty-plan bound, ``validate`` verdicts,
SIGTERM. The rules are in ``runner``'s module docs (DESIGN §4, "Every end holds, on time")."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .engine_config import Tick
from .errors import ChunkExhausted, Stalled
from .types import FloatArray, Observation

log = logging.getLogger(__name__)


class StopState:
    """The state ``drive`` keeps between ticks: holds, the empty-plan clock, ``observe``."""

    def __init__(self, hold: Callable[[], None] | None, stall_timeout_s: float | None) -> None:
        self._hold = hold
        self._stall_timeout_s = stall_timeout_s
        self.held = False
        self.empty_since: float | None = None
        self.observe_none_since: float | None = None

    def stop(self, original: BaseException | None = None) -> None:
        """Hold, unless the arm is held already. If ``hold`` raises while another error
        ends the run, that error is kept and the hold failure logged."""
        if self.held:
            return
        self.held = True
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

    def observing(
        self, observe: Callable[[], Observation | None], clock: Callable[[], float]
    ) -> Callable[[], Observation | None]:
        def wrapped() -> Observation | None:
            observation = observe()
            if observation is None:
                if self.observe_none_since is None:
                    self.observe_none_since = clock()
            else:
                self.observe_none_since = None
            return observation

        return wrapped

    def after(self, tick: Tick, now: float, acted: bool) -> None:
        """Hold on the first tick of an underrun; end the run once the plan stayed empty
        (or ``observe()`` returned nothing) past the bound."""
        if tick.action is not None:
            self.empty_since = None
            self.held = not acted and self.held
            return
        if tick.kind == "underrun":
            self.stop()
        if self.empty_since is None:
            self.empty_since = now
        bound = self._stall_timeout_s
        if bound is None:
            return
        none_since = self.observe_none_since
        if none_since is not None and now - max(none_since, self.empty_since) > bound:
            raise ChunkExhausted(
                f"observe() returned None for {now - none_since:.1f}s with nothing left to "
                "play; return an Observation once inputs are ready (a forgotten return?)"
            )
        if tick.kind == "underrun" and now - self.empty_since > bound:
            raise Stalled(
                f"no chunk to play for {now - self.empty_since:.1f}s (stall_timeout_s="
                f"{bound:g}); the arm was held when the plan ran out",
                warming=False,
            )


def refusal(validate: Callable[[FloatArray], Any] | None, action: FloatArray) -> Any:
    """None when ``validate`` accepts ``action``; True when it refuses it; a ``TypeError``
    describing the answer when it is not a real boolean (``(False, "why")`` and ``"False"``
    are truthy, so taking them as answers would let every action through)."""
    if validate is None:
        return None
    verdict = validate(action)
    if isinstance(verdict, (bool, np.bool_)):
        return None if verdict else True
    return TypeError(
        f"validate must return True or False (bool or numpy.bool_), it returned "
        f"{type(verdict).__name__} {verdict!r:.60}; the action was not sent"
    )


def interruptible(event: threading.Event) -> Callable[[float], None]:
    def sleep(seconds: float) -> None:
        event.wait(seconds)

    return sleep


@contextlib.contextmanager
def hold_on_sigterm() -> Iterator[None]:
    """SIGTERM (docker stop, systemd) raises ``SystemExit(143)`` in the run, so it holds and
    unwinds instead of the process dying mid-command. Only where Python would otherwise die
    on it: on the main thread, with SIGTERM's default disposition; a handler of the
    caller's own is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    try:
        previous = signal.getsignal(signal.SIGTERM)
    except (ValueError, OSError):  # pragma: no cover - no signals here
        yield
        return
    if previous is not signal.SIG_DFL:
        yield
        return

    def terminate(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
