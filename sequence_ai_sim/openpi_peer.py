"""openpi's real ``WebsocketPolicyServer`` (PyPI ``openpi-server``) serving a policy of ours.

The policy answers a smooth, deterministic reference trajectory in time: step ``i`` of an
answer is the reference at ``t_obs + i / hz``, with ``t_obs`` the observation's wall-clock
time when the profile sends one (``timestamp_key``), else the time the request is read. So
a client that plays each chunk from its observation's time continues the reference across
seams, and one that plays stale steps shows it as a seam jump. ``infer`` sleeps for the
configured latency inside the server's event loop, as a GPU-bound openpi policy blocks it:
requests on several connections queue behind each other.

Used by ``bench/openpi.py`` and the tests; ``python -m sequence_ai_sim.openpi_peer --port N``
runs it as a process (the ROS tier starts it so). It needs ``openpi-server``, which is not a
dependency of this package: it is imported when a server starts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import numpy as np

#: Seconds the reference trajectory repeats over (keeps float time small and exact enough).
PERIOD_S = 1000.0
AMPLITUDE = 0.3
FREQUENCY_HZ = 0.25


def reference(times: np.ndarray[Any, Any], dim: int) -> np.ndarray[Any, Any]:
    """(len(times), dim): a smooth sinusoid per dimension, phases apart."""
    t = np.mod(times, PERIOD_S)[:, None]
    phases = np.arange(dim)[None, :] * 0.7
    values: np.ndarray[Any, Any] = AMPLITUDE * np.sin(2 * np.pi * FREQUENCY_HZ * t + phases)
    return values


def lookup(obs: Mapping[str, Any], key: tuple[str, ...]) -> Any:
    node: Any = obs
    for part in key:
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


class TrajectoryPolicy:
    """An openpi ``BasePolicy`` (``infer``/``reset``) answering the reference trajectory."""

    def __init__(
        self,
        *,
        action_dim: int,
        control_hz: float,
        horizon: int = 10,
        latency_s: float = 0.0,
        timestamp_key: tuple[str, ...] | None = ("observation/timestamp",),
    ) -> None:
        self.action_dim = action_dim
        self.control_hz = control_hz
        self.horizon = horizon
        self.latency_s = latency_s
        self.timestamp_key = timestamp_key
        self.lock = threading.Lock()
        #: Every observation received (as decoded by openpi's own msgpack_numpy).
        self.received: list[dict[str, Any]] = []
        #: Call numbers (1-based) at which ``infer`` raises; answers to override per call.
        self.raise_on: set[int] = set()
        self.answers: dict[int, Callable[[], dict[str, Any]]] = {}
        #: (start, end) monotonic times of each infer.
        self.spans: list[tuple[float, float]] = []

    @property
    def calls(self) -> int:
        with self.lock:
            return len(self.received)

    def infer(self, obs: dict[str, Any]) -> dict[str, Any]:
        started = time.monotonic()
        arrived = time.time()
        with self.lock:
            self.received.append(obs)
            call = len(self.received)
        if self.latency_s:
            time.sleep(self.latency_s)
        if call in self.raise_on:
            raise RuntimeError(f"policy failed on call {call}")
        if call in self.answers:
            answer = self.answers[call]()
        else:
            stamp = lookup(obs, self.timestamp_key) if self.timestamp_key else None
            t_obs = float(stamp) if stamp is not None else arrived
            answer = {"actions": self.actions(obs, t_obs, call).astype(np.float32)}
        with self.lock:
            self.spans.append((started, time.monotonic()))
        return answer

    def actions(self, obs: Mapping[str, Any], t_obs: float, call: int) -> np.ndarray[Any, Any]:
        """(horizon, dim): the reference from the observation's time on (``call`` is the
        1-based number of this request, for a policy whose answers vary per chunk)."""
        return reference(t_obs + np.arange(self.horizon) / self.control_hz, self.action_dim)

    def reset(self) -> None:
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PeerServer:
    """``WebsocketPolicyServer`` on loopback in a thread of its own; ``stop()`` ends it (its
    connections are closed with code 1001, going away)."""

    def __init__(
        self, policy: Any, *, port: int | None = None, metadata: dict[str, Any] | None = None
    ) -> None:
        from openpi_server import WebsocketPolicyServer

        self.policy = policy
        self.port = port or free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self._server = WebsocketPolicyServer(
            policy, host="127.0.0.1", port=self.port, metadata=metadata
        )
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._serve, name="openpi-peer", daemon=True)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._task = self._loop.create_task(self._server.run())
        with contextlib.suppress(asyncio.CancelledError, Exception):
            self._loop.run_until_complete(self._task)
        leftover = asyncio.all_tasks(self._loop)  # the connections' handlers, cancelled by stop
        with contextlib.suppress(Exception):
            self._loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
        self._loop.close()

    def _cancel_all(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            task.cancel()

    def start(self) -> PeerServer:
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=0.5).is_success:
                    return self
            time.sleep(0.02)
        raise RuntimeError(f"openpi server did not listen on port {self.port}")

    def stop(self) -> None:
        """End the server as its process exiting would: every task on its loop is cancelled,
        the connections' handlers with the listener. Cancelling the listener alone left live
        connections served on Python 3.12, whose ``Server.wait_closed`` waits for them."""
        if self._task is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._cancel_all)
        self._thread.join(timeout=10.0)

    def __enter__(self) -> PeerServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def serving(policy: Any, **kwargs: Any) -> Iterator[PeerServer]:
    with PeerServer(policy, **kwargs) as server:
        yield server


def peer_parser(description: str | None) -> argparse.ArgumentParser:
    """The command line of a peer server: where it listens and the chunks it answers."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--dim", type=int, default=8)
    parser.add_argument("--hz", type=float, default=15.0)
    parser.add_argument("--horizon", type=int, default=10)
    return parser


def main() -> None:
    args = peer_parser(__doc__).parse_args()
    policy = TrajectoryPolicy(
        action_dim=args.dim, control_hz=args.hz, horizon=args.horizon, latency_s=args.latency
    )
    from openpi_server import WebsocketPolicyServer

    print(f"openpi policy server on ws://127.0.0.1:{args.port}", flush=True)
    WebsocketPolicyServer(policy, host="127.0.0.1", port=args.port).serve_forever()


if __name__ == "__main__":
    main()
