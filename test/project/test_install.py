"""Installing the package as a new user would: a fresh Python 3.10 venv with its stock pip.

Ubuntu 22.04 (where Humble runs) ships Python 3.10 with a pip that, for a project without a
pyproject.toml and without `wheel` installed, falls back to `setup.py install`; that once put
`sequence-ai` in `<venv>/lib/sequence_ai_ros`, off PATH. This builds a real venv, does not
upgrade its pip, installs a copy of the source tree and runs the command from the venv's bin.
colcon does not run setup.py (the ROS package is ament_cmake): test_colcon_build.py builds that.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOT_SOURCE = (".venv*", ".git", "build", "install", "log", "*.egg-info", "__pycache__", "*_cache")
# .ros-ws/src/sequence_ai_ros links back to the repository: followed, the copy would not end
NOT_SOURCE += (".hypothesis", "results", ".ros-ws")


def _python310() -> str | None:
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.10.*/bin/python3.10")))
    candidates += [path for path in (shutil.which("python3.10"),) if path]
    if sys.version_info[:2] == (3, 10):
        candidates.append(getattr(sys, "_base_executable", sys.executable))
    for candidate in candidates:
        probe = subprocess.run(
            # Debian ships ensurepip (which venv needs for pip) in python3-venv
            [candidate, "-c", "import sys, ensurepip; print(sys.version_info[:2] == (3, 10))"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.stdout.strip() == "True":
            return candidate
    return None


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The source tree as a fresh clone has it (no venv, no build leftovers)."""
    target = tmp_path_factory.mktemp("clone") / "sequence_ai_ros"
    shutil.copytree(ROOT, target, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    return target


@pytest.fixture(scope="module")
def stock_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    python = _python310()
    if python is None:
        pytest.skip("no Python 3.10 with venv support (python3-venv) on this machine")
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=120)
    return venv


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=420, **kwargs
    )  # type: ignore[call-overload, no-any-return]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("ros_sourced", [False, True], ids=["plain", "ros-sourced"])
def test_pip_install_puts_sequence_ai_on_path(
    source_copy: Path, stock_venv: Path, ros_sourced: bool
) -> None:
    env = dict(os.environ)
    if ros_sourced:  # pip in a shell where ROS 2 is sourced still builds a normal wheel
        env["AMENT_PREFIX_PATH"] = "/opt/ros/humble"
    python = str(stock_venv / "bin" / "python")
    command = [python, "-m", "pip", "install", "-q", "."]
    if ros_sourced:  # the second install in this venv: replace the first, deps are there
        command += ["--force-reinstall", "--no-deps"]
    pip = _run(command, cwd=source_copy, env=env)
    assert pip.returncode == 0, pip.stderr[-3000:]
    assert "legacy 'setup.py install'" not in pip.stderr
    command = stock_venv / "bin" / "sequence-ai"
    assert command.is_file(), sorted(p.name for p in (stock_venv / "bin").iterdir())
    assert not (stock_venv / "lib" / "sequence_ai_ros").exists()
    record = next(stock_venv.glob("lib/python3*/site-packages/sequence_ai_ros-*/RECORD"))
    assert record.read_text().count("bin/sequence-ai,") == 1  # one script, not two
    helped = _run([str(command), "--help"])
    assert helped.returncode == 0, helped.stderr
    assert "models" in helped.stdout and "sim" in helped.stdout
    # The import name differs from the distribution name; both must be what docs/python.md says.
    shown = _run([str(stock_venv / "bin" / "python"), "-m", "pip", "show", "sequence_ai_ros"])
    assert shown.returncode == 0 and "Name: sequence" in shown.stdout
    imported = _run([str(stock_venv / "bin" / "python"), "-c", "import sequence_ai_core"])
    assert imported.returncode == 0, imported.stderr
    # The simulator: a package of its own in the same distribution, typed, runnable as a module.
    sim_help = _run([python, "-m", "sequence_ai_sim", "--help"])
    assert sim_help.returncode == 0, sim_help.stderr
    assert "--cold-start" in sim_help.stdout
    # ... and `sequence-ai sim`, which the client's command loads from it by name.
    sim_command = _run([str(command), "sim", "--help"])
    assert sim_command.returncode == 0 and "--cold-start" in sim_command.stdout, sim_command.stderr
    assert "sequence_ai_sim/py.typed," in record.read_text()
    site = next(stock_venv.glob("lib/python3*/site-packages"))
    # The output types are a subpackage: the node's registry is empty without it.
    installed = {p.name for p in (site / "sequence_ai_ros" / "outputs").glob("*.py")}
    shipped = {p.name for p in (source_copy / "sequence_ai_ros" / "outputs").glob("*.py")}
    assert installed == shipped and "joint_state.py" in installed
    # The interfaces are generated by colcon only: pip installs no stale or empty copy of them.
    assert not [p for p in ("msg", "srv", "action") if (site / "sequence_ai_ros" / p).exists()]
    share = stock_venv / "share" / "sequence_ai_ros"
    for folder in ("launch", "config"):  # pip byte-compiles the launch files: files only
        names = {p.name for p in (share / folder).iterdir() if p.is_file()}
        assert names == {p.name for p in (source_copy / folder).iterdir()}, folder
    # No openpi extra here: its profiles import, a ws:// URL names the extra to install.
    script = (
        "import importlib.util, sequence_ai_core as s\n"
        "from sequence_ai_core.openpi import BUILTIN\n"
        "assert importlib.util.find_spec('websockets') is None, 'websockets installed'\n"
        "try: s.connect('ws://127.0.0.1:8000', profile='droid')\n"
        "except s.SequencesError as e: print(e)\n"
    )
    openpi = _run([str(stock_venv / "bin" / "python"), "-c", script])
    assert openpi.returncode == 0 and "sequence_ai_ros[openpi]" in openpi.stdout, openpi.stderr
