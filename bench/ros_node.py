"""The policy node on real rclpy (Jazzy wheels, Fast DDS) against a bare rclpy node on the
same inputs: CPU, action rate and period jitter, under a CPU quota, and e-stop to hold.

Every node is its own process, as shipped, and so is the gateway simulator (lingbot-vla-v2-6b
at 0.3 s); a probe node (e-stop publisher, subscriber to both nodes' actions and to the
outcome) runs here. The inputs come from a feeder process (``bench/_ros_peers.py``):
``joint_states`` at 100 Hz and, with cameras, two 640x480 rgb8 images at 30 Hz. Fast DDS gets
a shared-memory segment larger than a frame (``fastdds_shm.xml``): with its default one a
frame goes over UDP in fragments, and on a loaded machine both nodes lost frames, which the
policy node rightly refuses as stale (``max_observation_age_s``). The bare node subscribes to
the same topics and publishes a 7-value ``Float64MultiArray`` from a timer. Both run at once
over the same window, so that they share the machine's load. Measured:
- each node's CPU share of one core (utime + stime from /proc, all threads), and per action;
- the action rate and |period - nominal| (p50, p99) as DDS delivered the commands (each
  message's reception stamp, taken by Fast DDS before the probe's executor runs: that executor
  serves both nodes' streams and would add its own delays to either), and the p99 of the
  instants each node published them (the writer's source stamp), at 15, 30 and 50 Hz
  (``control_hz``), with and without the cameras, over three episodes per row pair, their
  periods pooled (one window's p99 is its few slowest periods, which on a shared 2-core
  machine swing either node's figure by a factor of two between runs), and how far the p99
  ratio can be trusted (``_paired_bootstrap``: the spread of the ratio over the windows' 1 s
  blocks resampled, the two nodes' together);
- the same with each node in a cgroup limited to a quarter of one core (``_cpu_quota.py``),
  and the episode's duty and underruns from ``~/outcome``;
- e-stop publish -> the hold (zero velocities) received back on ``action``, for a latched
  (reliable + transient local) and a default-QoS publisher, at 30 Hz with the cameras.

Needs real rclpy: run with ``make bench-ros``; ``python -m bench --full`` in the plain venv
hands this one to ``.venv-jazzy`` when it exists. Quick mode there leaves it to ``make
bench-ros``. The quota rows need write access to a cgroup hierarchy (root).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import _cpu_quota, _paired_bootstrap, _ros_peers
from bench._common import BENCH_KEY, machine_note, ms, quantile, ratio, simulator_process, table

ROOT = Path(__file__).resolve().parents[1]
ROS_PYTHON = ROOT / ".venv-jazzy" / "bin" / "python"
SHM_PROFILE = Path(__file__).resolve().parent / "fastdds_shm.xml"
MODEL = "lingbot-vla-v2-6b"
LATENCY_S = 0.3
RATES = (15.0, 30.0, 50.0)
QUOTA_CORES = 0.25
#: Episodes measured per rig, each a window of its own; their periods are pooled.
WINDOWS = 3
#: The span of the blocks the jitter ratio's interval resamples (``_paired_bootstrap``).
BLOCK_S = 1.0
CLOCK_TICK = os.sysconf("SC_CLK_TCK")
ESTOP_HEADERS = ["e-stop publisher", "trials", "p50 ms", "p95 ms", "max ms", "p50 ratio"]
RATE_HEADERS = [
    "node", "control_hz", "cameras", "CPU share", "CPU ratio", "CPU ms/action", "rate Hz",
    "rate ratio", "jitter p50 ms", "jitter p99 ms", "jitter ratio", "ratio 90 % interval",
    "published p99 ms",
    "period max ms", "duty",
    "underruns",
]  # fmt: skip


def _wait(condition: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.002)
    raise TimeoutError(f"timed out waiting for {condition}")


def _python_path() -> str:
    """The built workspace (``.ros-ws``, with the generated messages) ahead of the sources,
    and this checkout after it for ``bench``: children start away from the checkout."""
    return os.pathsep.join([*os.environ.get("PYTHONPATH", "").split(os.pathsep), str(ROOT)])


def _installed_first() -> None:
    """``python -m bench`` puts the checkout first, whose ``sequence_ai_ros`` has no ``msg``:
    the built workspace's copy (symlinks to the same sources) goes ahead of it."""
    built = [p for p in sys.path if (Path(p or ".") / "sequence_ai_ros" / "msg").is_dir()]
    sys.path[:0] = built
    for name in [m for m in sys.modules if m.split(".")[0] == "sequence_ai_ros"]:
        del sys.modules[name]


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK  # utime + stime


