"""Parameter names that would put a secret into the parameter server, where ``ros2 param
dump`` and rosbag record it: the node refuses them (the key comes from the environment or a
0600 file)."""

from __future__ import annotations

import re
from collections.abc import Sequence

SECRET_NAME = re.compile(r"(api[_\-.]?key|secret|token|password|bearer|credential)", re.I)


def secret_parameter_names(names: Sequence[str]) -> list[str]:
    """Names that look like they carry a credential; the value is never looked at."""
    return [name for name in names if SECRET_NAME.search(name)]
