"""The package's public names: the curated top level and every namespace's ``__all__``.

The top level is a short, deliberate list (a literal below: adding a name is
a decision, not a side effect). Everything else is reached through its
namespace, each with an explicit ``__all__`` whose names resolve, are
documented and are visible to type checkers where they are imported lazily.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import sqla_ids

TOP_LEVEL = [
    # generating UUIDv7
    "UUIDv7Generator",
    "uuid7",
    "uuid7_batch",
    # reading UUIDs
    "UUIDFormatError",
    "is_uuid7",
    "parse_uuid",
    "to_base32",
    "uuid7_bounds",
    "uuid7_datetime",
    "uuid7_timestamp_ms",
    # column types and defaults
    "FormattedOrderNumber",
    "UUID192Type",
    "UUIDv7",
    "uuid7_default",
    "uuid7_pk",
    # the server-side UUIDv7 function
    "UUIDv7ServerDefault",
    "install_uuid7_function",
    "register_uuid7_function",
    "uuid7_function_ddl",
    # order numbers
    "OrderNumberCodec",
    # key migration
    "PkMigrationOptions",
    "migrate_pk_to_uuid7",
    "restore_pk_from_uuid7",
    "__version__",
]

NAMESPACES = [
    "sqla_ids.alembic",
    "sqla_ids.dialects",
    "sqla_ids.errors",
    "sqla_ids.identifiers",
    "sqla_ids.migration",
    "sqla_ids.order_numbers",
    "sqla_ids.tools",
    "sqla_ids.types",
]

# (namespace, name) for every public name of every namespace.
NAMESPACE_NAMES = [
    (namespace, name)
    for namespace in NAMESPACES
    for name in importlib.import_module(namespace).__all__
]


def _type_checking_imports(module: ModuleType) -> dict[str, str]:
    """Name -> module of the imports under ``if TYPE_CHECKING:`` in ``module``'s source."""
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    guarded = [
        node
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    ]
    return {
        alias.asname or alias.name: node.module
        for block in guarded
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def test_top_level_is_the_curated_list() -> None:
    assert sorted(sqla_ids.__all__) == sorted(TOP_LEVEL)
    assert len(sqla_ids.__all__) == len(set(sqla_ids.__all__))


@pytest.mark.parametrize("name", sorted(sqla_ids._LAZY))
def test_lazy_export_resolves(name: str) -> None:
    value = getattr(sqla_ids, name)
    assert value is getattr(importlib.import_module(sqla_ids._LAZY[name]), name)


@pytest.mark.parametrize("name", sorted(set(TOP_LEVEL) - {"__version__"}))
def test_top_level_name_is_its_namespace_object(name: str) -> None:
    # Each top-level name is also public in its namespace, as the same object.
    value = getattr(sqla_ids, name)
    homes = [ns for ns, public in NAMESPACE_NAMES if public == name]
    assert homes, f"sqla_ids.{name} is in no namespace's __all__"
    for namespace in homes:
        assert getattr(importlib.import_module(namespace), name) is value


def test_type_checking_imports_match_lazy_exports() -> None:
    assert _type_checking_imports(sqla_ids) == sqla_ids._LAZY


def test_tools_type_checking_imports_match_its_names() -> None:
    tools = importlib.import_module("sqla_ids.tools")  # its names are lazy as well
    seen = _type_checking_imports(tools)
    assert sorted(seen) == sorted(tools.__all__)
    for name, module in seen.items():
        assert getattr(tools, name) is getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_namespace_all_has_no_repeats(namespace: str) -> None:
    names = importlib.import_module(namespace).__all__
    assert len(names) == len(set(names)), f"{namespace}.__all__ repeats a name"


@pytest.mark.parametrize(
    ("namespace", "name"), NAMESPACE_NAMES, ids=[f"{ns}.{name}" for ns, name in NAMESPACE_NAMES]
)
def test_namespace_name_resolves_and_is_documented(namespace: str, name: str) -> None:
    package = importlib.import_module(namespace)
    # Every submodule imported first: a public name must not be shadowed by a
    # submodule of the same name (``from package import name`` would differ).
    if hasattr(package, "__path__"):
        for info in pkgutil.iter_modules(package.__path__, prefix=f"{namespace}."):
            importlib.import_module(info.name)
    value = getattr(package, name)
    assert not isinstance(value, ModuleType), f"{namespace}.{name} is a module"
    if inspect.isclass(value) or inspect.isroutine(value):
        assert (value.__doc__ or "").strip(), f"{namespace}.{name} has no docstring"


@pytest.mark.parametrize("name", sorted(set(TOP_LEVEL) - {"__version__"}))
def test_public_callables_have_docstrings(name: str) -> None:
    value = getattr(sqla_ids, name)
    if inspect.isclass(value) or inspect.isroutine(value):
        assert (value.__doc__ or "").strip(), f"sqla_ids.{name} has no docstring"


def test_unknown_attribute_is_a_clear_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sqla_ids.nope  # noqa: B018
    tools = importlib.import_module("sqla_ids.tools")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tools.nope  # noqa: B018
