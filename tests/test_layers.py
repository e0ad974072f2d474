"""Data flows one way (architecture rule): pure algorithms -> per-database SQL ->
types and DDL -> migration engine -> Alembic operations -> CLI.

The top-level ``sqla_ids`` package is the facade over all of them. Checked on
the source: every ``import`` of a ``sqla_ids`` module, at module level
or inside a function, except those only seen by type checkers
(``if TYPE_CHECKING:``). Strings naming modules (``import_module("sqla_ids…")``)
are not allowed outside the package's lazy top-level table.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "sqla_ids"

# Layer of each part of the package, lowest first; a module may import its
# own layer and lower ones only. A module's layer is that of the longest
# prefix naming it (``sqla_ids.migration.core.model`` is in the engine's core,
# below its backends, below its runners).
LAYERS: list[tuple[str, ...]] = [
    ("sqla_ids.errors", "sqla_ids.identifiers", "sqla_ids.order_numbers"),
    ("sqla_ids.dialects",),
    ("sqla_ids.types",),
    ("sqla_ids.migration.core",),
    ("sqla_ids.migration.backends",),
    ("sqla_ids.migration",),
    ("sqla_ids.tools", "sqla_ids.alembic", "sqla_ids.integrations"),
    ("sqla_ids.cli", "sqla_ids.demo"),
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    matches = [
        (len(prefix), level)
        for level, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches)[1] if matches else -1


def _runtime_imports(tree: ast.Module) -> list[tuple[int, str]]:
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    found = []
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.append((node.lineno, submodule if submodule in MODULES else node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name.split(".")[0] == "sqla_ids"]


SOURCES = sorted(PACKAGE.rglob("*.py"))
MODULES = {_module_name(p) for p in SOURCES}


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once per worker for all these checks."""
    return ast.parse(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", [p for p in SOURCES if p != PACKAGE / "__init__.py"], ids=str)
def test_imports_only_go_down(path: Path) -> None:
    module = _module_name(path)
    level = _layer(module)
    tree = _tree(path)
    upward = [
        f"line {line}: {name}" for line, name in _runtime_imports(tree) if _layer(name) > level
    ]
    assert not upward, f"{module} imports a higher layer: {upward}"


def _graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports at run time (any line of it)."""
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        module = _module_name(path)
        tree = _tree(path)
        graph[module] = {name for _, name in _runtime_imports(tree) if name != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles (strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle() -> None:
    # The top-level facade (a lazy table) is left out: it names everything.
    graph = {m: deps - {"sqla_ids"} for m, deps in _graph().items() if m != "sqla_ids"}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_lower_layers_never_reach_the_migration_engine() -> None:
    """Directly or through any other module: dialects/ and types/ know nothing of it."""
    graph = _graph()
    for start in (m for m in graph if m.startswith(("sqla_ids.dialects", "sqla_ids.types"))):
        seen, todo = set(), [start]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        assert not [m for m in seen if m.startswith("sqla_ids.migration")], start


def test_no_module_is_reached_through_a_string() -> None:
    offenders = []
    for path in SOURCES:
        if path == PACKAGE / "__init__.py":  # the lazy table of top-level names
            continue
        for node in ast.walk(_tree(path)):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func).endswith("import_module")
                and node.args
                and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
                and "sqla_ids" in ast.unparse(node.args[0])
            ):
                offenders.append(f"{_module_name(path)}:{node.lineno}")
    assert not offenders


def test_layers_cover_every_module() -> None:
    unplaced = [_module_name(p) for p in SOURCES if _layer(_module_name(p)) < 0]
    assert unplaced in ([], ["sqla_ids"]), unplaced
