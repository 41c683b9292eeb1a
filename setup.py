"""One setup.py for two audiences.

colcon builds it as the ament_python package ``sequence_ai_ros``; ``pip install .`` gives plain
Python users ``sequence_ai_core``, the simulator ``sequence_ai_sim`` and the ``sequence-ai``
command without any ROS installed.

The two differ only in where executables go, and that is decided here rather than in
setup.cfg, because setup.cfg applies to every build: its ``[install] install_scripts`` put
``sequence-ai`` in ``<venv>/lib/sequence_ai_ros`` (off PATH) for a plain ``pip install .``.
"""

import os
import re
import sys
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "sequence_ai_ros"
HERE = Path(__file__).parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "sequence_ai_core" / "_version.py").read_text()
).group(1)

# colcon builds where ROS 2 is sourced, running setup.py itself (not a wheel). There,
# `ros2 run` looks for executables in lib/<package>, and colcon puts <prefix>/bin on PATH,
# so `sequence-ai` goes to both. A plain `pip install .` gets the `sequence-ai` command
# alone, in the environment's bin.
ROS_SOURCED = bool(os.environ.get("AMENT_PREFIX_PATH"))
# pip (any version, through pyproject.toml) builds a wheel, whose scripts go to bin anyway.
WHEEL_BUILD = any(command in sys.argv for command in ("bdist_wheel", "dist_info", "editable_wheel"))
CONSOLE_SCRIPTS = ["sequence-ai = sequence_ai_core.cli:main"]
COMMAND_OPTIONS: dict[str, dict[str, str]] = {}
DATA_FILES = [
    ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
    (f"share/{PACKAGE}", ["package.xml"]),
    (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
    (f"share/{PACKAGE}/config", glob("config/*.yaml")),
]
if ROS_SOURCED:
    CONSOLE_SCRIPTS += [
        "policy_node = sequence_ai_ros.policy_node:main",
        "sim_arm_node = sequence_ai_ros.sim_arm_node:main",
    ]
if ROS_SOURCED and not WHEEL_BUILD:
    COMMAND_OPTIONS = {
        "develop": {"script_dir": f"$base/lib/{PACKAGE}"},
        "install": {"install_scripts": f"$base/lib/{PACKAGE}"},
    }
    DATA_FILES.append(("bin", ["scripts/sequence-ai"]))

setup(
    name=PACKAGE,
    version=VERSION,
    description="Cloud robot-policy client and ROS 2 lifecycle node with chunk prefetch and safety",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    # The client, the gateway simulator (a package of its own, in the same distribution) and
    # the ROS node.
    packages=find_packages(
        include=[
            "sequence_ai_core",
            "sequence_ai_core.*",
            "sequence_ai_sim",
            "sequence_ai_sim.*",
            PACKAGE,
            f"{PACKAGE}.*",
        ]
    ),
    package_data={"sequence_ai_core": ["py.typed"], "sequence_ai_sim": ["py.typed"]},
    data_files=DATA_FILES,
    # httpx 0.25 (httpcore 0.18) is the oldest tested: its network backends carry the deadlines
    install_requires=["httpx>=0.25", "numpy>=1.21", "Pillow>=9.0"],
    extras_require={
        # The openpi backend (ws:// and wss:// policy servers), imported only when used.
        "openpi": ["websockets>=13", "msgpack>=1.0"],
        "test": [
            "pytest>=7",
            "pytest-timeout>=2.1",
            "hypothesis>=6.50",
            "mypy>=1.8",
            "ruff>=0.4",
            "rosbags>=0.9.20",
            "PyYAML>=6",
            "types-PyYAML",
            # The released client this package descends from, run against the simulator as a
            # peer (test/test_compat_010.py). It installs a `sequence-ai` script of its own;
            # the Makefile reinstalls this package after the extras so ours is on PATH.
            "sequence-ai==0.1.0",
            # openpi's server and client (the openpi backend's peers) are installed by the
            # Makefile without their dependencies (openpi-client pins numpy < 2); these are
            # what they import.
            "websockets>=13",
            "msgpack>=1.0",
            "dm-tree>=0.1.8",
            "typing_extensions>=4",
        ],
        "bench": ["matplotlib>=3.5", "sequence-ai==0.1.0"],
    },
    zip_safe=True,
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
    options=COMMAND_OPTIONS,
)
