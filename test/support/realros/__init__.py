"""The real-ROS tier: the nodes as shipped, on real rclpy, each in its own process.

``make pytest-ros`` runs it in ``.venv-jazzy`` (ROS 2 Jazzy from PyPI wheels, Fast DDS); a
``ros:humble`` or ``ros:jazzy`` container runs it under ``colcon test``. DDS stays on this
machine (``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` from Jazzy on, ``ROS_LOCALHOST_ONLY=1`` on
Humble) on a random ``ROS_DOMAIN_ID`` per run, and every test runs in its own namespace, so
parallel runs and earlier tests' latched messages never meet.

The gateway simulator runs in the test process (a real HTTP server on loopback); the policy
node and the simulated arm are subprocesses started with ``python -m``; the test talks to them
through :class:`Probe`, an rclpy node spun on a background thread. Every wait is bounded.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REQUIRED = os.environ.get("SEQUENCE_AI_REAL_ROS") == "required"
JOINTS = [f"joint_{i + 1}" for i in range(7)]
VIEWS = ["exterior_1", "wrist_left"]
WAIT_S = 15.0  # hang guard for any one wait; a healthy wait takes well under a second
START_S = 30.0  # a process's start (imports + discovery) on a loaded 2-core machine

# Read before rclpy is imported anywhere in this process (the probe), and inherited by
# every node process.
os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random().randint(1, 100)))
if os.environ.get("ROS_DISTRO") == "humble":
    os.environ["ROS_LOCALHOST_ONLY"] = "1"
else:
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.pop("ROS_LOCALHOST_ONLY", None)  # Jazzy warns when both are set


def real_rclpy_importable() -> bool:
    spec = importlib.util.find_spec("rclpy")
    return (
        spec is not None
        and spec.origin is not None
        and any(Path(spec.origin).parent.glob("_rclpy_pybind11*"))
    )


if not real_rclpy_importable():
    if REQUIRED:
        raise ImportError("the real-ROS tier needs rclpy (SEQUENCE_AI_REAL_ROS=required)")
    pytest.skip(
        "real rclpy not installed (make pytest-ros builds .venv-jazzy)", allow_module_level=True
    )

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402


def wait_for(condition: Callable[[], Any], timeout_s: float = WAIT_S, what: str = "") -> Any:
    """Poll until ``condition()`` is truthy; its value, or an AssertionError after the bound."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what or condition}")
        time.sleep(0.01)


def _yaml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


