"""Server-side UUIDv7 generation, so rows inserted by other clients get UUIDv7 too.

One function name on every database, ``sqla_ids_uuid7()``:

* PostgreSQL: native ``uuidv7()`` on 18+, a PL/pgSQL function before;
* MariaDB/MySQL: a stored function, plus a ``BEFORE INSERT`` trigger per
  column (stored functions are not allowed in ``DEFAULT``);
* SQLite: a Python function registered on every connection of an engine.

Values are valid UUIDv7 and strictly increase within one connection. The SQL
of each database lives in its module under :mod:`sqla_ids.dialects`.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.compiler import compiles

from sqla_ids.dialects import for_dialect

UUID7_FUNCTION = "sqla_ids_uuid7"
"""Name of the server-side UUIDv7 function on every database."""


def uuid7_function_create_sql(dialect_name: str) -> list[str]:
    """SQL statements that create the function on ``dialect_name`` (none on SQLite)."""
    statements: list[str] = for_dialect(dialect_name).uuid7_function_create_sql(UUID7_FUNCTION)
    return statements


def uuid7_function_drop_sql(dialect_name: str) -> list[str]:
    """SQL statements that drop the function on ``dialect_name`` (none on SQLite)."""
    statements: list[str] = for_dialect(dialect_name).uuid7_function_drop_sql(UUID7_FUNCTION)
    return statements


def uuid7_column_default_sql(dialect_name: str) -> str:
    """The ``DEFAULT`` SQL of a column filled by the function on ``dialect_name``.

    ``sqla_ids_uuid7()`` on PostgreSQL, ``(sqla_ids_uuid7())`` on SQLite; on
    MariaDB/MySQL a nil placeholder that :func:`uuid7_column_trigger_sql`'s
    trigger replaces.
    """
    sql: str = for_dialect(dialect_name).uuid7_column_default_sql(UUID7_FUNCTION)
    return sql


def uuid7_column_trigger_sql(dialect_name: str, table: str, column: str) -> list[str]:
    """Extra DDL making ``table.column`` server-filled (MariaDB/MySQL trigger; else none).

    ``table`` and ``column`` must already be quoted for the dialect.
    """
    statements: list[str] = for_dialect(dialect_name).uuid7_column_after_create_sql(
        UUID7_FUNCTION, table, column
    )
    return statements


def install_uuid7_function(connection: Connection) -> None:
    """Create ``sqla_ids_uuid7()`` in the database (SQLite: register it on this connection).

    Idempotent. On SQLite use :func:`register_uuid7_function` on the engine
    so every new connection has it.
    """
    module = for_dialect(connection.dialect.name)
    for statement in uuid7_function_create_sql(connection.dialect.name):
        connection.exec_driver_sql(statement)
    register = getattr(module, "uuid7_function_register", None)
    if register is not None:
        register(connection.connection.dbapi_connection, UUID7_FUNCTION)


def remove_uuid7_function(connection: Connection) -> None:
    """Drop ``sqla_ids_uuid7()`` from the database if it exists."""
    for statement in uuid7_function_drop_sql(connection.dialect.name):
        connection.exec_driver_sql(statement)


def register_uuid7_function(engine: Engine) -> None:
    """Make ``sqla_ids_uuid7()`` available on every connection of ``engine``.

    Needed on SQLite, whose functions live in the client; a no-op elsewhere
    (install the function once with :func:`install_uuid7_function`).
    """
    register = getattr(for_dialect(engine.dialect.name), "uuid7_function_register", None)
    if register is None:
        return

    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        register(dbapi_connection, UUID7_FUNCTION)

    if not sa.event.contains(engine, "connect", on_connect):
        sa.event.listen(engine, "connect", on_connect)
    # Connections already in the pool were made before the listener.
    engine.dispose()


def uuid7_function_ddl(metadata: sa.MetaData) -> None:
    """Install the function with ``metadata.create_all`` and drop it with ``drop_all``."""

    def create(target: Any, connection: Connection, **kw: Any) -> None:
        install_uuid7_function(connection)

    def drop(target: Any, connection: Connection, **kw: Any) -> None:
        remove_uuid7_function(connection)

    sa.event.listen(metadata, "before_create", create)
    sa.event.listen(metadata, "after_drop", drop)


class UUIDv7ServerDefault(sa.DefaultClause):
    """``server_default`` that fills the column with ``sqla_ids_uuid7()`` on the server.

    Renders the dialect's ``DEFAULT`` (a function call, or on MariaDB a nil
    placeholder) and, on MariaDB/MySQL, creates the ``BEFORE INSERT`` trigger
    after the table. The function itself must exist: call
    :func:`uuid7_function_ddl` on the metadata or :func:`install_uuid7_function`.
    """

    def __init__(self) -> None:
        super().__init__(_UUIDv7ServerCall())

    def __repr__(self) -> str:
        return "UUIDv7ServerDefault()"

    def _set_parent(self, parent: Any, **kw: Any) -> None:
        super()._set_parent(parent, **kw)
        column: sa.Column[Any] = parent
        # Runs now if the column already has its table, else when it gets one.
        column._on_table_attach(_listen_after_create)


def _listen_after_create(column: sa.Column[Any], table: sa.Table) -> None:
    def after_create(target: sa.Table, connection: Connection, **kw: Any) -> None:
        preparer = connection.dialect.identifier_preparer
        for statement in uuid7_column_trigger_sql(
            connection.dialect.name, preparer.format_table(target), preparer.quote(column.name)
        ):
            connection.exec_driver_sql(statement)

    sa.event.listen(table, "after_create", after_create)


class _UUIDv7ServerCall(sa.sql.expression.ColumnElement[Any]):
    """The dialect's ``DEFAULT`` expression for a server-filled UUIDv7 column."""

    inherit_cache = True


@compiles(_UUIDv7ServerCall)
def _compile_server_call(element: _UUIDv7ServerCall, compiler: Any, **kw: Any) -> str:
    return uuid7_column_default_sql(compiler.dialect.name)
