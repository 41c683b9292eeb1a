"""``colcon build``, plain and ``--symlink-install``, as users run it, checked file by file.

colcon from PyPI runs with the floor venv's setuptools (the distro's own: 59.6 on Humble,
68.1 on Jazzy), from a shell with ROS sourced and from one without (a Dockerfile's
``RUN colcon build`` often is not). Every build must put the executables where ``ros2 run``
looks, the launch and config files and the ament index entry where
``get_package_share_directory`` looks, and ``sequence-ai`` on PATH. A symlinked install must
link back to the source (a colcon that cannot do ``develop`` falls back to a copy without a
word). On Jazzy's floor the installed policy node is started on real rclpy and answers.

Runs in the floor venvs, where colcon is installed (``make floor-humble``, ``make pytest-ros``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "sequence_ai_ros"
COLCON = Path(sys.executable).parent / "colcon"
NOT_SOURCE = (".venv*", ".git", "build", "install", "log", "*.egg-info", "__pycache__", "*_cache")
NOT_SOURCE += (".hypothesis", "results")
EXECUTABLES = ("policy_node", "sim_arm_node", "sequence-ai")

pytestmark = pytest.mark.timeout(300)


def shipped() -> dict[str, Path]:
    """Install-relative path -> source file, for every data file the package installs."""
    files = {f"share/ament_index/resource_index/packages/{PACKAGE}": ROOT / "resource" / PACKAGE}
    files[f"share/{PACKAGE}/package.xml"] = ROOT / "package.xml"
    for folder, pattern in (("launch", "*.launch.py"), ("config", "*.yaml")):
        for source in sorted((ROOT / folder).glob(pattern)):
            files[f"share/{PACKAGE}/{folder}/{source.name}"] = source
    files["bin/sequence-ai"] = ROOT / "scripts" / "sequence-ai"
    return files


def python_sources() -> set[str]:
    return {
        str(path.relative_to(ROOT))
        for top in ("sequence_ai_core", "sequence_ai_sim", PACKAGE)
        for path in (ROOT / top).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def build(tmp_path: Path, *, symlink: bool, ros_sourced: bool) -> Path:
    """A workspace with the package in src/, built by colcon; its install/ prefix."""
    workspace = tmp_path / "ws"
    shutil.copytree(ROOT, workspace / "src" / PACKAGE, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "PYTHONPATH")}
    if ros_sourced:  # what sourcing /opt/ros/<distro>/setup.bash sets first
        env["AMENT_PREFIX_PATH"] = str(tmp_path / "opt-ros")
    command = [str(COLCON), "build", "--event-handlers", "console_direct+"]
    command += ["--symlink-install"] if symlink else []
    built = subprocess.run(
        command, cwd=workspace, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert built.returncode == 0, built.stdout[-4000:] + built.stderr[-4000:]
    return workspace / "install"


def in_install(install: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """``command`` in a shell that sourced the install, as a user's does."""
    script = '. "$0/setup.sh" && exec "$@"'
    env = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "PYTHONPATH")}
    # `python3` is the floor's, as on a ROS machine it is the distro's (scripts/sequence-ai)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(
        ["sh", "-c", script, str(install), *command],
        capture_output=True, text=True, env=env, cwd=install, timeout=120, check=False,
    )  # fmt: skip


def check_layout(install: Path, *, symlink: bool) -> None:
    prefix = install / PACKAGE
    lib = prefix / "lib" / PACKAGE
    for name in EXECUTABLES:
        assert (lib / name).is_file() and os.access(lib / name, os.X_OK), sorted(prefix.rglob("*"))
    for relative, source in shipped().items():
        target = prefix / relative
        assert target.is_file(), relative
        assert target.read_bytes() == source.read_bytes(), relative
        # symlinked: a link into the source (through colcon's build dir); copied: a file
        assert target.is_symlink() == symlink, relative
        if symlink:
            assert (
                target.resolve()
                == (install.parent / "src" / PACKAGE / source.relative_to(ROOT)).resolve()
            )
    site = next(prefix.glob("lib/python3*/site-packages"))
    if symlink:
        assert not (site / "sequence_ai_core").exists()
        assert [p.name for p in site.glob("*.egg-link")], sorted(p.name for p in site.iterdir())
    else:
        installed = {str(p.relative_to(site)) for p in site.rglob("*.py")}
        assert installed == python_sources()


