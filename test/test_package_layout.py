"""The layout holds: ``sequence_ai_core`` is the client alone, the simulator a package of its
own whose modules import one another in one direction, nothing reaches into another
object's private members across the simulator's modules, and nothing is defined that nothing
uses.

Read from the sources (ast), and checked for real by importing every module in a fresh
interpreter.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE, SIM = "sequence_ai_core", "sequence_ai_sim"
#: Core modules that start the simulator, for the demo; they may import it, inside a function
#: only. (`sequence-ai sim` loads the simulator's command by name.)
ENTRY_POINTS = {f"{CORE}.demo"}


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
    assert {f"{CORE}.demo"} <= lazy_users  # the check sees the lazy imports
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


PACKAGES = (CORE, SIM, "sequence_ai_ros")


def _module_level_names(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return names


def _referenced(tree: ast.AST) -> set[str]:
    """Every name read, attribute used or word of a string constant in ``tree``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rpartition(".")[2])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(node.value.replace(":", " ").replace(".", " ").split())
    return found


def test_every_private_module_level_name_is_used_in_its_module() -> None:
    unused = []
    for package in PACKAGES:
        for module, path in _modules(package).items():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            used = _referenced(tree)
            unused += [
                f"{module}.{name}"
                for name in _module_level_names(tree)
                if name.startswith("_") and not name.startswith("__") and name not in used
            ]
    assert unused == []


def test_every_method_of_the_client_and_the_simulator_is_used() -> None:
    """Used somewhere in the packages, the tests or the benchmarks, or an override of a base
    class's method (``http.server`` also calls ``do_<METHOD>`` by name)."""
    sources = [path for package in PACKAGES for path in _modules(package).values()]
    sources += sorted((ROOT / "test").rglob("*.py")) + sorted((ROOT / "bench").rglob("*.py"))
    used: set[str] = set()
    for path in sources:
        used |= _referenced(ast.parse(path.read_text(encoding="utf-8")))
    unused = []
    for package in (CORE, SIM):
        for module, path in _modules(package).items():
            if module.endswith("__main__"):
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
            if not classes:
                continue
            loaded = importlib.import_module(module)
            for node in classes:
                cls = getattr(loaded, node.name)
                for item in node.body:
                    if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        continue
                    name = item.name
                    if name.startswith("__") or name in used or name.startswith("do_"):
                        continue
                    if any(hasattr(base, name) for base in cls.__mro__[1:]):
                        continue
                    unused.append(f"{module}.{node.name}.{name}")
    assert unused == []
