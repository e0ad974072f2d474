"""Per-database pieces of the key migration: one module per database family.

Each module offers the same reflection functions for the planner
(``primary_key``, ``columns``, ``foreign_keys``, ``find_references``,
``resolve_inheritance``, ``find_views``, ``find_blockers``, ``find_routines``,
``find_dependents``, ``key_default``, ``column_definitions``...) and a
``STRATEGY`` object (:class:`~sqla_ids.migration.strategies.Strategy`) that
changes the columns: PostgreSQL converts them in place, MariaDB/MySQL swap
filled temporary columns in, SQLite rebuilds the tables.
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