class _Rig:
    """Gateway simulator, feeder, bare and policy node processes, and a probe on a thread."""

    def __init__(self, hz: float, cameras: bool, quota: float | None) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sequence_ai_ros.msg import RunOutcome
        from std_msgs.msg import Float64MultiArray

        self.hz = hz
        tag = f"{os.getpid()}_{int(hz)}_{int(cameras)}_{int(100 * (quota or 0))}"
        self.namespace = f"/bench{tag}"
        self.quotas = (
            [_cpu_quota.create(f"bench_{who}{tag}", quota) for who in ("bare", "node")]
            if quota
            else []
        )
        # In a process of its own: here its threads would hold the probe's interpreter
        # while they parse the policy node's requests, and delay the probe's reading of the
        # policy node's commands alone, by up to 2 ms at p99 with the cameras' images.
        self._sim = contextlib.ExitStack()
        url = self._sim.enter_context(simulator_process(latency_s=LATENCY_S))
        params = {
            "model": MODEL,
            "base_url": f"'{url}'",
            "joint_names": "[" + ", ".join(_ros_peers.JOINTS) + "]",
            "gripper_joint": _ros_peers.GRIPPER,
            "gripper_dims": "1",
            "max_actions": "1000000",
            "control_hz": repr(hz),
        }
        if cameras:
            views = _ros_peers.VIEWS
            params["camera_views"] = "[" + ", ".join(views) + "]"
            params["camera_topics"] = "[" + ", ".join(map(_ros_peers.camera_topic, views)) + "]"
        node_args = [a for k, v in params.items() for a in ("-p", f"{k}:={v}")]
        peers = [sys.executable, "-m", "bench._ros_peers"]
        with_cameras = ["--cameras"] if cameras else []
        self.feed = self._spawn([*peers, "feed", *with_cameras])
        self.bare = self._spawn([*peers, "bare", *with_cameras, "--hz", repr(hz)], 0)
        self.node = self._spawn([sys.executable, "-m", "sequence_ai_ros.policy_node"], 1, node_args)
        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.probe = rclpy.create_node(
            "bench_probe", namespace=self.namespace, context=self.context
        )
        self.lock = threading.Lock()
        #: Each action: (arrival here, monotonic; held; DDS's published and received stamps,
        #: ns on the system clock).
        self.actions: dict[str, list[tuple[float, bool, int, int]]] = {"node": [], "bare": []}
        for who, topic in (("node", "action"), ("bare", "bare_action")):
            take = lambda msg, info, who=who: self._on_action(who, msg, info)  # noqa: E731
            self.probe.create_subscription(Float64MultiArray, topic, take, 100)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        self.outcome: Any = None
        self.probe.create_subscription(
            RunOutcome, "sequence_ai/outcome", lambda m: setattr(self, "outcome", m), latched
        )
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.probe)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._estop: dict[bool, Any] = {}

    def _spawn(self, command: list[str], quota: int | None = None, args: Any = ()) -> Any:
        enter = self.quotas[quota].enter if quota is not None and self.quotas else None
        return subprocess.Popen(
            [*command, "--ros-args", "-r", f"__ns:={self.namespace}", *args],
            env={**os.environ, "SEQUENCES_API_KEY": BENCH_KEY, "PYTHONPATH": _python_path()},
            cwd=tempfile.gettempdir(), preexec_fn=enter,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def _spin(self) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=0.01)

    def _on_action(self, who: str, msg: Any, info: Any) -> None:
        with self.lock:
            held = not any(msg.data[: len(_ros_peers.JOINTS)])  # arm at rest
            stamps = info["source_timestamp"], info["received_timestamp"]
            self.actions[who].append((time.monotonic(), held, *stamps))

    def count(self, who: str = "node") -> int:
        with self.lock:
            return len(self.actions[who])

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
        _wait(lambda: self.count("bare") >= 10)  # the inputs flow

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

        for process in (self.node, self.bare, self.feed):
            process.send_signal(signal.SIGINT)
        for process in (self.node, self.bare, self.feed):
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        self._stop.set()
        self._thread.join(timeout=5)
        self.executor.shutdown(timeout_sec=1)
        self.probe.destroy_node()
        rclpy.try_shutdown(context=self.context)
        self._sim.close()
        for quota in self.quotas:
            quota.remove()


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
        _wait(lambda before=before: any(held for _, held, *_ in rig.actions["node"][before:]))
        with rig.lock:
            arrival = next(t for t, held, *_ in rig.actions["node"][before:] if held)
        latencies.append(arrival - sent)
        publisher.publish(Bool(data=False))
        time.sleep(0.3)  # release delivered before the next start
    return latencies


