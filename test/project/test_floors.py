"""What the package declares against what the distros give, and that a floor tier runs at it.

The floors are written once, as pip constraints in test/floors/: Humble's (Ubuntu 22.04) and
Jazzy's (Ubuntu 24.04) own Python packages. ``make test`` builds a venv at each and runs the
suite there from test/, against a copy installed by that distro's setuptools
(``SEQUENCE_AI_FLOOR`` names the floor; these tests then check they run at it).
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sequence_ai_core

ROOT = Path(__file__).resolve().parents[2]
FLOORS = ROOT / "test" / "floors"
FLOOR = os.environ.get("SEQUENCE_AI_FLOOR")
PYTHONS = {"humble": (3, 10), "jazzy": (3, 12)}
OUR_PACKAGES = ("sequence_ai_core", "sequence_ai_sim", "sequence_ai_ros")
# Import names of what rosdep installs for the node (package.xml), not on PyPI under these names.
ROS_IMPORTS = {
    "rclpy", "rcl_interfaces", "builtin_interfaces", "ament_index_python", "lifecycle_msgs",
    "std_msgs", "std_srvs", "sensor_msgs", "trajectory_msgs", "diagnostic_msgs",
}  # fmt: skip
DISTRIBUTIONS = {"PIL": "pillow", "yaml": "pyyaml"}


def pins(floor: str) -> dict[str, str]:
    """``name == version`` lines of a floor's constraint file, by lower-case name."""
    text = (FLOORS / f"{floor}.txt").read_text(encoding="utf-8")
    found = re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, flags=re.MULTILINE)
    return {name.lower(): version for name, version in found}


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """Inside ``try: ... except ImportError`` (an optional import with its own message)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            return True
    return False


def third_party_imports(package: str) -> dict[str, set[str]]:
    """Top-level names imported without a guard, anywhere in ``package`` -> importing files."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in OUR_PACKAGES or _guarded(node, parents):
                    continue
                found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def declared() -> tuple[set[str], dict[str, set[str]]]:
    """(install_requires, extras) as setup.py declares them, read without running setup()."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    call = next(
        node for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup"
    )  # fmt: skip
    keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in
                ("install_requires", "extras_require")}  # fmt: skip
    extras = {name: _requirement_names(reqs) for name, reqs in keywords["extras_require"].items()}
    return _requirement_names(keywords["install_requires"]), extras


def test_every_package_imported_directly_is_declared() -> None:
    """httpcore is imported by the socket guard and the connection pool: relying on httpx to
    bring it let Humble's httpcore 0.14 in unnoticed."""
    runtime, extras = declared()
    core = third_party_imports("sequence_ai_core")
    openpi_only = {name for name, files in core.items()
                   if all(f.startswith("sequence_ai_core/openpi/") for f in files)}  # fmt: skip
    for name, files in core.items():
        wanted = DISTRIBUTIONS.get(name, name).lower()
        allowed = runtime | (extras["openpi"] if name in openpi_only else set())
        assert wanted in allowed, f"{name} (imported by {sorted(files)}) is not declared"
    manifest = (ROOT / "package.xml").read_text(encoding="utf-8")
    for name, files in third_party_imports("sequence_ai_ros").items():
        if name in ROS_IMPORTS:  # <depend> is build and exec (the interfaces use it too)
            tags = (f"<exec_depend>{name}</exec_depend>", f"<depend>{name}</depend>")
            assert any(tag in manifest for tag in tags), (name, files)
        else:
            assert DISTRIBUTIONS.get(name, name).lower() in runtime, (name, files)


def test_the_build_requirement_is_the_oldest_setuptools_tested() -> None:
    """``pip install --no-build-isolation`` (a ROS machine's pip, the floor tiers) builds with
    the distro's setuptools: the declared minimum must be Humble's 59.6, which the floor tier
    builds with. colcon does not run setup.py (the ROS package is ament_cmake)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    minimum = re.search(r'"setuptools>=([\d.]+)"', text)
    assert minimum is not None, text
    assert minimum.group(1) == pins("humble")["setuptools"].rsplit(".0", 1)[0]


def test_the_declared_httpx_floor_is_the_one_tested() -> None:
    runtime_text = (ROOT / "setup.py").read_text(encoding="utf-8")
    floor = pins("humble")
    for name in ("httpx", "httpcore"):
        minimum = re.search(rf'"{name}>=([\d.]+)"', runtime_text)
        assert minimum is not None, name
        assert floor[name].startswith(minimum.group(1)), (name, floor[name], minimum.group(1))


@pytest.mark.skipif(FLOOR is None, reason="runs in a floor venv (make floor-humble, pytest-ros)")
def test_this_run_is_at_the_floor() -> None:
    """The venv has exactly the distro's versions, and the package under test is the copy
    the distro's setuptools installed, not the source tree."""
    assert FLOOR in PYTHONS, FLOOR
    assert sys.version_info[:2] == PYTHONS[FLOOR]
    for name, version in pins(FLOOR).items():
        assert importlib.metadata.version(name) == version, name
    installed = Path(sequence_ai_core.__file__).resolve()
    assert "site-packages" in installed.parts, installed
    assert not installed.is_relative_to(ROOT / "sequence_ai_core"), installed


@pytest.mark.skipif(FLOOR != "humble", reason="Humble's floor venv prepares Ubuntu's httpx")
def test_ubuntu_2204_httpx_is_refused_at_import_in_one_line() -> None:
    """Ubuntu 22.04's python3-httpx 0.22.0 / python3-httpcore 0.14.5 (what rosdep gives on
    Humble) once failed at import with an AttributeError deep in the socket guard."""
    apt = os.environ.get("SEQUENCE_AI_APT_HTTPX")
    assert apt and Path(apt, "httpcore").is_dir(), f"SEQUENCE_AI_APT_HTTPX={apt!r}"
    env = dict(os.environ, PYTHONPATH=apt)
    versions = "import httpx, httpcore; print(httpx.__version__, httpcore.__version__)"
    probe = subprocess.run(
        [sys.executable, "-c", versions],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert probe.stdout.split() == ["0.22.0", "0.14.5"], probe.stderr
    imported = subprocess.run(
        [sys.executable, "-c", "import sequence_ai_core"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert imported.returncode != 0
    last = imported.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: sequence_ai_core needs httpx >= 0.25"), imported.stderr
    assert "found httpx 0.22.0, httpcore 0.14.5" in last
    assert "python3 -m pip install --user 'httpx>=0.25'" in last
    assert "AttributeError" not in imported.stderr


def test_the_install_steps_name_the_floors() -> None:
    """The node page's install section states the versions the floor tiers run at."""
    page = (ROOT / "docs" / "node.md").read_text(encoding="utf-8")
    section = page[page.index("\n## Install and build\n") :]
    section = section[: section.index("\n## ", 4)]
    for floor in ("humble", "jazzy"):
        for name in ("numpy", "pillow", "setuptools", "httpx"):
            assert f"{name} {pins(floor)[name]}".lower() in section.lower(), (floor, name)
    assert "python3 -m pip install --user 'httpx>=0.25'" in section
