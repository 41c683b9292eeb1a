"""The node's surface on the client: ``sequence_ai_ros`` imports from ``sequence_ai_core``
(its public top level) and ``sequence_ai_core.node_api`` only, and ``node_api`` exports
exactly the names the node uses that the top level does not.

Read from the sources (ast): every import statement of the node package counts, at module
level, in a function or for typing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import sequence_ai_core
from sequence_ai_core import node_api

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "sequence_ai_ros"
TOP, API = "sequence_ai_core", "sequence_ai_core.node_api"

#: What the node needs of the client beyond its top level. A change here is a change of the
#: surface the node depends on: say why in the commit.
NODE_API = {
    "DEFAULT_IMAGE_HZ",
    "DEFAULT_QUALITY",
    "DEFAULT_SIZE",
    "FRESHNESS",
    "FlightRecorder",
    "FloatArray",
    "HANDOVERS",
    "MAX_CONTROL_HZ",
    "MIN_CONTROL_HZ",
    "InvalidSetting",
    "Journal",
    "RecordConfig",
    "Label",
    "Pacer",
    "StopReason",
    "UNRECORDED",
    "connections_for",
    "find_space",
    "kind_of",
    "load_rosbags",
    "redact",
    "resolve_api_key",
    "space_named",
}


def core_imports() -> Iterator[tuple[str, str, str | None]]:
    """(where, module, name) for every import of the client in the node package; name is
    None for a plain ``import module``."""
    for path in sorted(NODE.rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == TOP:
                for alias in node.names:
                    yield f"{where}:{node.lineno}", node.module or "", alias.name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == TOP:
                        yield f"{where}:{node.lineno}", alias.name, None


def test_the_node_imports_the_client_only_through_its_two_surfaces() -> None:
    found = list(core_imports())
    elsewhere = [f"{where} {module}" for where, module, name in found if module not in (TOP, API)]
    assert elsewhere == []
    plain = [f"{where} import {module}" for where, module, name in found if name is None]
    assert plain == []
    assert {module for _, module, _ in found} == {TOP, API}  # both used: the reader is right


def test_the_node_api_exports_exactly_what_the_node_uses() -> None:
    found = list(core_imports())
    from_api = {name for _, module, name in found if module == API}
    from_top = {name for _, module, name in found if module == TOP}
    assert set(node_api.__all__) == NODE_API
    assert from_api == NODE_API  # nothing exported that the node does not use, nor missing
    assert from_top <= set(sequence_ai_core.__all__)  # the top level's public names only
    # one way to each name: what the top level exports, the node takes from there
    assert NODE_API.isdisjoint(sequence_ai_core.__all__)
    assert all(hasattr(node_api, name) for name in NODE_API)
