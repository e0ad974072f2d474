"""The identifier algorithms never import SQLAlchemy (architecture rule)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

PURE_MODULES = ["sqla_ids", "sqla_ids.identifiers", "sqla_ids.order_numbers"]


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_does_not_import_sqlalchemy(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not part of this checkout")
    code = (
        f"import sys, {module}; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic')); "
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "", f"{module} imported {result.stdout.strip()}"
