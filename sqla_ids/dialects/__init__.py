"""Per-dialect pieces: one module per database family.

Everything that differs between PostgreSQL, MariaDB/MySQL, SQLite and SQL
Server lives in that dialect's module (``postgresql.py``, ``mysql.py``,
``sqlite.py``, ``mssql.py``); features look the module up here instead of
branching on ``dialect.name`` themselves.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from sqla_ids.errors import SqlaIdsError

# SQLAlchemy dialect name -> module holding our pieces for it.
_MODULES = {
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "sqlite": "sqlite",
    "mssql": "mssql",
}


class UnsupportedDialectError(SqlaIdsError, NotImplementedError):
    """The database dialect has no support module in sqla_ids."""


def for_dialect(name: str) -> ModuleType:
    """Return the module with sqla_ids' pieces for the SQLAlchemy dialect ``name``."""
    try:
        module = _MODULES[name]
    except KeyError:
        supported = ", ".join(sorted(_MODULES))
        raise UnsupportedDialectError(
            f"dialect {name!r} is not supported by sqla_ids (supported: {supported})"
        ) from None
    return importlib.import_module(f"{__name__}.{module}")
