"""Rolling deploys: pointing an application at a version, and asking where a migration is.

An online migration with ``versions`` (:class:`~sqla_ids.migration.PkMigrationOptions`)
serves its tables in two versions from the expand until the contract
(docs/migration.md, "Rolling deploys"). An application instance picks one
with its connections' ``search_path`` -- the version's schema first, then
the application's own -- and keeps it for the whole migration:

* the new code (UUID keys) uses ``version_connect_args("postgresql", "after",
  schema=...)``: before the swap the names resolve to the views of
  ``sqla_ids_after``; the swap drops them and the same names resolve to the
  base tables, which are then *after*;
* the old code (integer keys) uses ``"before"``: before the swap
  ``sqla_ids_before`` does not exist and the names resolve to the base
  tables; after it they resolve to its views. It must be gone by the
  contract, which drops them.

On MariaDB both versions are databases of views named after the application's
database (``sqla_ids_before_<db>``, ``sqla_ids_after_<db>``), selected by the
connection's database: ``version_connect_args("mariadb+pymysql", "after",
schema=<db>)``. They exist from the expand to the contract; the new code is
pointed at the application's database between the swap and the contract.

:func:`migration_phase` is what an instance's readiness check asks: the new
code is ready once the migration is ``prepared`` (every row has its UUID).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.core import state
from sqla_ids.migration.core.versions import (
    DEFAULT_PREFIX,
    Version,
    prefix_of,
    version_database,
    version_schema,
)

__all__ = ["migration_phase", "version_connect_args", "version_search_path"]

# MariaDB/MySQL drivers: the keyword naming the connection's database, as
# SQLAlchemy passes the URL's database to each (the URL's own is replaced).
_DATABASE_KEYWORDS = {
    "": "db",  # the dialect's default driver, mysqlclient
    "mysqldb": "db",
    "pymysql": "database",
    "asyncmy": "db",
    "aiomysql": "db",
    "mariadbconnector": "database",
    "mysqlconnector": "database",
}


def _quote(name: str) -> str:
    # Every name double-quoted, as PostgreSQL reads search_path's entries.
    return '"' + name.replace('"', '""') + '"'


def version_search_path(
    version: Version, schema: str = "public", *, versions: bool | str = True
) -> str:
    """The ``search_path`` value serving ``version`` over the application's
    ``schema`` (``versions``: the option's value, for its prefix).

    >>> version_search_path("after", "shop")
    '"sqla_ids_after","shop"'
    """
    prefix = prefix_of(versions) or DEFAULT_PREFIX
    return f"{_quote(version_schema(prefix, version))},{_quote(schema)}"


def version_connect_args(
    dialect_name: str, version: Version, schema: str = "public", *, versions: bool | str = True
) -> dict[str, Any]:
    """``connect_args`` for ``create_engine`` putting every connection on
    ``version`` (``"before"`` or ``"after"``) of the tables in ``schema``.

    ``dialect_name``: ``engine.dialect.name`` or the URL's drivername
    (``"postgresql"``, ``"postgresql+psycopg"``, ``"postgresql+asyncpg"``,
    ``"mariadb+pymysql"``, ``"mysql+mysqldb"``...). On MariaDB ``schema`` is
    the application's database, and the arguments select the version's
    database (the driver's own keyword, replacing the URL's database).

    >>> version_connect_args("postgresql+psycopg", "before", "shop")
    {'options': '-c search_path="sqla_ids_before","shop"'}
    >>> version_connect_args("mariadb+pymysql", "after", "shop")
    {'database': 'sqla_ids_after_shop'}
    """
    database, _, driver = dialect_name.partition("+")
    if database in ("mysql", "mariadb"):
        if driver not in _DATABASE_KEYWORDS:
            raise MigrationRefusedError(
                f"cannot point {dialect_name} at a version: its driver's keyword for the"
                f" database is not known; connect to the database"
                f" {version_database(prefix_of(versions) or DEFAULT_PREFIX, version, schema)!r}"
                " in the URL instead; nothing was changed"
            )
        name = version_database(prefix_of(versions) or DEFAULT_PREFIX, version, schema)
        return {_DATABASE_KEYWORDS[driver]: name}
    if database != "postgresql":
        raise MigrationRefusedError(
            f"cannot serve versions on {dialect_name}: two versions of the tables need"
            " PostgreSQL (schemas of updatable views selected by search_path) or MariaDB"
            " (databases of views); roll the application out at the swap instead;"
            " nothing was changed"
        )
    path = version_search_path(version, schema, versions=versions)
    if driver == "asyncpg":
        return {"server_settings": {"search_path": path}}
    # libpq's options: whitespace separates them, a backslash escapes the next
    # character (a space or a backslash in a schema's name).
    escaped = "".join("\\" + c if c.isspace() or c == "\\" else c for c in path)
    return {"options": f"-c search_path={escaped}"}


def migration_phase(connection: Connection, table: str) -> str | None:
    """Where the migration of ``table``'s key stands, as the state table records
    it: ``None`` (none on record), ``"online:planned"``, ``"online:expanded"``,
    ``"online:backfilled"``, ``"online:prepared"`` (the *after* version is
    complete: new code may serve), ``"online:swapped"`` (*before* served by
    views), ``"done"`` (contracted: only *after* is left), or an offline
    migration's step."""
    recorded = state.load(connection, table)
    return None if recorded is None else recorded[0].encode()
