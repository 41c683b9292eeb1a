"""The layout holds: ``sequence_ai_core`` is the client alone, the simulator a package of its
own whose modules import one another in one direction, and nothing reaches into another
object's private members across the simulator's modules.

Read from the sources (ast), and checked for real by importing every module in a fresh
interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE, SIM = "sequence_ai_core", "sequence_ai_sim"
#: Core modules that start the simulator, for `sequence-ai sim`, the demo and the doctor;
#: they may import it, inside a function only.
ENTRY_POINTS = {f"{CORE}.cli", f"{CORE}.demo", f"{CORE}.doctor"}


def _modules(package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(module: str, path: Path) -> list[tuple[str, bool]]:
    """(imported module, at module level?) for every import statement in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    nested: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            nested.update(id(inner) for inner in ast.walk(node) if inner is not node)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) not in nested) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import name` may import the submodule pkg.name
            found.append((base, id(node) not in nested))
            found += [(f"{base}.{alias.name}", id(node) not in nested) for alias in node.names]
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_client_imports_the_simulator_only_lazily_in_its_entry_points() -> None:
    offenders = []
    lazy_users = set()
    for module, path in _modules(CORE).items():
        for imported, top_level in _imports(module, path):
            if not _within(imported, SIM):
                continue
            if top_level or module not in ENTRY_POINTS:
                offenders.append(f"{module} imports {imported}")
            lazy_users.add(module)
    assert offenders == []
    assert {f"{CORE}.cli", f"{CORE}.demo"} <= lazy_users  # the check sees the lazy imports
    assert not (ROOT / CORE / "sim").exists()  # no compatibility package left behind


def test_simulator_modules_import_in_one_direction() -> None:
    modules = _modules(SIM)
    graph = {
        module: {
            imported
            for imported, _ in _imports(module, path)
            if imported in modules and imported != module
        }
        for module, path in modules.items()
    }
    assert f"{SIM}.handler" in graph[f"{SIM}.server"]
    assert f"{SIM}.server" not in graph[f"{SIM}.handler"]
    # No cycle at all, lazy imports included (a depth-first search that finds no back edge).
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            assert state.get(target) != "open", " -> ".join([*path, target])
            if target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_simulator_modules_use_no_other_objects_private_members() -> None:
    offenders = []
    for module, path in _modules(SIM).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            ):
                continue
            offenders.append(f"{module}:{node.lineno} .{node.attr}")
    assert offenders == []


@pytest.mark.parametrize("package", [CORE, SIM])
def test_every_module_imports_and_the_client_never_loads_the_simulator(package: str) -> None:
    names = sorted(name for name in _modules(package) if not name.endswith("__main__"))
    script = "\n".join(
        [
            "import importlib, sys",
            f"for name in {names!r}:",
            "    importlib.import_module(name)",
            f"print('{SIM}' in sys.modules)",
        ]
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(package == SIM)


def _layout_block() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def test_the_readme_layout_matches_the_tree() -> None:
    listed = set()
    for line in _layout_block():
        paths = line.split("  ", 1)[0].split()
        listed.update(path.rstrip("/") for path in paths)
    missing = sorted(path for path in listed if not (ROOT / path).exists())
    assert missing == []
    built = ("build", "install", "log", "__pycache__")
    directories = {
        entry.name
        for entry in ROOT.iterdir()
        if entry.is_dir()
        and not entry.name.startswith(".")
        and not entry.name.endswith(".egg-info")
        and entry.name not in built
    }
    assert sorted(directories - listed) == []
    assert {CORE, SIM, "sequence_ai_ros"} <= listed
