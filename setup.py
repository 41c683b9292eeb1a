"""``pip install .``: the client ``sequence_ai_core``, the simulator ``sequence_ai_sim``, the
ROS node's Python package ``sequence_ai_ros`` and the ``sequence-ai`` command, with no ROS
installed.

colcon does not run this file: the ROS package is ``ament_cmake`` (CMakeLists.txt), which
generates the interfaces in msg/, srv/ and action/ and installs these same Python packages,
the executables, and the launch and config files itself. What pip installs has no generated
``sequence_ai_ros.msg`` / ``.srv`` / ``.action``, so the node runs from a colcon build only.

pip (any version: the project has a pyproject.toml) always builds a wheel, so
``sequence-ai`` goes to the environment's bin. The launch and config files and package.xml
go under share/ as in a ROS install, and the ament index entry with them.
"""

import re
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "sequence_ai_ros"
HERE = Path(__file__).resolve().parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "sequence_ai_core" / "_version.py").read_text()
).group(1)


def _shipped(pattern: str) -> list[str]:
    return sorted(str(path.relative_to(HERE)) for path in HERE.glob(pattern))


DATA_FILES = [
    ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
    (f"share/{PACKAGE}", ["package.xml"]),
    (f"share/{PACKAGE}/launch", _shipped("launch/*.launch.py")),
    (f"share/{PACKAGE}/config", _shipped("config/*.yaml")),
]

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
        # The flight recorder (``run(record=)``, the node's ``record_dir``) and its report
        # (``sequence-ai report BAG``), imported only when used.
        "record": ["rosbags>=0.11"],
        "report": ["rosbags>=0.11", "matplotlib>=3.5"],
        "test": [
            "pytest>=7",
            "pytest-timeout>=2.1",
            # the suite's tests mostly wait (on a simulated model, a subprocess, a socket):
            # `make test` runs them side by side
            "pytest-xdist>=3.0",
            "hypothesis>=6.50",
            "mypy>=1.8",
            "ruff>=0.4",
            "rosbags>=0.11",
            # an independent reader of the recorder's bags (test_recording.py)
            "mcap>=1.1",
            "mcap-ros2-support>=0.5",
            "PyYAML>=6",
            "types-PyYAML",
            # The released client this package descends from, run against the simulator as a
            # peer (test/core/test_compat_010.py). It installs a `sequence-ai` script of its own;
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
    entry_points={"console_scripts": ["sequence-ai = sequence_ai_core.tools.cli:main"]},
)
