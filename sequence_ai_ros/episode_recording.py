"""The node's flight recorder: one rosbag2 bag per episode while ``record_dir`` is set.

ROS-free. Each episode gets its own ``FlightRecorder`` (``sequence_ai_core.recording``, the
one ``Policy.run(record=)`` uses), which the node hands to the episode's ``PlaybackEngine``
and core ``Episode`` as their journal: the engine tells it of requests, chunks and events,
the episode of every hold and of the outcome, and the control step (``Control.step``) of
each command it sent. The node tells it of the one hold it sends outside the episode (the
zeros that end a completed velocity episode).

Recording never stops an arm and never holds up a tick: ``end`` closes an episode's recorder
without waiting (its writer thread finishes the bag on its own), and a recorder that cannot
be made is a warning, after which the episode runs unrecorded. ``close`` (cleanup, shutdown,
process exit) waits a bounded time for the bags still being finished: the writer is a daemon
thread, and a bag whose writer dies with the process has no metadata.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from sequence_ai_core import (
    ActionChunk,
    EngineConfig,
    Observation,
    PlaybackEngine,
    Policy,
    RunOutcome,
)
from sequence_ai_core.node_api import (
    UNRECORDED,
    FlightRecorder,
    Journal,
    RecordConfig,
    load_rosbags,
)

from .diagnostics import RecordingStatus
from .parameters import ParameterError

#: How long cleanup, shutdown and process exit wait, in all, for bags still being finished
#: (a writer has at most a queue of records and the metadata left to write).
CLOSE_WAIT_S = 2.0


class EpisodeRecordings:
    """The recorder of the running episode, and the bags still being finished. ``warn``
    gets every problem (a recorder that cannot be made, one that stopped recording, a bag
    not finished in time), from the control thread or a recorder's writer thread."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self._warn = warn
        self._config: RecordConfig | None = None
        self._current: FlightRecorder | None = None
        #: The running or last episode's recorder, for diagnostics (kept across cleanup).
        self._last: FlightRecorder | None = None
        self._previous: FlightRecorder | None = None  # the last one before ``start``
        self._finishing: list[FlightRecorder] = []

    def configure(self, config: RecordConfig | None) -> None:
        """Record the episodes from now on as ``config`` says (None: not at all), making
        its directory if missing. Refuses, before anything runs, what would leave every
        episode unrecorded: no rosbags (the core's ``ConfigurationError``, with its install
        hint), or a directory that cannot be made or written (``ParameterError``)."""
        if config is not None:
            load_rosbags()
            _check_directory(config.directory)
        self._config = config

    @property
    def journal(self) -> Journal:
        """The running episode's journal: its recorder, or nobody."""
        return self._current if self._current is not None else UNRECORDED

    def start(self, model: str) -> Journal:
        """A new episode's journal: a new recorder (the bag named by the time and
        ``model``) while recording is on, else nobody. Never raises."""
        self._finished()
        self.end()  # a recorder left open (an episode that never started) is closed
        config = self._config
        if config is None:
            return UNRECORDED
        try:
            recorder = FlightRecorder(config, model=model, warn=self._warn)
        except Exception as exc:  # a recorder must never keep an episode from running
            self._warn(f"recording: none for this episode ({type(exc).__name__}: {exc})")
            return UNRECORDED
        self._previous, self._current, self._last = self._last, recorder, recorder
        return recorder

    def engine(
        self,
        policy: Policy,
        settings: EngineConfig,
        *,
        validate_chunk: Callable[[ActionChunk, Observation], Any] | None = None,
    ) -> PlaybackEngine:
        """A new episode's engine with its journal (``start``) and chunk gate; the core
        ``Episode`` gets the same journal (``engine.journal``). An engine that cannot be
        made leaves no recorder."""
        journal = self.start(policy.model)
        try:
            return PlaybackEngine(policy, settings, journal=journal, validate_chunk=validate_chunk)
        except BaseException:
            self.end()  # it recorded nothing, so it leaves no bag
            self._last = self._previous
            raise

    def stamped(self, outcome: RunOutcome) -> RunOutcome:
        """``outcome`` with the running episode's bag and what it dropped so far, as
        ``Policy.run(record=)`` gives them; as it is when nothing records."""
        recorder = self._current
        if recorder is None:
            return outcome
        return replace(outcome, recording=str(recorder.path), recording_dropped=recorder.dropped)

    def hold(self, reason: str) -> None:
        """A hold the node sent outside the core ``Episode`` (which journals its own)."""
        self.journal.hold(reason)

    def end(self) -> None:
        """The running episode ended: its recorder finishes the bag on its own thread."""
        recorder, self._current = self._current, None
        if recorder is not None:
            recorder.close(wait_s=None)
            self._finishing.append(recorder)

    def close(self, wait_s: float = CLOSE_WAIT_S) -> bool:
        """Undo ``configure``: end the running episode's recording and wait, ``wait_s`` in
        all, for every bag still being finished; True if all are complete (each one that is
        not is warned of). Nothing is recorded until ``configure`` again."""
        self._config = None
        self.end()
        deadline = time.monotonic() + wait_s
        complete = True
        for recorder in self._finishing:
            if not recorder.close(wait_s=max(0.0, deadline - time.monotonic())):
                complete = False
                self._warn(
                    f"recording {recorder.path}: not finished within {wait_s:g} s; "
                    "the bag may lack its metadata"
                )
        self._finishing = []
        return complete

    def _finished(self) -> None:
        """Forget the recorders whose bags are complete (a look, no wait)."""
        self._finishing = [r for r in self._finishing if not r.close(wait_s=0.0)]

    def status(self) -> RecordingStatus | None:
        """The running or last episode's recording, for diagnostics: the bag's path, the
        messages it dropped so far, and why recording stopped early if it did."""
        last = self._last
        if last is None:
            return None
        return RecordingStatus(str(last.path), last.dropped, last.stopped)


def _check_directory(directory: str | os.PathLike[str]) -> None:
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ParameterError(
            "record_dir", f"cannot make {str(path)!r}: {exc.strerror or exc}"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ParameterError("record_dir", f"{str(path)!r} is not writable")
