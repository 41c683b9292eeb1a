"""The chunk gate: the caller's check of a whole chunk before any of its steps plays.

``InFlight`` asks it on the refill worker after ``plan.prepare``, so the check's time is part
of the refill that prefetch plans for. The check runs on the gate's own thread. A chunk is
refused (``ChunkRefused``: the episode ends with reason ``validate``) on False, on anything
but a real boolean, on ``ChunkRefused`` raised by the check, or on no answer within
``chunk_validator_timeout_s``. Any other exception is the caller's bug, never a failed
refill to retry: ``raise_checks_own`` raises it on the control thread as it was raised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from queue import SimpleQueue
from typing import Any

from ..errors import ChunkRefused
from ..types import ActionChunk, Observation
from .stops import is_bool

#: ``run(validate_chunk=)``: the chunk as the gateway returned it (checked finite and of its
#: declared sizes) and the observation it was requested with.
ChunkCheck = Callable[[ActionChunk, Observation], Any]
_Task = tuple[Future[Any], ActionChunk, Observation]


class CheckRaised(Exception):
    """Carries the check's own exception (``args[0]``, not a ``ChunkRefused``) in the future."""


def raise_checks_own(future: Future[Any]) -> None:
    """A completed refill's exception from the check itself, raised before (outside) any
    handler of refill failures: it reaches the caller as it was raised."""
    error = None if future.cancelled() else future.exception()
    if isinstance(error, CheckRaised):
        raise error.args[0]


class ChunkGate:
    """Made by a run's first request (``InFlight.start``), closed with its engine."""

    def __init__(self, check: ChunkCheck, timeout_s: float) -> None:
        self._check = check
        self._timeout_s = timeout_s
        self._tasks: SimpleQueue[_Task | None] = SimpleQueue()
        self._closed: Future[None] = Future()  # done: no refill waits past close()
        # a daemon: a check that never returns must not keep the process from exiting
        thread = threading.Thread(target=self._serve, name="sequence-ai-chunk-check", daemon=True)
        thread.start()

    def admit(self, chunk: ActionChunk, observation: Observation) -> None:
        """Return if the check accepts ``chunk``; raise ``ChunkRefused`` or ``CheckRaised``."""
        answer: Future[Any] = Future()
        self._tasks.put((answer, chunk, observation))
        done, _ = wait([answer, self._closed], self._timeout_s, return_when=FIRST_COMPLETED)
        if answer not in done:
            answer.cancel()  # still queued behind a stuck check: it never runs
            raise ChunkRefused(f"chunk check did not answer within {self._timeout_s:g} s")
        error = answer.exception()
        if error is not None:
            raise error if isinstance(error, ChunkRefused) else CheckRaised(error)
        _require_true(answer.result())

    def close(self) -> None:
        """Wakes every waiting refill; the thread ends after the check it is in, if any."""
        if not self._closed.done():
            self._closed.set_result(None)
        self._tasks.put(None)

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            answer, chunk, observation = task
            if answer.set_running_or_notify_cancel():  # False: given up on while queued
                try:
                    answer.set_result(self._check(chunk, observation))
                except Exception as exc:
                    answer.set_exception(exc)


def _require_true(verdict: object) -> None:
    boolean = is_bool(verdict)  # validate's rule
    if boolean and verdict:
        return
    what = "" if boolean else f" {type(verdict).__name__}, not True or False (bool or numpy.bool_)"
    raise ChunkRefused(f"validate_chunk returned {verdict!r:.60}{what}")
