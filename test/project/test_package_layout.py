"""The layout holds: the tree in docs/contributing.md is the tree, nothing reaches into
another object's private members across the simulator's modules, and nothing is defined that
nothing uses.
Which way the packages import one another is test_import_graph.py's.

Read from the sources (ast).
"""

from __future__ import annotations

import ast
import importlib

from support.import_graph import ROOT, modules

CORE, SIM = "sequence_ai_core", "sequence_ai_sim"


def test_the_simulator_left_no_compatibility_package_in_the_client() -> None:
    assert not (ROOT / CORE / "sim").exists()


def test_simulator_modules_use_no_other_objects_private_members() -> None:
    offenders = []
    for module, path in modules(SIM).items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            ):
                continue
            offenders.append(f"{module}:{node.lineno} .{node.attr}")
    assert offenders == []


CONTRIBUTING = ROOT / "docs" / "contributing.md"


def _layout_block() -> list[str]:
    page = CONTRIBUTING.read_text(encoding="utf-8")
    section = page.split("\n## Layout\n", 1)[1]
    return section.split("```\n", 2)[1].splitlines()


def test_the_documented_layout_matches_the_tree() -> None:
    listed: set[str] = set()
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
        for module, path in modules(package).items():
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
    sources = [path for package in PACKAGES for path in modules(package).values()]
    sources += sorted((ROOT / "test").rglob("*.py")) + sorted((ROOT / "bench").rglob("*.py"))
    used: set[str] = set()
    for path in sources:
        used |= _referenced(ast.parse(path.read_text(encoding="utf-8")))
    unused = []
    for package in (CORE, SIM):
        for module, path in modules(package).items():
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


def test_the_layout_lists_every_layer_and_shared_module_of_the_client() -> None:
    """The client's table in docs/contributing.md is its tree: each folder a layer, each
    top-level module shared by them; nothing listed that is not there, nothing there that is
    not."""
    page = CONTRIBUTING.read_text(encoding="utf-8")
    block = page.split("Inside `sequence_ai_core`", 1)[1].split("```\n", 2)[1]
    listed = {
        name.rstrip("/")
        for line in block.splitlines()
        for name in line.split("  ", 1)[0].split()
    }
    package = ROOT / CORE
    there = {p.name for p in package.glob("*.py")} | {
        p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }
    assert listed == there - {"_version.py"}


def test_every_interface_is_generated_with_what_it_uses_declared() -> None:
    """Each file in msg/, srv/ and action/ is listed for rosidl in CMakeLists.txt, and every
    message package its fields use is a DEPENDENCY there and a <depend> of package.xml
    (rosdep installs it; colcon orders the build by it)."""
    cmake = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    manifest = (ROOT / "package.xml").read_text(encoding="utf-8")
    files = sorted(p for folder in ("msg", "srv", "action") for p in (ROOT / folder).iterdir())
    assert files and all(f'"{p.relative_to(ROOT)}"' in cmake for p in files)
    generate = cmake.split("rosidl_generate_interfaces(", 1)[1].split(")", 1)[0]
    dependencies = set(generate.split("DEPENDENCIES", 1)[1].split())
    used = set()
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            words = line.split("#", 1)[0].split()
            if words and "/" in words[0]:
                used.add(words[0].split("/", 1)[0])
    assert used and used <= dependencies
    depends = {name for name in dependencies | {"action_msgs"}
               if f"<depend>{name}</depend>" in manifest}  # fmt: skip
    assert depends == dependencies | {"action_msgs"}  # actions need action_msgs
    assert "<member_of_group>rosidl_interface_packages</member_of_group>" in manifest
