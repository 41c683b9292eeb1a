"""One setup.py for two audiences.

colcon builds it as the ament_python package ``sequence_ai_ros``; ``pip install .`` gives plain
Python users ``sequence_ai_core``, the simulator ``sequence_ai_sim`` and the ``sequence-ai``
command without any ROS installed.

The two differ only in where executables go, and that is decided here rather than in
setup.cfg, because setup.cfg applies to every build: its ``[install] install_scripts`` put
``sequence-ai`` in ``<venv>/lib/sequence_ai_ros`` (off PATH) for a plain ``pip install .``.

What tells them apart is how setup.py runs, not the shell it runs in. pip (any version: the
project has a pyproject.toml) always builds a wheel. colcon runs ``setup.py install`` itself,
or ``setup.py develop --editable`` for ``--symlink-install``, and it does so whether or not ROS
is sourced (a Dockerfile's ``RUN colcon build`` often is not), so a ROS environment variable
cannot be the signal: with one, an unsourced build installed no nodes and said nothing.
"""

import re
import sys
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "sequence_ai_ros"
# colcon --symlink-install runs setup.py from build/<package>/, through a link to this file,
# where only the packages and data files are linked: everything else is read from the source.
HERE = Path(__file__).resolve().parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "sequence_ai_core" / "_version.py").read_text()
).group(1)

# pip builds a wheel (its scripts go to the environment's bin). Any other run is colcon's (or
# a person's running setup.py as colcon does), its introspection run included, which must see
# the same data files: `ros2 run` looks for executables in lib/<package>, and colcon puts
# <prefix>/bin on PATH, so `sequence-ai` goes to both. A `setup.py develop` without
# --editable is pip's fallback for `pip install -e .` on a setuptools without PEP 660
# (Humble's 59.6): its scripts stay in bin.
WHEEL_BUILD = any(command in sys.argv for command in ("bdist_wheel", "dist_info", "editable_wheel"))
PIP_DEVELOP = "develop" in sys.argv and "--editable" not in sys.argv
ROS_LAYOUT = not WHEEL_BUILD and not PIP_DEVELOP
CONSOLE_SCRIPTS = ["sequence-ai = sequence_ai_core.tools.cli:main"]
COMMAND_OPTIONS: dict[str, dict[str, str]] = {}


def _shipped(pattern: str) -> list[str]:
    """Data files by path relative to the source, found there (not in colcon's build dir)."""
    return sorted(str(path.relative_to(HERE)) for path in HERE.glob(pattern))


DATA_FILES = [
    ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
    (f"share/{PACKAGE}", ["package.xml"]),
    (f"share/{PACKAGE}/launch", _shipped("launch/*.launch.py")),
    (f"share/{PACKAGE}/config", _shipped("config/*.yaml")),
]
if ROS_LAYOUT:
    CONSOLE_SCRIPTS += [
        "policy_node = sequence_ai_ros.policy_node:main",
        "sim_arm_node = sequence_ai_ros.sim_arm_node:main",
    ]
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
    # httpx 0.25 with httpcore 0.18 is the oldest tested (the Humble floor tier): httpcore's
    # network backends carry the deadlines, and the socket guard imports httpcore itself.
    # numpy and Pillow at Humble's own (1.21.5, 9.0.1). sequence_ai_core/dependencies.py
    # refuses an older httpx at import, with what to install.
    install_requires=["httpx>=0.25", "httpcore>=0.18", "numpy>=1.21", "Pillow>=9.0"],
    extras_require={
        # The openpi backend (ws:// and wss:// policy servers), imported only when used.
        # websockets 17 (Python >= 3.11) waits out a frame with a reserved opcode instead
        # of failing the connection, and deprecates connect() outside a with-block: 13-16 are
        # the tested releases.
        "openpi": ["websockets>=13,<17", "msgpack>=1.0"],
        # The flight recorder writes each episode as a rosbag2 bag (MCAP); the report
        # (`sequence-ai report BAG`) reads one back and draws it. Imported only when used.
        "record": ["rosbags>=0.11"],
        "report": ["rosbags>=0.11", "matplotlib>=3.5"],
        "test": [
            "pytest>=7",
            "pytest-timeout>=2.1",
            "hypothesis>=6.50",
            "mypy>=1.8",
            "ruff>=0.4",
            "rosbags>=0.11",
            # Read recorded bags as other MCAP tools do (the recorder's and report's tests).
            "mcap>=1.1",
            "mcap-ros2-support>=0.5",
            "PyYAML>=6",
            "types-PyYAML",
            # The released client this package descends from, run against the simulator as a
            # peer (test/test_compat_010.py). It installs a `sequence-ai` script of its own;
            # the Makefile reinstalls this package after the extras so ours is on PATH.
            "sequence-ai==0.1.0",
            # openpi's server and client (the openpi backend's peers) are installed by the
            # Makefile without their dependencies (openpi-client pins numpy < 2); these are
            # what they import.
            "websockets>=13,<17",
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
