"""A small test double of the rclpy surface the project's nodes use (rclpy 3.3.15 / Humble).

``install()`` puts ``rclpy``, ``rclpy.lifecycle``, ``rclpy.qos``, ..., and the message packages
into ``sys.modules`` and removes them again afterwards, so a later
``pytest.importorskip("rclpy")`` still skips. Message classes come from Humble's real
definitions (see messages.py). Signatures are those of rclpy 3.3.15; test_ros_static.py checks
the production code against rclpy's own sources, not against this double.
"""

from __future__ import annotations

import importlib.util
import signal
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any

from . import entities, messages, node, parameters
from .graph import Graph

MSGS: dict[str, Any] = {}
_OWN_MODULES = (
    "sequence_ai_ros.policy_node",
    "sequence_ai_ros.node_io",
    "sequence_ai_ros.sim_arm_node",
    "sequence_ai_ros.health_publisher",
    "sequence_ai_ros.rclpy_guards",
)


class ExternalShutdownException(Exception):
    pass


class SignalHandlerOptions(Enum):
    """rclpy.signals.SignalHandlerOptions (a pybind11 enum in rclpy 3.3.15)."""

    NO = 0
    SIGINT = 1
    SIGTERM = 2
    ALL = 3


_WANTED = {
    SignalHandlerOptions.SIGINT: (signal.SIGINT,),
    SignalHandlerOptions.SIGTERM: (signal.SIGTERM,),
    SignalHandlerOptions.ALL: (signal.SIGINT, signal.SIGTERM),
}


