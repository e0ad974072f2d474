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
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "sqla_ids"

# Layer of each part of the package, lowest first; a module may import its
# own layer and lower ones only.
LAYERS: list[tuple[str, ...]] = [
    ("sqla_ids.errors", "sqla_ids.identifiers", "sqla_ids.order_numbers"),
    ("sqla_ids.dialects",),
    ("sqla_ids.types",),
    ("sqla_ids.migration", "sqla_ids.dialects.*.migration", "sqla_ids.dialects.*.online"),
    ("sqla_ids.tools", "sqla_ids.alembic", "sqla_ids.integrations"),
    ("sqla_ids.cli", "sqla_ids.demo"),
]

# The migration's data and shared pieces: each database's migration code
# builds on them, so they must not reach the registry (no cycle).
MIGRATION_BASE = [
    "sqla_ids.migration.model",
    "sqla_ids.migration.options",
    "sqla_ids.migration.analysis",
    "sqla_ids.migration.strategies",
    "sqla_ids.migration.mapping",
    "sqla_ids.migration.state",
    "sqla_ids.migration.progress",
    "sqla_ids.migration.reflected",
    "sqla_ids.migration.dialect",
]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    found = -1
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            head, _, tail = prefix.partition(".*.")
            if tail:
                rest = module.removeprefix(head + ".").split(".")
                hit = module.startswith(head + ".") and len(rest) >= 2 and rest[1] == tail
            else:
                hit = module == prefix or module.startswith(prefix + ".")
            if hit:
                found = max(found, level)
    return found


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
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return [(line, name) for line, name in found if name.split(".")[0] == "sqla_ids"]


SOURCES = sorted(PACKAGE.rglob("*.py"))


def _same_database(module: str, name: str) -> bool:
    # A database hands out its concern objects (``Database.migration()``…),
    # importing its own sibling modules on first use: one registry, no strings.
    parts = module.split(".")
    return parts[:2] == ["sqla_ids", "dialects"] and name.startswith(".".join(parts[:3]) + ".")


@pytest.mark.parametrize("path", [p for p in SOURCES if p != PACKAGE / "__init__.py"], ids=str)
def test_imports_only_go_down(path: Path) -> None:
    module = _module_name(path)
    level = _layer(module)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    upward = [
        f"line {line}: {name}"
        for line, name in _runtime_imports(tree)
        if _layer(name) > level and not _same_database(module, name)
    ]
    assert not upward, f"{module} imports a higher layer: {upward}"


@pytest.mark.parametrize("module", MIGRATION_BASE)
def test_migration_base_does_not_reach_the_registry(module: str) -> None:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    names = [name for _, name in _runtime_imports(ast.parse(path.read_text(encoding="utf-8")))]
    assert not [n for n in names if n.startswith("sqla_ids.dialects")], names


def test_no_module_is_reached_through_a_string() -> None:
    offenders = []
    for path in SOURCES:
        if path == PACKAGE / "__init__.py":  # the lazy table of top-level names
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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
