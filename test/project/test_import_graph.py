"""Dependencies point one way: the node and the simulator on the client, never back.

``sequence_ai_core`` imports neither the simulator, nor the node, nor ROS; the simulator does
not import the node; the node's ROS-free helpers reach no ROS module, directly or through
others; and no module imports itself through others. Read from the sources
(test/support/import_graph.py: every import statement, lazy ones included), and checked for real
by importing every module in a fresh interpreter.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from support.import_graph import (
    IN_FUNCTION,
    MODULE_LEVEL,
    TYPE_CHECKING_ONLY,
    Import,
    all_modules,
    cycles,
    every_import,
    graph,
    imports,
    modules,
    reachable,
    within,
)

CORE, SIM, NODE = "sequence_ai_core", "sequence_ai_sim", "sequence_ai_ros"
#: rclpy, the launch system and the message packages: what only a ROS install (or the ROS
#: wheels) provides. Message and service packages go by their suffix.
ROS_PACKAGES = {"rclpy", "rcl_interfaces", "launch", "launch_ros", "launch_testing"}
ROS_PACKAGES |= {"ament_index_python", "diagnostic_updater", "rosidl_runtime_py"}
ROS_SUFFIXES = ("_msgs", "_srvs", "_interfaces")

#: Client modules that still import the simulator, each with why; the list only shrinks.
CLIENT_IMPORTS_OF_THE_SIMULATOR: set[str] = set()


def is_ros(name: str) -> bool:
    root = name.split(".")[0]
    return root in ROS_PACKAGES or root.endswith(ROS_SUFFIXES)


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return every_import()


def test_the_graph_sees_every_kind_of_import() -> None:
    source = "\n".join(
        [
            "from typing import TYPE_CHECKING",
            "import json, numpy.typing",
            "from . import sibling, name",
            "from ..other import thing",
            "if TYPE_CHECKING:",
            "    from .typed import Alias",
            "def later():",
            "    from pkg.sub import deep",
        ]
    )
    known = {"pkg", "pkg.sub", "pkg.sub.sibling", "pkg.sub.deep", "pkg.other", "pkg.sub.typed"}
    seen = imports("pkg.sub.here", source, is_package=False, known=known)
    assert [(each.imported, each.when) for each in seen] == [
        ("typing", MODULE_LEVEL),
        ("json", MODULE_LEVEL),
        ("numpy.typing", MODULE_LEVEL),
        ("pkg.sub", MODULE_LEVEL),  # `name` is not a module: the package's __init__ runs
        ("pkg.sub.sibling", MODULE_LEVEL),
        ("pkg.other", MODULE_LEVEL),
        ("pkg.sub.typed", TYPE_CHECKING_ONLY),
        ("pkg.sub.deep", IN_FUNCTION),
    ]
    in_package = imports("pkg.sub", "from .deep import x", is_package=True, known=known)
    assert [each.imported for each in in_package] == ["pkg.sub.deep"]


def test_the_graph_of_the_packages_has_their_known_edges(found: list[Import]) -> None:
    """Sanity: the real tree's imports at each level are seen, so an empty list means none."""
    edges = graph(found, all_modules())
    assert f"{SIM}.handler" in edges[f"{SIM}.server"]
    assert f"{CORE}.types" in edges[f"{SIM}.catalogue"]
    assert f"{NODE}.conversions" in edges[f"{NODE}.outputs.base"]  # `from ..conversions`
    lazy = {
        (each.importer, each.imported.split(".")[0]) for each in found if each.when == IN_FUNCTION
    }
    # server imports handler at module level (an edge above), so it must not read as lazy
    assert (f"{SIM}.server", SIM) not in lazy
    assert (f"{CORE}.gateway.connections", "certifi") in lazy  # an optional import, in its function


def test_the_client_imports_neither_the_simulator_nor_the_node_nor_ros(
    found: list[Import],
) -> None:
    offenders = []
    allowed_users = set()
    for each in found:
        if not within(each.importer, CORE):
            continue
        if within(each.imported, SIM) and each.importer in CLIENT_IMPORTS_OF_THE_SIMULATOR:
            allowed_users.add(each.importer)
        elif within(each.imported, SIM) or within(each.imported, NODE) or is_ros(each.imported):
            offenders.append(str(each))
    assert offenders == [], "\n".join(offenders)
    assert allowed_users == CLIENT_IMPORTS_OF_THE_SIMULATOR  # a fixed one leaves the list