class RosProcess:
    """``python -m <module> --ros-args ...`` (or ``command --ros-args ...``) with output
    captured to a file."""

    def __init__(
        self,
        module: str,
        log: Path,
        *,
        namespace: str,
        params: Mapping[str, Any] | None = None,
        remaps: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        raw_args: list[str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        args = command or [sys.executable, "-m", module]
        args = [*args, "--ros-args", "-r", f"__ns:={namespace}"]
        for name, value in (params or {}).items():
            if value is not None:
                args += ["-p", f"{name}:={_yaml(value)}"]
        for old, new in (remaps or {}).items():
            args += ["-r", f"{old}:={new}"]
        args += raw_args or []
        self.log = log
        self._log_file = log.open("wb")
        self.popen = subprocess.Popen(
            args,
            env={**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"},
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def signal(self, sig: int) -> None:
        self.popen.send_signal(sig)

    def wait(self, timeout_s: float = WAIT_S) -> int:
        return self.popen.wait(timeout=timeout_s)

    def stop(self) -> None:
        """SIGINT, then SIGKILL if it does not exit within the bound."""
        if self.alive:
            self.popen.send_signal(signal.SIGINT)
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=10)
        self._log_file.close()


@dataclass
class Recording:
    """Messages received on one topic, with their arrival time (time.monotonic())."""

    topic: str
    messages: list[Any] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, msg: Any) -> None:
        with self.lock:
            self.messages.append(msg)
            self.times.append(time.monotonic())

    def __len__(self) -> int:
        return len(self.messages)

    def snapshot(self) -> list[Any]:
        with self.lock:
            return list(self.messages)

    def since(self, index: int) -> list[Any]:
        return self.snapshot()[index:]

    def wait_count(self, count: int, timeout_s: float = WAIT_S) -> list[Any]:
        wait_for(lambda: len(self) >= count, timeout_s, f"{count} messages on {self.topic}")
        return self.snapshot()


class Probe:
    """The test's own rclpy node in the test's namespace, spun on a background thread."""

    def __init__(self, context: Any, namespace: str) -> None:
        self.namespace = namespace
        self.node = rclpy.create_node("probe", namespace=namespace, context=context)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.node)
        self._clients: dict[tuple[Any, str], Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, name="probe-spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.05)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.executor.shutdown(timeout_sec=1)
        self.node.destroy_node()

    def listen(self, msg_type: Any, topic: str, qos: Any = 50) -> Recording:
        recording = Recording(topic)
        self.node.create_subscription(msg_type, topic, recording, qos)
        return recording

    def publisher(self, msg_type: Any, topic: str, qos: Any = 10) -> Any:
        return self.node.create_publisher(msg_type, topic, qos)

    def call(
        self,
        srv_type: Any,
        name: str,
        request: Any = None,
        timeout_s: float = WAIT_S,
        *,
        idempotent: bool = False,
    ) -> Any:
        """Call a service and wait for the answer. One client per service, kept: Fast DDS
        drops a response ("failed to send response (timeout)") sent before the server has
        matched the client's response reader, which a fresh client risks on every call, so a
        new client also waits a moment after the service shows up. ``idempotent`` calls
        (queries) are sent again if unanswered."""
        key = (srv_type, name)
        client = self._clients.get(key)
        if client is None:
            client = self.node.create_client(srv_type, name)
            assert client.wait_for_service(timeout_sec=START_S), f"service {name} not up"
            time.sleep(0.3)
            self._clients[key] = client
        attempts = 3 if idempotent else 1
        for attempt in range(attempts):
            future = client.call_async(request if request is not None else srv_type.Request())
            try:
                wait_for(future.done, timeout_s / attempts, f"answer from {name}")
                return future.result()
            except AssertionError:
                client.remove_pending_request(future)
                if attempt == attempts - 1:
                    raise
        raise AssertionError("unreachable")

    def matched(self, publisher: Any, count: int = 1) -> None:
        wait_for(lambda: publisher.get_subscription_count() >= count, WAIT_S, "a subscriber")


@dataclass
class Tier:
    """What one test works with: its namespace, probe, log directory and processes."""

    context: Any
    namespace: str
    logs: Path
    probe: Probe
    processes: list[RosProcess] = field(default_factory=list)
    #: Called first on close: the test's own extra nodes.
    closers: list[Callable[[], None]] = field(default_factory=list)

    def start(self, module: str, name: str, **kwargs: Any) -> RosProcess:
        process = RosProcess(module, self.logs / f"{name}.log", namespace=self.namespace, **kwargs)
        self.processes.append(process)
        return process

    def close(self) -> None:
        for closer in self.closers:
            closer()
        self.probe.close()
        for process in reversed(self.processes):
            process.stop()
        for process in self.processes:  # pytest shows this only for a failed test
            print(f"----- {process.log.name} (exit {process.popen.returncode})")
            print(process.output()[-6000:])


_counter = iter(range(1, 1_000_000))


_context: list[Any] = []


def ros_context() -> Any:
    """One rclpy context for the test process, made on first use, shut down at exit."""
    if not _context:
        context = rclpy.Context()
        rclpy.init(context=context)
        atexit.register(rclpy.try_shutdown, context=context)
        _context.append(context)
    return _context[0]


@pytest.fixture
def tier(tmp_path: Path) -> Iterator[Tier]:
    namespace = f"/t{os.getpid()}_{next(_counter)}"
    context = ros_context()
    probe = Probe(context, namespace)
    tier = Tier(context, namespace, tmp_path, probe)
    try:
        yield tier
    finally:
        tier.close()


def domain_id() -> int:
    return int(os.environ["ROS_DOMAIN_ID"])
