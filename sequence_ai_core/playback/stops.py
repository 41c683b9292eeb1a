"""How a ``run()`` stops besides the episode's rules (``episode``): ``validate`` verdicts,
a close from another thread, SIGTERM (docs/architecture.md §3,
"Every end holds, on time")."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..types import FloatArray
from .episode import Verdict


def is_bool(answer: object) -> bool:
    """A caller's yes-or-no answer is a real boolean: ``(False, "why")`` and ``"False"`` are
    truthy, so taking them as answers would say yes to anything."""
    return isinstance(answer, (bool, np.bool_))


def refusal(validate: Callable[[FloatArray], Any] | None, action: FloatArray) -> Verdict:
    """None when ``validate`` accepts ``action``; a text when it refuses it; a ``TypeError``
    describing the answer when it is not a real boolean (``(False, "why")`` and ``"False"``
    are truthy, so taking them as answers would let every action through)."""
    if validate is None:
        return None
    verdict = validate(action)
    if is_bool(verdict):
        return None if verdict else "validate returned False"
    return TypeError(
        f"validate must return True or False (bool or numpy.bool_), it returned "
        f"{type(verdict).__name__} {verdict!r:.60}; the action was not sent"
    )


#: Sleeps up to this long are plain ``time.sleep``: the loop checks the event before each
#: tick, so a close is seen within this. ``Event.wait`` takes a lock and a condition on
#: every call, which costs about a steady tick (docs/performance.md, "Behind the engine's
#: constants").
PLAIN_SLEEP_S = 0.05


def interruptible(event: threading.Event) -> Callable[[float], None]:
    """A sleep that a set ``event`` cuts short (past ``PLAIN_SLEEP_S``; the caller checks
    the event between sleeps)."""

    def sleep(seconds: float) -> None:
        if seconds <= PLAIN_SLEEP_S:
            time.sleep(seconds)
        else:
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
