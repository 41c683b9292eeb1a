"""The import graph of the three packages, read from their sources with ``ast``.

Every import statement counts, wherever it is: at module level, inside a function (a lazy
import is still a dependency; it runs the first time the function does) or under
``if TYPE_CHECKING:`` (the type checker follows it). Relative imports are resolved against the
importing module's package, and ``from package import name`` is an import of the submodule
``package.name`` when there is one, else of ``package``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sequence_ai_core", "sequence_ai_sim", "sequence_ai_ros")
MODULE_LEVEL, IN_FUNCTION, TYPE_CHECKING_ONLY = "at module level", "in a function", "for typing"


@dataclass(frozen=True)
class Import:
    """One module imported by another: where, and when it runs."""

    importer: str
    imported: str
    line: int
    when: str

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} imports {self.imported} {self.when}"


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (its ``__init__`` as the package's own name) and its file."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def all_modules() -> dict[str, Path]:
    return {name: path for package in PACKAGES for name, path in modules(package).items()}


def _ids_under(nodes: Iterable[ast.AST]) -> set[int]:
    return {id(inner) for node in nodes for inner in ast.walk(node)}


def _type_checking_blocks(tree: ast.AST) -> list[ast.stmt]:
    """The statements under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``)."""
    blocks: list[ast.stmt] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            blocks += node.body
    return blocks


def _base(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` names, relative dots resolved."""
    if not node.level:
        return node.module or ""
    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*anchor, node.module] if node.module else anchor)


def imports(module: str, source: str, *, is_package: bool, known: Iterable[str]) -> list[Import]:
    """Every module ``source`` (module ``module``) imports, once per statement; ``known``: the
    tree's modules, which ``from package import name`` may name."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    known = set(known)
    in_function = _ids_under(
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    )
    for_typing = _ids_under(_type_checking_blocks(tree))
    found: dict[tuple[str, int], Import] = {}
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        when = (
            IN_FUNCTION
            if id(node) in in_function
            else TYPE_CHECKING_ONLY
            if id(node) in for_typing
            else MODULE_LEVEL
        )
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = _base(node, package)
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        for name in names:
            found.setdefault((name, node.lineno), Import(module, name, node.lineno, when))
    return sorted(found.values(), key=lambda each: (each.line, each.imported))


def every_import() -> list[Import]:
    """Every import in the three packages."""
    known = all_modules()
    return [
        each
        for name, path in known.items()
        for each in imports(
            name,
            path.read_text(encoding="utf-8"),
            is_package=path.name == "__init__.py",
            known=known,
        )
    ]


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def graph(found: Iterable[Import], known: Iterable[str]) -> dict[str, set[str]]:
    """Module -> the modules of the tree it imports (itself left out)."""
    edges: dict[str, set[str]] = {name: set() for name in known}
    for each in found:
        if each.imported in edges and each.imported != each.importer:
            edges[each.importer].add(each.imported)
    return edges


def cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle through each group of modules that import one another (a strongly connected
    component), as a path that ends where it starts; empty when the graph has none."""
    return [_cycle_within(group, edges) for group in _strongly_connected(edges) if len(group) > 1]


def _strongly_connected(edges: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (no recursion limit), visiting in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)

    for root in sorted(edges):
        if root in index:
            continue
        enter(root)
        work = [(root, iter(sorted(edges[root])))]
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None and target not in index:
                enter(target)
                work.append((target, iter(sorted(edges[target]))))
            elif target is not None:
                if target in stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set(stack[stack.index(node) :])
                    del stack[stack.index(node) :]
                    groups.append(group)
    return sorted(groups, key=min)


def _cycle_within(group: set[str], edges: Mapping[str, set[str]]) -> list[str]:
    """The shortest path from the group's first module back to itself (breadth first)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges[node] & group):
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if target not in came_from:
                    came_from[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle within {sorted(group)}")  # a component always has one


def reachable(start: str, edges: Mapping[str, set[str]]) -> dict[str, list[str]]:
    """Every module ``start`` loads, directly or through others, with one import path to it."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(edges[node]):
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    return paths