def _stream(
    periods: list[float], published: list[float], hz: float, cpu_s: float, window_s: float
) -> dict[str, float]:
    def off(of: list[float]) -> list[float]:
        return [abs(p - 1.0 / hz) for p in of]

    jitter = off(periods)
    return {
        "rate": len(periods) / sum(periods),
        "jitter_p50": quantile(jitter, 0.5),
        "jitter_p99": quantile(jitter, 0.99),
        "published_p99": quantile(off(published), 0.99),
        "max": max(periods),
        "share": cpu_s / window_s,
        "per_action": cpu_s / len(periods),
    }


def _window(rig: _Rig, seconds: float) -> dict[str, Any]:
    """Both nodes over the same window of a playing episode (after its first 10 actions):
    the periods as delivered and as published, CPU seconds, and the episode's outcome."""
    start = rig.count()
    throttled = [q.throttled() for q in rig.quotas]  # over the episode, as its underruns are
    assert rig.trigger("start_episode").success
    _wait(lambda: rig.count() >= start + 10, timeout_s=30)
    pids = {"node": rig.node.pid, "bare": rig.bare.pid}
    marks = {who: rig.count(who) for who in pids}
    cpu = {who: _cpu_s(pid) for who, pid in pids.items()}
    began = time.monotonic()
    time.sleep(seconds)
    window = time.monotonic() - began
    cpu = {who: _cpu_s(pid) - cpu[who] for who, pid in pids.items()}
    ends = {who: rig.count(who) for who in pids}
    throttled = [q.throttled() - before for q, before in zip(rig.quotas, throttled, strict=True)]
    episode = rig.outcome.episode if rig.outcome is not None else 0
    assert rig.trigger("stop").success
    _wait(lambda: rig.outcome is not None and rig.outcome.episode > episode)
    periods, published, stamped = {}, {}, {}
    for who in pids:
        with rig.lock:
            pairs = list(itertools.pairwise(rig.actions[who][marks[who] : ends[who]]))
        published[who] = [(b[2] - a[2]) * 1e-9 for a, b in pairs]
        periods[who] = [(b[3] - a[3]) * 1e-9 for a, b in pairs]
        off = (abs(p - 1.0 / rig.hz) for p in periods[who])
        stamped[who] = [(b[3], o) for (_, b), o in zip(pairs, off, strict=True)]
    return {
        "periods": periods, "published": published, "cpu": cpu, "window": window,
        "blocks": _paired_bootstrap.blocks(stamped, BLOCK_S),
        "throttled": throttled, "duty": rig.outcome.duty_cycle, "underruns": rig.outcome.underruns,
    }  # fmt: skip


def _pooled(windows: list[dict[str, Any]], hz: float) -> dict[str, dict[str, float]]:
    """The windows of one rig as one: periods pooled (a p99 over several windows is steadier
    than one window's few slowest), CPU over their total time, underruns summed."""
    seconds = sum(w["window"] for w in windows)
    result = {}
    for who in ("node", "bare"):
        periods = [p for w in windows for p in w["periods"][who]]
        published = [p for w in windows for p in w["published"][who]]
        cpu = sum(w["cpu"][who] for w in windows)
        result[who] = _stream(periods, published, hz, cpu, seconds)
    result["node"] |= {
        "duty": min(w["duty"] for w in windows),
        "underruns": sum(w["underruns"] for w in windows),
    }
    for i, who in enumerate(("bare", "node")):
        result[who]["throttled"] = sum(w["throttled"][i] for w in windows if w["throttled"])
    cut = [block for w in windows for block in w["blocks"]]
    low, high = _paired_bootstrap.ratio_interval(cut, "node", "bare", 0.99)
    result["node"] |= {"ratio_low": low, "ratio_high": high}
    return result


