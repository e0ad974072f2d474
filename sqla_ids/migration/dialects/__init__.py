"""Per-dialect pieces of the key migration: one module per database family.

Each module offers the same functions (``find_references``, ``find_blockers``,
``find_dependents``, ``column_type_sql``, ``key_default``, ``table_sql``) for
the planner, and either swap statements (PostgreSQL, MariaDB/MySQL: new
columns are filled, then swapped in) or a table rebuild (SQLite).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from sqla_ids.dialects import UnsupportedDialectError

_MODULES = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql", "sqlite": "sqlite"}


def for_dialect(name: str) -> ModuleType:
    """Return the key-migration module for the SQLAlchemy dialect ``name``."""
    try:
        module = _MODULES[name]
    except KeyError:
        raise UnsupportedDialectError(
            f"migrating keys to UUIDv7 is not supported on {name!r}"
            f" (supported: {', '.join(sorted(_MODULES))})"
        ) from None
    return importlib.import_module(f"{__name__}.{module}")