def test_the_simulator_does_not_import_the_node(found: list[Import]) -> None:
    offenders = [
        str(each)
        for each in found
        if within(each.importer, SIM) and (within(each.imported, NODE) or is_ros(each.imported))
    ]
    assert offenders == [], "\n".join(offenders)


#: The node package's modules for the simulated arm: the only ones that may use the simulator.
SIMULATED_ARM = {f"{NODE}.sim_arm_node"}


def test_the_policy_node_reaches_no_simulator_module(found: list[Import]) -> None:
    """Everything of the node package but the simulated arm is the policy node, which runs on
    a robot: no import of the simulator, at module level, in a function or for typing, of its
    own or through any module it imports."""
    known = all_modules()
    assert set(known) >= SIMULATED_ARM
    edges = graph(found, known)
    by_importer: dict[str, list[Import]] = {}
    for each in found:
        by_importer.setdefault(each.importer, []).append(each)
    offenders: dict[str, str] = {}  # each import of the simulator, with one way to it
    for module in sorted(name for name in modules(NODE) if name not in SIMULATED_ARM):
        for reached, path in reachable(module, edges).items():
            for each in by_importer.get(reached, []):
                if within(each.imported, SIM) and not within(reached, SIM):
                    offenders.setdefault(str(each), " -> ".join(path))
    assert offenders == {}, "\n".join(f"{path}: {each}" for each, path in offenders.items())
    # The exemption is not stale: the simulated arm is where the simulator is used.
    assert {each.importer for each in found if within(each.imported, SIM)} & SIMULATED_ARM


def ros_modules_of_the_node() -> set[str]:
    """The modules the node package's docstring says import rclpy: ``Only ``a``, ``b`` ...
    import rclpy``; every other module of the package is a ROS-free helper."""
    docstring = (modules(NODE)[NODE]).read_text(encoding="utf-8")
    sentence = re.search(r"Only (.*?) import rclpy", docstring, flags=re.DOTALL)
    assert sentence is not None, "the package docstring no longer lists its ROS modules"
    return {f"{NODE}.{name}" for name in re.findall(r"``(\w+)``", sentence.group(1))}


def test_the_node_s_ros_free_helpers_reach_no_ros_module(found: list[Import]) -> None:
    known = all_modules()
    ros_modules = ros_modules_of_the_node()
    assert ros_modules <= set(known) and len(ros_modules) >= 5
    helpers = sorted(name for name in modules(NODE) if name not in ros_modules)
    assert {f"{NODE}.conversions", f"{NODE}.inputs", f"{NODE}.outputs.base"} <= set(helpers)
    edges = graph(found, known)
    by_importer: dict[str, list[Import]] = {}
    for each in found:
        by_importer.setdefault(each.importer, []).append(each)
    offenders = []
    for helper in helpers:
        for module, path in reachable(helper, edges).items():
            offenders += [
                " -> ".join(path) + f": {each}"
                for each in by_importer.get(module, [])
                if is_ros(each.imported)
            ]
    assert offenders == [], "\n".join(offenders)


def test_no_module_imports_itself_through_others(found: list[Import]) -> None:
    """Lazy and typing-only imports included: a cycle is two modules that cannot be read,
    tested or moved apart, whether it bites at import time or not."""
    found_cycles = [" -> ".join(cycle) for cycle in cycles(graph(found, all_modules()))]
    assert found_cycles == [], "\n".join(found_cycles)


def test_a_cycle_is_reported_as_its_path() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(edges) == [["a", "b", "c", "a"]]  # a self-import is not a cycle of modules
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("package", [CORE, SIM])
def test_every_module_imports_and_the_client_never_loads_the_simulator(package: str) -> None:
    names = sorted(name for name in modules(package) if not name.endswith("__main__"))
    script = "\n".join(
        [
            "import importlib, sys",
            f"for name in {names!r}:",
            "    importlib.import_module(name)",
            f"print('{SIM}' in sys.modules)",
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(package == SIM)
