"""The flight recorder: one episode into one bag, off the control thread.

``FlightRecorder`` is a ``playback.journal.Journal``: the engine, the episode and the driver
tell it what happens, on the control thread, where each call only appends a tuple to a
queue (its cost: docs/performance.md, "Figures the code relies on"). A writer thread turns
the records into messages and writes them (``writer``).
Nothing here may stop an arm or hold up a tick: when the queue is full, the bag over its
cap, the path unwritable or the disk full, records are dropped and counted, one warning
says why, and the episode goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..playback.journal import EventValues
from ..playback.outcome import RunOutcome
from ..redaction import LOG_REDACTION
from ..types import FloatArray, Observation, Prediction
from .bag import bag_name, load_rosbags
from .config import RecordConfig
from .writer import Record, RecordWriter

log = logging.getLogger(__name__)

#: How often the writer thread looks for records: 20 wake-ups a second cost nothing, and a
#: record waits at most this long.
POLL_S = 0.05
#: How long ``close`` waits for the writer by default (``run()`` returns a finished bag).
DEFAULT_CLOSE_WAIT_S = 10.0
#: The writer lets the control thread have the interpreter after this long: a record can
#: take longer than a tick may wait, and a waiting thread otherwise gets the interpreter
#: only after the switch interval (``sys.getswitchinterval()``).
SLICE_S = 0.0002


class FlightRecorder:
    """Records one episode into a new bag in ``config.directory``, named by the time it
    starts and ``model``. ``ConfigurationError`` here, before anything starts, if rosbags is
    missing.

    ``secrets``: texts never written (default: the keys of every open connection). ``warn``
    reports why recording stopped (default: a logged warning). ``views``: the camera views
    expected, whose topics are made before the episode (a view seen later gets its topic
    then, on the writer thread, which making one holds up).
    """

    def __init__(
        self,
        config: RecordConfig,
        *,
        model: str,
        clock: Callable[[], float] = time.monotonic,
        secrets: Sequence[str] | None = None,
        warn: Callable[[str], None] | None = None,
        views: Sequence[str] = (),
    ) -> None:
        rosbags = load_rosbags()
        self.config = config
        self._clock = clock
        wall = time.time()
        self.path = Path(config.directory) / bag_name(model, wall)
        offset_ns = round(wall * 1e9) - round(clock() * 1e9)
        self._queue: deque[Record] = deque()
        self._queue_dropped = 0
        self._images_due: dict[str, float] = {}
        self._image_period = 1.0 / self.config.image_hz if self.config.image_hz > 0 else None
        self._closing = threading.Event()
        keys = list(LOG_REDACTION.secrets if secrets is None else secrets)
        self._writer = RecordWriter(
            self.path, rosbags, self.config, offset_ns, keys, warn or log.warning
        )
        self._writer.open(views)
        self._thread = threading.Thread(
            target=self._write_all, name="sequence-ai-recorder", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ the journal

    def request(self, now: float, number: int, observation: Observation) -> None:
        self._put(("request", now, number, *_joints(observation), observation))
        self._images(now, observation)

    def observed(self, now: float, observation: Observation) -> None:
        self._put(("observed", now, *_joints(observation), *_arm(observation)))
        self._images(now, observation)

    def operator(self, now: float, values: FloatArray, source: str) -> None:
        # copied: the device's buffer may be reused; flat, as a Float64MultiArray's data is
        self._put(("operator", now, np.array(values, dtype=np.float64).reshape(-1), source))

    def chunk(
        self, now: float, number: int, seq: int, prediction: Prediction, observed_at: float,
        anchor: float, period_s: float, grippers: tuple[int, ...],
    ) -> None:  # fmt: skip
        record = ("chunk", now, number, seq, prediction, observed_at, anchor, period_s, grippers)
        self._put(record)

    def started(self, now: float, seq: int, anchor: float, step: int) -> None:
        self._put(("event", now, "started", {"seq": seq, "step": step, "anchor_s": anchor}))

    def event(self, now: float, name: str, values: EventValues) -> None:
        self._put(("event", now, name, values))

    def command(self, now: float, action: FloatArray) -> None:
        # the plan's rows are read-only; a blended command is a new array the caller could
        # change after act() returns, so it is copied
        self._put(("command", now, action.copy() if action.flags.writeable else action))

    def hold(self, reason: str) -> None:
        self._put(("hold", self._clock(), reason))

    def outcome(self, outcome: RunOutcome) -> None:
        self._queue.append(("outcome", self._clock(), outcome))  # past every limit

    # ------------------------------------------------------------------ counts and closing

    @property
    def dropped(self) -> int:
        """Records not written: the queue was full, the bag over its cap, or a write failed."""
        return self._queue_dropped + self._writer.dropped

    @property
    def written(self) -> int:
        return self._writer.written

    @property
    def stopped(self) -> str:
        """Why recording stopped before the episode ended; empty if it did not."""
        return self._writer.stopped

    def close(self, wait_s: float | None = DEFAULT_CLOSE_WAIT_S) -> bool:
        """Write what is queued, the recorder's counts and the bag's metadata. Waits up to
        ``wait_s`` (None: returns at once, the writer finishes on its own); True once the
        bag is complete. Idempotent."""
        self._closing.set()
        if wait_s is not None:
            self._thread.join(wait_s)
        return not self._thread.is_alive()

    def _images(self, now: float, observation: Observation) -> None:
        """Each view's frame when its turn under ``image_hz`` has come (encoded, if raw, on
        the writer)."""
        if self._image_period is None:
            return
        for frame in observation.images:
            if now >= self._images_due.get(frame.view, -np.inf):
                self._images_due[frame.view] = now + self._image_period
                self._put(("image", now, frame))

    def _put(self, record: Record) -> None:
        if self._writer.failed or len(self._queue) >= self.config.queue_limit:
            self._queue_dropped += 1
            return
        self._queue.append(record)

    def _write_all(self) -> None:
        writer, queue, clock = self._writer, self._queue, time.perf_counter
        while True:
            closing = self._closing.wait(POLL_S)
            since = clock()
            while queue:
                writer.write(queue.popleft())
                if clock() - since > SLICE_S:
                    time.sleep(0)  # releases the interpreter to a thread waiting for it
                    since = clock()
            if closing:
                break
        writer.finish(self._queue_dropped)


def _joints(observation: Observation) -> tuple[FloatArray, FloatArray]:
    """The joint positions and velocities (empty when none), copied off the caller's lists."""
    joints = observation.proprioception
    velocities = joints.joint_velocities
    return (
        np.array(joints.joint_positions, dtype=np.float64),
        np.array(velocities if velocities is not None else (), dtype=np.float64),
    )


def _arm(observation: Observation) -> tuple[float | None, FloatArray | None]:
    """The gripper reading and the end-effector pose, each None when it had none, as the
    joints are: numbers here, the pose copied off the caller's list."""
    proprio = observation.proprioception
    gripper, pose = proprio.gripper, proprio.end_effector_pose
    return (
        None if gripper is None else float(gripper),
        None if pose is None else np.array(pose, dtype=np.float64).reshape(-1),
    )
