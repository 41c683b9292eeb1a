"""Make PyPI's ROS 2 wheels' CMake exports point at this interpreter, so colcon can build.

The message packages' exported CMake files name the wheel builder's Python headers and numpy
(``/opt/python/cp3xx-cp3xx/...``); a package that generates Python interfaces against them
fails to configure. Rewritten in place, once per venv (a second run finds nothing to change).
Run with the venv's own Python: ``python -m support.realros.fix_wheel_cmake`` or this file's path.
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

import numpy

BUILDER = re.compile(r"/opt/python/cp3\d+-cp3\d+(/[^;\"\s)]*)?")


def replacement(match: re.Match[str]) -> str:
    rest = match.group(1) or ""
    if "numpy" in rest and rest.rstrip("/").endswith("include"):
        return numpy.get_include()
    if rest.startswith("/include/"):
        return sysconfig.get_paths()["include"]
    return sys.prefix + rest


def main() -> int:
    changed = 0
    for path in (Path(sys.prefix) / "share").glob("*/cmake/*.cmake"):
        text = path.read_text(encoding="utf-8")
        fixed = BUILDER.sub(replacement, text)
        if fixed != text:
            path.write_text(fixed, encoding="utf-8")
            changed += 1
    print(f"{changed} CMake files of the ROS wheels now name {sys.prefix}'s Python")
    return 0


if __name__ == "__main__":
    sys.exit(main())
