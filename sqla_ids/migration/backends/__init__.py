"""The migration engine's per-database backends, and the registry that finds them.

As Alembic keeps ``alembic/ddl/`` beside SQLAlchemy's dialects, the key
migration keeps its own backend per database family here:
:class:`~sqla_ids.migration.backends.postgresql.PostgreSQLBackend`,
:class:`~sqla_ids.migration.backends.mysql.MariaDBBackend` (MySQL is refused,
by name: :data:`~sqla_ids.migration.backends.mysql.MYSQL_REFUSAL`),
:class:`~sqla_ids.migration.backends.sqlite.SQLiteBackend`.
:func:`backend_for` gives the one for a dialect, connection or engine.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection, Dialect, Engine

from sqla_ids.dialects import UnsupportedDialectError, for_dialect
from sqla_ids.migration.backends.base import MigrationBackend, refusal, registered
from sqla_ids.migration.backends.mysql import MariaDBBackend
from sqla_ids.migration.backends.postgresql import PostgreSQLBackend
from sqla_ids.migration.backends.sqlite import SQLiteBackend

__all__ = [
    "MariaDBBackend",
    "MigrationBackend",
    "PostgreSQLBackend",
    "SQLiteBackend",
    "backend_for",
]

_INSTANCES: dict[type[MigrationBackend], MigrationBackend] = {}


def backend_for(bind: Dialect | Connection | Engine) -> MigrationBackend:
    """The key migration's backend for ``bind``'s database.

    The database is the one :func:`sqla_ids.dialects.for_dialect` finds (a
    MySQL dialect connected to MariaDB is MariaDB); a database whose family has
    no backend raises :class:`~sqla_ids.dialects.UnsupportedDialectError`
    naming it, before anything is read or changed.
    """
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    database = for_dialect(dialect)
    why = refusal(type(database))
    if why is not None:
        raise UnsupportedDialectError(f"{why}; nothing was read or changed")
    backends = registered()
    for family in type(database).__mro__:
        backend = backends.get(family)
        if backend is not None:
            if backend not in _INSTANCES:
                _INSTANCES[backend] = backend()
            return _INSTANCES[backend]
    supported = ", ".join(sorted(d.label for d in backends))
    raise UnsupportedDialectError(
        f"migrating keys to UUIDv7 is not supported on {database.label} (supported: {supported})"
    )
