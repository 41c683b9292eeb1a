"""One setup.py for two audiences.

colcon builds it as the ament_python package ``sequence_ai_ros`` (see setup.cfg for the ament
script directory); ``pip install .`` gives plain Python users ``sequence_ai_core`` and the
``sequence-ai`` command without any ROS installed.
"""

import os
import re
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "sequence_ai_ros"
HERE = Path(__file__).parent
VERSION = re.search(
    r'__version__ = "([^"]+)"', (HERE / "sequence_ai_core" / "_version.py").read_text()
).group(1)

# The node executables only make sense where ROS 2 is sourced (colcon always builds so);
# a plain `pip install .` gets the `sequence-ai` command alone.
CONSOLE_SCRIPTS = ["sequence-ai = sequence_ai_core.cli:main"]
if os.environ.get("AMENT_PREFIX_PATH"):
    CONSOLE_SCRIPTS += [
        "policy_node = sequence_ai_ros.policy_node:main",
        "sim_arm_node = sequence_ai_ros.sim_arm_node:main",
    ]

setup(
    name=PACKAGE,
    version=VERSION,
    description="Cloud robot-policy client and ROS 2 lifecycle node with chunk prefetch and safety",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["sequence_ai_core", "sequence_ai_core.*", PACKAGE]),
    package_data={"sequence_ai_core": ["py.typed"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["httpx>=0.23", "numpy>=1.21", "Pillow>=9.0"],
    extras_require={
        "test": [
            "pytest>=7",
            "pytest-timeout>=2.1",
            "hypothesis>=6.50",
            "mypy>=1.8",
            "ruff>=0.4",
            "rosbags>=0.9.20",
            "PyYAML>=6",
            "types-PyYAML",
        ],
        "bench": ["matplotlib>=3.5"],
    },
    zip_safe=True,
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