def _rows(hz: float, cameras: bool, label: str, r: dict[str, dict[str, float]]) -> list[Any]:
    bare, node = r["bare"], r["node"]
    rows = []
    for who, s in (("bare rclpy node", bare), ("policy node", node)):
        rows.append(
            [f"{who}{label}", f"{hz:g}", "2" if cameras else "0", f"{s['share']:.3f}",
             ratio(s["share"], bare["share"]), ms(s["per_action"], 2), f"{s['rate']:.2f}",
             ratio(s["rate"], bare["rate"]), ms(s["jitter_p50"], 2), ms(s["jitter_p99"]),
             ratio(s["jitter_p99"], bare["jitter_p99"]),
             f"{s['ratio_low']:.2f}-{s['ratio_high']:.2f}x" if "ratio_low" in s else "",
             ms(s["published_p99"]), ms(s["max"]),
             f"{s['duty']:.3f}" if "duty" in s else "",
             f"{s['underruns']:g}" if "duty" in s else ""]
        )  # fmt: skip
    return rows


def _measure_rig(
    hz: float, cameras: bool, quota: float | None, seconds: float, estop_trials: int
) -> tuple[dict[str, dict[str, float]], dict[str, list[float]]]:
    rig = _Rig(hz, cameras, quota)
    try:
        rig.bring_up()
        estop = {}
        if estop_trials:
            estop["transient local (latched)"] = _estop_latency(rig, True, estop_trials)
            estop["default QoS (volatile)"] = _estop_latency(rig, False, estop_trials)
        windows = [_window(rig, seconds) for _ in range(WINDOWS)]
        return _pooled(windows, hz), estop
    finally:
        rig.close()


def measure(full: bool) -> str:
    trials = 20 if full else 6
    seconds = 15.0 if full else 4.0
    _installed_first()
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.Random().randint(101, 200)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("FASTRTPS_DEFAULT_PROFILES_FILE", str(SHM_PROFILE))
    load = os.getloadavg()
    rate_rows: list[Any] = []
    estop: dict[str, list[float]] = {}
    for cameras in (True, False):
        for hz in RATES:
            trials_here = trials if cameras and hz == 30.0 else 0
            result, found = _measure_rig(hz, cameras, None, seconds, trials_here)
            estop |= found
            rate_rows += _rows(hz, cameras, "", result)
    try:
        quota = _cpu_quota.create(f"bench_probe{os.getpid()}", QUOTA_CORES)
        kind = quota.kind
        quota.remove()
        result, _ = _measure_rig(30.0, True, QUOTA_CORES, seconds, 0)
        label = f" in {QUOTA_CORES:g} core"
        rate_rows += _rows(30.0, True, label, result)
        quota_note = (
            f"Quota rows: each node in its own {kind} group of {QUOTA_CORES:g} of one core "
            f"(period {_cpu_quota.PERIOD_US // 1000} ms); throttled periods over the episodes: "
            f"bare {result['bare']['throttled']:g}, policy {result['node']['throttled']:g}."
        )
    except OSError as exc:
        quota_note = f"_No quota rows: {exc}._"
    base = quantile(next(iter(estop.values())), 0.5)
    estop_rows = [
        [kind, len(v), ms(quantile(v, 0.5)), ms(quantile(v, 0.95)), ms(max(v)),
         ratio(quantile(v, 0.5), base)]
        for kind, v in estop.items()
    ]  # fmt: skip
    after = os.getloadavg()
    return "\n\n".join(
        [
            "### Policy node against a bare rclpy node on the same inputs",
            table(RATE_HEADERS, rate_rows),
            "Ratios are to the bare node of the same row pair, measured over the same windows. "
            f"The jitter ratio's interval: 90 % of {_paired_bootstrap.REPLICATES} replicates "
            f"of the pooled windows cut into {BLOCK_S:g} s blocks, drawn with replacement, "
            "both nodes' periods from the same blocks. " + quota_note,
            "### E-stop publish to hold received (30 Hz, cameras)",
            table(ESTOP_HEADERS, estop_rows),
            machine_note(
                full=full,
                sizes=f"{trials} e-stop trials per publisher, {WINDOWS} windows of {seconds:g} s "
                "per row pair, each an episode of its own, their periods pooled; "
                f"load average {load[0]:.2f} before, {after[0]:.2f} after",
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
