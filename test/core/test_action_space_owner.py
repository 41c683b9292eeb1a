"""One owner per fact: outside ``sequence_ai_core.action_spaces`` no code decides anything by
an action space's name (a comparison, a prefix or suffix test, a set or a dict of names),
so a new rule has to read the table. Read from the sources (ast)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sequence_ai_core.action_spaces import ACTION_SPACES

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("sequence_ai_core", "sequence_ai_sim", "sequence_ai_ros", "bench")
TABLE = ROOT / "sequence_ai_core" / "action_spaces.py"


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _texts(node: ast.AST | None) -> list[str]:
    """The string constants of ``node`` itself or of the literal collection it is."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [t for t in map(_text, node.elts) if t is not None]
    if isinstance(node, ast.Dict):
        return [t for t in map(_text, node.keys) if t is not None]
    text = _text(node)
    return [] if text is None else [text]


def _part_of_a_name(text: str) -> bool:
    """``joint``, ``_delta``, ``ee_``: a piece a rule could recognise spaces by."""
    return len(text) >= 2 and any(text in name for name in ACTION_SPACES)


def _affix_rule(node: ast.Call) -> bool:
    if not isinstance(node.func, ast.Attribute) or not node.args:
        return False
    method = node.func.attr
    pieces = _texts(node.args[0])
    if method in ("startswith", "removeprefix"):
        return any(name.startswith(p) for p in pieces for name in ACTION_SPACES)
    if method in ("endswith", "removesuffix"):
        return any(name.endswith(p) for p in pieces for name in ACTION_SPACES)
    return False


def _compare_rule(node: ast.Compare) -> bool:
    operands = [node.left, *node.comparators]
    if any(t in ACTION_SPACES for operand in operands for t in _texts(operand)):
        return True  # == "joint_absolute", in ("joint_delta", ...)
    left = _text(node.left)
    searches = any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
    return searches and left is not None and _part_of_a_name(left)  # "joint" in space


def scattered_rules(source: str) -> list[int]:
    """Lines of ``source`` that decide something by an action space's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            hit = _compare_rule(node)
        elif isinstance(node, ast.Call):
            hit = _affix_rule(node)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
            hit = any(t in ACTION_SPACES for t in _texts(node))  # a set or a table of names
        elif isinstance(node, ast.MatchValue):
            hit = _text(node.value) in ACTION_SPACES
        else:
            hit = False
        if hit:
            found.append(getattr(node, "lineno", 0))
    return found


def test_no_rule_outside_the_table_decides_by_a_space_name() -> None:
    offenders = []
    for package in SCANNED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == TABLE:
                continue
            lines = scattered_rules(path.read_text(encoding="utf-8"))
            offenders += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert offenders == []


@pytest.mark.parametrize(
    "rule",
    [
        'joint = action_space.startswith("joint")',
        "joint = action_space.startswith(('ee_', 'x'))",
        'velocity = action_space.endswith("_velocity")',
        'first = action_space == "joint_absolute"',
        'moving = action_space != "joint_velocity"',
        'skips = action_space in ("joint_absolute", "joint_velocity")',
        'joint = "joint" in action_space',
        'DELTAS = frozenset({"joint_delta", "ee_delta"})',
        'UNITS = {"joint_velocity": "rad/s"}',
        'match action_space:\n    case "ee_delta":\n        pass',
    ],
)
def test_the_scan_finds_a_scattered_rule(rule: str) -> None:
    assert scattered_rules(rule)


@pytest.mark.parametrize(
    "use",
    [
        'velocity = kind_of(action_space) == "velocity"',  # a rule reading the table
        'absolute = space.kind in ("absolute",)',
        'model = SimModel("arm", "joint_velocity", 8)',  # data naming its space
        'profile = Profile(action_space="ee_delta")',
        'droid = encoding.startswith("bgr") or "joint_positions" in fields',
    ],
)
def test_the_scan_leaves_data_and_table_reads_alone(use: str) -> None:
    assert scattered_rules(use) == []