@pytest.mark.parametrize("ros_sourced", [False, True], ids=["unsourced", "ros-sourced"])
@pytest.mark.parametrize("symlink", [False, True], ids=["copy", "symlink-install"])
def test_colcon_build_installs_where_ros_looks(
    tmp_path: Path, symlink: bool, ros_sourced: bool
) -> None:
    install = build(tmp_path, symlink=symlink, ros_sourced=ros_sourced)
    check_layout(install, symlink=symlink)
    # what the sourced workspace imports and runs is this build, from any directory
    where = in_install(
        install, [sys.executable, "-c", "import sequence_ai_ros; print(sequence_ai_ros.__file__)"]
    )
    assert where.returncode == 0, where.stderr
    expected = install.parent / ("src" if symlink else "install")
    assert Path(where.stdout.strip()).resolve().is_relative_to(expected.resolve()), where.stdout
    helped = in_install(install, ["sequence-ai", "--help"])
    assert helped.returncode == 0 and "sim" in helped.stdout, helped.stderr
    if symlink:  # an edited config file is what the install serves, without a rebuild
        source = install.parent / "src" / PACKAGE / "config" / "pi05_droid.yaml"
        source.write_text(source.read_text() + "\n# edited\n")
        served = install / PACKAGE / "share" / PACKAGE / "config" / "pi05_droid.yaml"
        assert served.read_text().endswith("# edited\n")


def _real_rclpy() -> bool:
    try:
        import rclpy
    except ImportError:
        return False
    return any(Path(rclpy.__file__).parent.glob("_rclpy_pybind11*"))


@pytest.mark.ros
@pytest.mark.skipif(not _real_rclpy(), reason="Humble's rclpy is not on PyPI: layout only")
@pytest.mark.parametrize("symlink", [False, True], ids=["copy", "symlink-install"])
def test_the_installed_policy_node_starts_and_answers(tmp_path: Path, symlink: bool) -> None:
    """``ros2 run sequence_ai_ros policy_node`` without ros2cli: the executable colcon
    installed, in a shell that sourced the install, answering ``get_state`` on real rclpy."""
    from lifecycle_msgs.srv import GetState
    from realros import Probe, RosProcess, Tier, ros_context
    from realros.nodes import NODE

    install = build(tmp_path, symlink=symlink, ros_sourced=False)
    share = in_install(install, [sys.executable, "-c",
        "from ament_index_python.packages import get_package_share_directory as g; "
        f"print(g('{PACKAGE}'))"])  # fmt: skip
    assert share.returncode == 0, share.stderr
    assert Path(share.stdout.strip()) == install / PACKAGE / "share" / PACKAGE
    namespace = f"/colcon{os.getpid()}_{int(symlink)}"
    executable = install / PACKAGE / "lib" / PACKAGE / "policy_node"
    script = '. "$0/setup.sh" && exec "$@"'
    tier = Tier(ros_context(), namespace, tmp_path, Probe(ros_context(), namespace))
    tier.processes.append(RosProcess(
        "", tmp_path / "policy_node.log", namespace=namespace,
        command=["sh", "-c", script, str(install), str(executable)],
        env={"AMENT_PREFIX_PATH": "", "PYTHONPATH": ""},
    ))  # fmt: skip
    try:
        answer = tier.probe.call(GetState, f"{NODE}/get_state", idempotent=True)
        assert answer.current_state.label == "unconfigured", tier.processes[0].output()
    finally:
        tier.close()
