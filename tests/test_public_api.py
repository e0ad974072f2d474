"""The package's public names: every lazy export resolves and is visible to type checkers."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import sqla_ids


@pytest.mark.parametrize("name", sorted(sqla_ids._LAZY))
def test_lazy_export_resolves(name: str) -> None:
    value = getattr(sqla_ids, name)
    assert value is getattr(importlib.import_module(sqla_ids._LAZY[name]), name)


@pytest.mark.parametrize("name", sorted(set(sqla_ids.__all__) - {"__version__"}))
def test_public_callables_have_docstrings(name: str) -> None:
    value = getattr(sqla_ids, name)
    if inspect.isclass(value) or inspect.isroutine(value):
        assert (value.__doc__ or "").strip(), f"sqla_ids.{name} has no docstring"


def test_type_checking_imports_match_lazy_exports() -> None:
    tree = ast.parse(Path(sqla_ids.__file__).read_text(encoding="utf-8"))
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
    )
    seen = {
        alias.name: node.module
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == sqla_ids._LAZY


def test_unknown_attribute_is_a_clear_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sqla_ids.nope  # noqa: B018
