"""Shared fixtures: a real gateway simulator on loopback and an isolated credential environment."""

from __future__ import annotations

import gc
import importlib.metadata
import importlib.util
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import TEST_KEY

from sequence_ai_sim import GatewaySimulator

# A shell's background job (`make test &`, some CI runners) starts with SIGINT ignored, and
# every program a test starts would inherit that: Ctrl-C and SIGINT tests then wait forever
# on a program that never sees the signal. A handler is not inherited across exec; the
# default is, which is what a terminal gives.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _real_rclpy() -> bool:
    spec = importlib.util.find_spec("rclpy")
    origin = Path(spec.origin) if spec is not None and spec.origin else None
    return origin is not None and any(origin.parent.glob("_rclpy_pybind11*"))


# The real-ROS tier runs where rclpy does (`make pytest-ros`, colcon in a ROS container); in
# the plain venv it is not collected at all rather than reported as skipped.
collect_ignore_glob = []
if not _real_rclpy() and os.environ.get("SEQUENCE_AI_REAL_ROS") != "required":
    collect_ignore_glob.append("ros/test_ros_real_*.py")
if importlib.util.find_spec("launch_testing") is None:  # no wheel: ROS containers only
    collect_ignore_glob.append("ros/test_ros_launch.py")
# colcon is installed in the floor venvs (make floor-humble, pytest-ros), where it must run.
if not (Path(sys.executable).parent / "colcon").exists() and not os.environ.get(
    "SEQUENCE_AI_FLOOR"
):
    collect_ignore_glob.append("ros/test_colcon_build.py")


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No key or base URL from the developer's environment; credentials live under tmp_path."""
    for name in ("SEQUENCES_API_KEY", "SEQUENCES_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    return config


@pytest.fixture
def sim(clean_env: Path) -> Iterator[GatewaySimulator]:
    """A fast simulator (20 ms model latency) that requires TEST_KEY."""
    with GatewaySimulator(api_key=TEST_KEY, latency_s=0.02) as server:
        yield server


def pytest_collection_finish(session: pytest.Session) -> None:
    """The collected tree lives until the run ends: move it out of the garbage collector's
    sight. Otherwise every full collection scans all of it, a pause long enough on the Humble
    floor for a timing test to see an underrun that is the test runner's, not the engine's."""
    gc.collect()
    gc.freeze()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say at which versions a floor tier ran, and how much of the real-ROS tier ran, on
    what (the summary line alone cannot)."""
    floor = os.environ.get("SEQUENCE_AI_FLOOR")
    if floor:
        import sequence_ai_core

        names = ("numpy", "Pillow", "setuptools", "httpx", "httpcore", "websockets")
        versions = ", ".join(f"{n} {_version_of(n)}" for n in names)
        terminalreporter.write_line(
            f"floor tier {floor}: Python {sys.version.split()[0]}, {versions}; "
            f"sequence_ai_core from {Path(sequence_ai_core.__file__).parent}"
        )
    ran = [
        r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])
        if "test_ros_real_" in r.nodeid and r.when == "call"
    ]  # fmt: skip
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "test_ros_real_" in r.nodeid]
    if not ran and not skipped:
        return
    import rclpy.utilities

    dists = [d for d in ("ros-jazzy-rclpy", "ros-rclpy", "rclpy") if _has_dist(d)]
    version = importlib.metadata.version(dists[0]) if dists else "from a ROS install"
    rmw = rclpy.utilities.get_rmw_implementation_identifier()
    terminalreporter.write_line(
        f"real-ROS tier: {len(ran)} tests ran, {len(skipped)} skipped, on rclpy {version} "
        f"({rmw}, ROS_DOMAIN_ID={os.environ.get('ROS_DOMAIN_ID') or 'random per worker'})"
    )


def _version_of(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _has_dist(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
