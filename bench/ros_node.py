"""The node on real rclpy (Jazzy wheels, Fast DDS): e-stop to hold, action rate and jitter, CPU.

The policy node and the simulated arm run as their own processes, as shipped; the gateway
simulator and a probe node (e-stop publisher, action subscriber) run here. Measured:
- e-stop publish -> the hold (zero velocities) received back on ``action``, for a latched
  (reliable + transient local) and a default-QoS publisher, side by side;
- the action topic's rate and period (p50/p99/max) and |period - nominal| at 15, 30 and
  50 Hz (``control_hz``), as the probe receives it, so DDS delivery is included;
- the node process's CPU time (utime + stime from /proc) per published action.

Needs real rclpy: run with ``make bench-ros``; ``python -m bench --full`` in the plain venv
hands this one to ``.venv-jazzy`` when it exists. Quick mode there leaves it to ``make
bench-ros``: its three node bring-ups and runs take about 36 s, a fifth of the quick run's.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._common import BENCH_KEY, machine_note, ms, quantile, ratio, table

ROOT = Path(__file__).resolve().parents[1]
ROS_PYTHON = ROOT / ".venv-jazzy" / "bin" / "python"
JOINTS = [f"joint_{i + 1}" for i in range(7)]
RATES = (15.0, 30.0, 50.0)
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
ESTOP_HEADERS = ["e-stop publisher", "trials", "p50 ms", "p95 ms", "max ms", "p50 ratio"]
RATE_HEADERS = [
    "control_hz", "rate Hz", "rate/nominal", "period p50 ms", "period p99 ms", "period max ms",
    "jitter p99 ms", "node CPU ms/action", "CPU share",
]  # fmt: skip


def _wait(condition: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.002)
    raise TimeoutError(f"timed out waiting for {condition}")


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime + stime


class _Rig:
    """Gateway simulator, arm and node processes, and a probe spun on a thread."""

    def __init__(self, control_hz: float) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import Float64MultiArray

        from sequence_ai_sim import GatewaySimulator

        self.namespace = f"/bench{os.getpid()}_{int(control_hz)}"
        self.sim = GatewaySimulator(api_key=BENCH_KEY, latency_s=0.05).start()
        params = {
            "base_url": f"'{self.sim.url}'",
            "joint_names": "[" + ", ".join(JOINTS) + "]",
            "gripper_joint": "gripper",
            "gripper_dims": "1",
            "gripper_topic": "gripper_command",
            "max_actions": "100000",
            "control_hz": repr(control_hz),
        }
        env = {**os.environ, "SEQUENCES_API_KEY": BENCH_KEY}
        base = [sys.executable, "-m"]
        ns = ["--ros-args", "-r", f"__ns:={self.namespace}"]
        node_args = [a for k, v in params.items() for a in ("-p", f"{k}:={v}")]
        self.node = subprocess.Popen(
            [*base, "sequence_ai_ros.policy_node", *ns, *node_args],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.arm = subprocess.Popen(
            [*base, "sequence_ai_ros.sim_arm_node", *ns, "-p", "camera_hz:=0.0",
             "-r", "command:=action"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.probe = rclpy.create_node(
            "bench_probe", namespace=self.namespace, context=self.context
        )
        self.lock = threading.Lock()
        self.actions: list[tuple[float, bool]] = []  # (arrival, all arm values zero)
        self.probe.create_subscription(Float64MultiArray, "action", self._on_action, 100)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.probe)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._estop: dict[bool, Any] = {}

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.01)

    def _on_action(self, msg: Any) -> None:
        with self.lock:
            self.actions.append((time.monotonic(), not any(msg.data)))

    def count(self) -> int:
        with self.lock:
            return len(self.actions)

    def call(self, srv_type: Any, name: str, request: Any) -> Any:
        client = self.probe.create_client(srv_type, name)
        try:
            if not client.wait_for_service(timeout_sec=60.0):
                raise TimeoutError(f"{name} not up")
            future = client.call_async(request)
            _wait(future.done)
            return future.result()
        finally:
            self.probe.destroy_client(client)

    def bring_up(self) -> None:
        from lifecycle_msgs.msg import Transition
        from lifecycle_msgs.srv import ChangeState

        for transition in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
            request = ChangeState.Request(transition=Transition(id=transition))
            assert self.call(ChangeState, "sequence_ai/change_state", request).success

    def trigger(self, service: str) -> Any:
        from std_srvs.srv import Trigger

        return self.call(Trigger, f"sequence_ai/{service}", Trigger.Request())

    def estop_publisher(self, latched: bool) -> Any:
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool

        if latched not in self._estop:
            qos: Any = 10
            if latched:
                qos = QoSProfile(
                    depth=1,
                    reliability=ReliabilityPolicy.RELIABLE,
                    durability=DurabilityPolicy.TRANSIENT_LOCAL,
                )
            publisher = self.probe.create_publisher(Bool, "estop", qos)
            _wait(lambda: publisher.get_subscription_count() >= 1)
            self._estop[latched] = publisher
        return self._estop[latched]

    def close(self) -> None:
        import rclpy

        for process in (self.node, self.arm):
            process.send_signal(signal.SIGINT)
        for process in (self.node, self.arm):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        self._stop.set()
        self._thread.join(timeout=5)
        self.executor.shutdown(timeout_sec=1)
        self.probe.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self.sim.stop()


def _estop_latency(rig: _Rig, latched: bool, trials: int) -> list[float]:
    from std_msgs.msg import Bool

    publisher = rig.estop_publisher(latched)
    latencies = []
    for _ in range(trials):
        assert rig.trigger("start_episode").success
        start = rig.count()
        _wait(lambda start=start: rig.count() >= start + 5)  # moving
        before = rig.count()
        sent = time.monotonic()
        publisher.publish(Bool(data=True))
        _wait(lambda before=before: any(zero for _, zero in rig.actions[before:]))
        with rig.lock:
            arrival = next(t for t, zero in rig.actions[before:] if zero)
        latencies.append(arrival - sent)
        publisher.publish(Bool(data=False))
        time.sleep(0.3)  # release delivered before the next start
    return latencies


def _rate(rig: _Rig, hz: float, actions: int) -> dict[str, float]:
    start = rig.count()
    cpu_before = _cpu_s(rig.node.pid)
    assert rig.trigger("start_episode").success
    _wait(lambda: rig.count() >= start + actions + 10, timeout_s=actions / hz * 3 + 30)
    cpu = _cpu_s(rig.node.pid) - cpu_before
    done = rig.count() - start
    assert rig.trigger("stop").success
    with rig.lock:
        times = [t for t, _ in rig.actions[start + 10 : start + 10 + actions]]
    periods = [b - a for a, b in itertools.pairwise(times)]
    jitter = [abs(p - 1.0 / hz) for p in periods]
    return {
        "rate": (len(times) - 1) / (times[-1] - times[0]),
        "p50": quantile(periods, 0.5),
        "p99": quantile(periods, 0.99),
        "max": max(periods),
        "jitter_p99": quantile(jitter, 0.99),
        "cpu_per_tick": cpu / done,
    }


def measure(full: bool) -> str:
    trials = 20 if full else 6
    seconds = 20.0 if full else 6.0
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random().randint(101, 200)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    estop: dict[str, list[float]] = {}
    rates: dict[float, dict[str, float]] = {}
    for hz in RATES:
        rig = _Rig(hz)
        try:
            rig.bring_up()
            if hz == RATES[0]:
                estop["transient local (latched)"] = _estop_latency(rig, True, trials)
                estop["default QoS (volatile)"] = _estop_latency(rig, False, trials)
            rates[hz] = _rate(rig, hz, int(seconds * hz))
        finally:
            rig.close()
    base = quantile(next(iter(estop.values())), 0.5)
    estop_rows = [
        [kind, len(v), ms(quantile(v, 0.5)), ms(quantile(v, 0.95)), ms(max(v)),
         ratio(quantile(v, 0.5), base)]
        for kind, v in estop.items()
    ]  # fmt: skip
    rate_rows = [
        [f"{hz:g}", f"{r['rate']:.2f}", ratio(r["rate"], hz), ms(r["p50"]), ms(r["p99"]),
         ms(r["max"]), ms(r["jitter_p99"]), ms(r["cpu_per_tick"], 2),
         f"{100 * r['cpu_per_tick'] * hz:.1f} %"]
        for hz, r in rates.items()
    ]  # fmt: skip
    return "\n\n".join(
        [
            "### E-stop publish to hold received",
            table(ESTOP_HEADERS, estop_rows),
            "### Action topic at the probe, and node CPU",
            table(RATE_HEADERS, rate_rows),
            machine_note(
                full=full, sizes=f"{trials} e-stop trials per publisher, {seconds:g} s per rate"
            ),
        ]
    )


def run(full: bool) -> str:
    try:
        import rclpy  # noqa: F401
    except ImportError:
        if not ROS_PYTHON.exists():
            return "_ros_node: needs real rclpy; `make bench-ros` builds .venv-jazzy and runs it._"
        if not full:
            return "_ros_node: needs real rclpy; quick, it runs in `make bench-ros` (.venv-jazzy)._"
        args = [str(ROS_PYTHON), "-m", "bench.ros_node", *(["--full"] if full else [])]
        done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=True)
        return done.stdout
    return measure(full)


if __name__ == "__main__":
    print(measure("--full" in sys.argv))
