"""A CPU quota for one process: a child cgroup with its own CFS bandwidth limit.

cgroup v2 where its ``cpu`` controller is enabled (``cpu.max``), else the v1 ``cpu``
hierarchy (``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``), which is what a hybrid mount
(Ubuntu 20.04/22.04 containers, JetPack) offers. Needs write access to the hierarchy (root).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

PERIOD_US = 100_000  # the kernel's default CFS period


@dataclass(frozen=True)
class Quota:
    path: Path
    kind: str  # "cgroup v2 cpu.max" | "cgroup v1 cpu.cfs_quota_us"

    def enter(self) -> None:
        """Move the calling process here (a ``preexec_fn``: before exec, so every thread)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def throttled(self) -> int:
        """CFS periods in which the group ran out of quota, so far."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "nr_throttled":
                return int(value)
        return 0

    def remove(self) -> None:
        with contextlib.suppress(OSError):  # a process still in it: the group is harmless
            self.path.rmdir()


def _mounts() -> list[tuple[str, str, set[str]]]:
    found = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, where, fstype, options, *_ = line.split()
        found.append((where, fstype, set(options.split(","))))
    return found


def create(name: str, cores: float) -> Quota:
    """A group limited to ``cores`` of one core; OSError when neither hierarchy allows it."""
    quota_us = round(cores * PERIOD_US)
    problems = []
    for where, fstype, options in _mounts():
        root = Path(where)
        try:
            if fstype == "cgroup2" and "cpu" in (root / "cgroup.controllers").read_text().split():
                group = root / name
                group.mkdir(exist_ok=True)
                (group / "cpu.max").write_text(f"{quota_us} {PERIOD_US}")
                return Quota(group, "cgroup v2 cpu.max")
            if fstype == "cgroup" and "cpu" in options:
                group = root / name
                group.mkdir(exist_ok=True)
                (group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (group / "cpu.cfs_quota_us").write_text(str(quota_us))
                return Quota(group, "cgroup v1 cpu.cfs_quota_us")
        except OSError as exc:
            problems.append(f"{where}: {exc}")
    raise OSError("no writable cgroup cpu controller: " + ("; ".join(problems) or "none mounted"))