def _install_signal_handlers(graph: Graph, options: SignalHandlerOptions) -> None:
    """rclpy's handlers as Humble's signal_handler.cpp runs them: chain to the previous
    handler unless it is SIG_DFL/SIG_IGN (so SIGINT still raises KeyboardInterrupt, SIGTERM
    raises nothing), and shut every context down. Python can only install them from the main
    thread; elsewhere the double installs none."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in _WANTED.get(options, ()):
        previous = signal.getsignal(signum)

        def handler(num: int, frame: Any, previous: Any = previous) -> None:
            graph.shutdown = True  # rclpy::shutdown_contexts() from the deferred thread
            if callable(previous):
                previous(num, frame)

        graph.saved_signal_handlers.setdefault(signum, previous)
        signal.signal(signum, handler)


def _restore_signal_handlers(graph: Graph) -> None:
    for signum, previous in graph.saved_signal_handlers.items():
        signal.signal(signum, previous)
    graph.saved_signal_handlers.clear()


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    return module


class SingleThreadedExecutor:
    def __init__(self, *, context: Any = None) -> None:
        self.nodes: list[Any] = []

    def add_node(self, node_: Any) -> bool:
        self.nodes.append(node_)
        return True

    def spin(self) -> None:
        graph = node.Node.graph
        while not graph.shutdown:
            graph.spin_for(0.05)
        raise ExternalShutdownException()

    def spin_once(self, timeout_sec: float | None = None) -> None:
        """Fires what is due within the timeout (rclpy: one callback; close enough here)."""
        graph = node.Node.graph
        if not graph.shutdown:
            graph.spin_for(0.05 if timeout_sec is None or timeout_sec < 0 else timeout_sec)
        if graph.shutdown:
            raise ExternalShutdownException()


def _rclpy_modules(graph: Graph) -> dict[str, types.ModuleType]:
    def init(
        *,
        args: Any = None,
        context: Any = None,
        domain_id: Any = None,
        signal_handler_options: SignalHandlerOptions | None = None,
    ) -> None:
        graph.shutdown = False
        if signal_handler_options is None:  # the default context gets SIGINT and SIGTERM
            signal_handler_options = (
                SignalHandlerOptions.ALL if context is None else SignalHandlerOptions.NO
            )
        graph.signal_handler_options = signal_handler_options
        _install_signal_handlers(graph, signal_handler_options)

    def shutdown(*, context: Any = None, uninstall_handlers: Any = None) -> None:
        graph.shutdown = True
        if uninstall_handlers or (uninstall_handlers is None and context is None):
            _restore_signal_handlers(graph)

    def try_shutdown(*, context: Any = None) -> None:
        graph.shutdown = True

    def ok(*, context: Any = None) -> bool:
        return not graph.shutdown

    lifecycle = _module(
        "rclpy.lifecycle",
        Node=node.LifecycleNode,
        LifecycleNode=node.LifecycleNode,
        State=node.LifecycleState,
        LifecycleState=node.LifecycleState,
        Publisher=entities.LifecyclePublisher,
        TransitionCallbackReturn=entities.TransitionCallbackReturn,
    )
    qos = _module(
        "rclpy.qos",
        QoSProfile=entities.QoSProfile,
        ReliabilityPolicy=entities.ReliabilityPolicy,
        DurabilityPolicy=entities.DurabilityPolicy,
        HistoryPolicy=entities.HistoryPolicy,
        qos_profile_sensor_data=entities.qos_profile_sensor_data,
    )
    submodules = {
        "rclpy.lifecycle": lifecycle,
        "rclpy.qos": qos,
        "rclpy.node": _module("rclpy.node", Node=node.Node),
        "rclpy.parameter": _module("rclpy.parameter", Parameter=parameters.Parameter),
        "rclpy.executors": _module(
            "rclpy.executors",
            SingleThreadedExecutor=SingleThreadedExecutor,
            ExternalShutdownException=ExternalShutdownException,
        ),
        "rclpy.exceptions": _module(
            "rclpy.exceptions",
            **{k: v for k, v in vars(parameters).items() if k.endswith("Exception")},
        ),
        "rclpy.time": _module("rclpy.time", Time=entities.Time),
        # Humble's module (Jazzy's is rclpy.event_handler); only its constructor is used.
        "rclpy.qos_event": _module(
            "rclpy.qos_event", SubscriptionEventCallbacks=entities.SubscriptionEventCallbacks
        ),
        "rclpy.signals": _module("rclpy.signals", SignalHandlerOptions=SignalHandlerOptions),
    }
    rclpy = _module("rclpy", init=init, shutdown=shutdown, try_shutdown=try_shutdown, ok=ok)
    for name, module in submodules.items():
        setattr(rclpy, name.split(".")[1], module)
    return {"rclpy": rclpy, **submodules}


def real_rclpy_available() -> bool:
    """True on a real ROS installation (its rclpy ships the C extension; rclpy-intellisense's
    copy of the sources does not). There the double must not shadow the real modules."""
    try:
        spec = importlib.util.find_spec("rclpy")
    except ValueError:
        return False
    if spec is None or spec.origin is None:
        return False
    return any(Path(spec.origin).parent.glob("_rclpy_pybind11*"))


@contextmanager
def install() -> Iterator[Graph]:
    """Install the double; yields the in-process graph all nodes share."""
    graph = Graph()
    node.Node.graph = graph
    modules = messages.build_modules()
    MSGS["ParameterDescriptor"] = modules["rcl_interfaces.msg"].ParameterDescriptor
    MSGS["Time"] = modules["builtin_interfaces.msg"].Time
    modules.update(_rclpy_modules(graph))
    # Only its type is looked at (rclpy_guards finds the lifecycle ChangeState service by it;
    # the double's lifecycle has no services).
    modules["lifecycle_msgs.srv"] = _module(
        "lifecycle_msgs.srv", ChangeState=type("ChangeState", (), {})
    )
    modules["lifecycle_msgs"].__path__ = []  # type: ignore[attr-defined]
    clashes = [name for name in modules if name in sys.modules]
    assert not clashes, f"real modules present, refusing to shadow them: {clashes[:5]}"
    sys.modules.update(modules)
    # The code under test may change them (policy_node.main maps SIGTERM): put them back.
    in_main = threading.current_thread() is threading.main_thread()
    originals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield graph
    finally:
        _restore_signal_handlers(graph)
        for signum, original in originals.items():
            if in_main and original is not None:
                signal.signal(signum, original)
        for name in [*modules, *_OWN_MODULES]:
            sys.modules.pop(name, None)
        # `from sequence_ai_ros import policy_node` reads the package attribute first: drop
        # it too, or a later test gets the module bound to this (finished) double.
        package = sys.modules.get("sequence_ai_ros")
        for name in _OWN_MODULES:
            if package is not None and hasattr(package, name.rpartition(".")[2]):
                delattr(package, name.rpartition(".")[2])
