"""A small test double of the rclpy surface the project's nodes use (rclpy 3.3.15 / Humble).

``install()`` puts ``rclpy``, ``rclpy.lifecycle``, ``rclpy.qos``, ..., the message packages and
``diagnostic_updater`` into ``sys.modules`` and removes them again afterwards, so a later
``pytest.importorskip("rclpy")`` still skips. Message classes come from Humble's real
definitions (see messages.py). Signatures are those of rclpy 3.3.15; test_ros_static.py checks
the production code against rclpy's own sources, not against this double.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from . import diagnostics, entities, messages, node, parameters
from .graph import Graph

MSGS: dict[str, Any] = {}
_OWN_MODULES = (
    "sequence_ai_ros.policy_node",
    "sequence_ai_ros.node_io",
    "sequence_ai_ros.sim_arm_node",
)


class ExternalShutdownException(Exception):
    pass


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


def _rclpy_modules(graph: Graph) -> dict[str, types.ModuleType]:
    def init(*, args: Any = None, context: Any = None, domain_id: Any = None, **kw: Any) -> None:
        graph.shutdown = False

    def shutdown(*, context: Any = None, uninstall_handlers: Any = None) -> None:
        graph.shutdown = True

    def try_shutdown(*, context: Any = None) -> None:
        graph.shutdown = True

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
    }
    rclpy = _module("rclpy", init=init, shutdown=shutdown, try_shutdown=try_shutdown)
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
    modules["diagnostic_updater"] = _module(
        "diagnostic_updater", **diagnostics.build(modules["diagnostic_msgs.msg"])
    )
    clashes = [name for name in modules if name in sys.modules]
    assert not clashes, f"real modules present, refusing to shadow them: {clashes[:5]}"
    sys.modules.update(modules)
    try:
        yield graph
    finally:
        for name in [*modules, *_OWN_MODULES]:
            sys.modules.pop(name, None)
