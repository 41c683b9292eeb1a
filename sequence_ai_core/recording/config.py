"""What a flight recorder keeps, and its bounds: ``RecordConfig``."""

from __future__ import annotations

import math
from dataclasses import dataclass
from os import PathLike, fspath

#: Default image rate per camera view: enough to see what the arm saw, at a size a long
#: episode can keep (docs/recording.md, "Cost and size").
DEFAULT_IMAGE_HZ = 2.0
#: Default size cap of one bag: hours of an episode at the rate above.
DEFAULT_MAX_BYTES = 512 * 1024 * 1024
#: Messages waiting for the writer thread before new ones are dropped (and counted): at
#: 200 Hz, 20 s of commands.
DEFAULT_QUEUE_LIMIT = 4096


@dataclass(frozen=True)
class RecordConfig:
    """How episodes are recorded.

    - ``directory``: where each episode's bag is created (made if missing), named by the
      time the episode starts and the model.
    - ``image_hz``: camera images recorded per second and view, at most (0 records none;
      the joint reading of every request is always recorded).
    - ``image_max_side``: larger images are scaled down to it (pixels), off the control
      thread, and recorded as JPEG; None records them as sent.
    - ``max_bytes``, ``max_duration_s``: one bag's caps. Past either, the recorder stops
      recording and counts what it drops (the outcome and its counts are still written).
    - ``queue_limit``: records waiting for the writer before new ones are dropped.
    - ``joint_names``: the observation's joints, named in the bag (empty: unnamed).
    """

    directory: str | PathLike[str]
    image_hz: float = DEFAULT_IMAGE_HZ
    image_max_side: int | None = None
    max_bytes: int = DEFAULT_MAX_BYTES
    max_duration_s: float | None = None
    queue_limit: int = DEFAULT_QUEUE_LIMIT
    joint_names: tuple[str, ...] = ()

    @classmethod
    def of(cls, record: str | PathLike[str] | RecordConfig) -> RecordConfig:
        """``run(record=)``: a directory, or the whole config."""
        return record if isinstance(record, RecordConfig) else cls(record)

    def __post_init__(self) -> None:
        if not isinstance(self.directory, (str, PathLike)) or not fspath(self.directory):
            raise ValueError(f"record needs a directory, got {self.directory!r}")
        if not (math.isfinite(self.image_hz) and self.image_hz >= 0):
            raise ValueError(f"image_hz must be a finite number >= 0, got {self.image_hz!r}")
        side = self.image_max_side
        if side is not None and (isinstance(side, bool) or not isinstance(side, int) or side < 8):
            raise ValueError(f"image_max_side must be None or an int >= 8, got {side!r}")
        _positive_int("max_bytes", self.max_bytes)
        _positive_int("queue_limit", self.queue_limit)
        duration = self.max_duration_s
        if duration is not None and not (math.isfinite(duration) and duration > 0):
            raise ValueError(f"max_duration_s must be None or > 0, got {duration!r}")
        if not all(isinstance(name, str) for name in self.joint_names):
            raise ValueError("joint_names must be strings")


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
