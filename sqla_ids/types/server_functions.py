"""Server-side UUIDv7 generation, so rows inserted by other clients get UUIDv7 too.

One function name on every database, ``sqla_ids_uuid7()``:

* PostgreSQL: native ``uuidv7()`` on 18+, a PL/pgSQL function before;
* MariaDB/MySQL: a stored function, plus a ``BEFORE INSERT`` trigger per
  column (stored functions are not allowed in ``DEFAULT``);
* SQLite: a Python function registered on every connection of an engine.

Values are valid UUIDv7 and strictly increase within one connection.

Every function and sequence is created and dropped by schema (PostgreSQL) or
database (MariaDB): the one asked for, else the one unqualified names are
created in (``current_schema()``, ``DATABASE()``), never another schema that a
``search_path`` happens to reach. A function is dropped only while nothing
uses it (a column ``DEFAULT``, a trigger, a view...), so dropping one
``MetaData`` leaves the function to the tables of another. On PostgreSQL 18+
column defaults call the native ``uuidv7()`` itself, decided from the
connected server's version when the DDL is compiled.

``sqla_ids_uuid7_serial()`` (``serial=True`` below) also orders values across
connections, like ``SERIAL``: a value made after another one has been
returned is greater, whichever connection made either. It puts a database
``SEQUENCE`` (``sqla_ids_uuid7_serial_seq``) after the millisecond, so it
gives away how many values were made in between; PostgreSQL and MariaDB
10.3+ (MySQL has no sequences). On SQLite both names call the process-wide
generator. The SQL of each database lives in its class under
:mod:`sqla_ids.dialects` (``dialects/<database>/ddl.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.ext.compiler import compiles

from sqla_ids.dialects import UnsupportedDialectError, for_dialect
from sqla_ids.dialects.sql import execute_sql, quoter

if TYPE_CHECKING:
    # Imported only to type: sqlalchemy.ext.asyncio needs greenlet, which a
    # synchronous install (no `async` extra) does not have.
    from sqlalchemy.ext.asyncio import AsyncEngine

UUID7_FUNCTION = "sqla_ids_uuid7"
"""Name of the server-side UUIDv7 function on every database."""
UUID7_SERIAL_FUNCTION = "sqla_ids_uuid7_serial"
"""Name of the server-side UUIDv7 function ordered across connections."""
UUID7_SERIAL_SEQUENCE = "sqla_ids_uuid7_serial_seq"
"""The ``SEQUENCE`` behind :data:`UUID7_SERIAL_FUNCTION`."""


logger = logging.getLogger(__name__)


def _function(serial: bool) -> str:
    return UUID7_SERIAL_FUNCTION if serial else UUID7_FUNCTION


def _quoter(dialect: Dialect | str) -> Callable[[str], str]:
    """Quotes names for ``dialect`` (or a dialect name's default driver) as the
    database reads them (:func:`~sqla_ids.dialects.sql.quote_name`: not doubled
    for a driver's placeholders): the statements below are run as written, put
    in migration files or in ``--sql`` output."""
    if isinstance(dialect, str):
        dialect = sa.engine.URL.create(dialect).get_dialect()()
    return quoter(dialect)


def uuid7_function_create_sql(
    dialect: Dialect | str, serial: bool = False, schema: str | None = None
) -> list[str]:
    """SQL statements creating the function on ``dialect`` (or dialect name); none on SQLite.

    ``serial=True``: the sequence and ``sqla_ids_uuid7_serial()`` instead.
    ``schema``: where (PostgreSQL schema, MariaDB database); by default the one
    unqualified names are created in when the statements run.
    """
    database = for_dialect(dialect)
    q = _quoter(dialect)
    quoted = None if schema is None else q(schema)
    if serial:
        return database.uuid7_serial_function_create_sql(
            q(UUID7_SERIAL_FUNCTION), q(UUID7_SERIAL_SEQUENCE), quoted
        )
    return database.uuid7_function_create_sql(q(UUID7_FUNCTION), quoted)


def uuid7_function_drop_sql(
    dialect: Dialect | str, serial: bool = False, schema: str | None = None
) -> list[str]:
    """SQL statements dropping the function on ``dialect`` (or dialect name); none on SQLite.

    ``serial=True``: ``sqla_ids_uuid7_serial()`` and its sequence instead.
    ``schema`` as for :func:`uuid7_function_create_sql`. On PostgreSQL the
    statements keep a function something still depends on; on MariaDB they
    drop it unconditionally (:func:`remove_uuid7_function` checks first).
    """
    database = for_dialect(dialect)
    q = _quoter(dialect)
    quoted = None if schema is None else q(schema)
    if serial:
        return database.uuid7_serial_function_drop_sql(
            q(UUID7_SERIAL_FUNCTION), q(UUID7_SERIAL_SEQUENCE), quoted
        )
    return database.uuid7_function_drop_sql(q(UUID7_FUNCTION), quoted)


def uuid7_column_default_sql(dialect: Dialect | str, serial: bool = False) -> str:
    """The ``DEFAULT`` SQL of a column filled by the function on ``dialect`` (or dialect name).

    ``sqla_ids_uuid7()`` on PostgreSQL, or ``uuidv7()`` when ``dialect`` is
    connected to PostgreSQL 18+ (no table then depends on our function);
    ``(sqla_ids_uuid7())`` on SQLite; on MariaDB/MySQL a nil placeholder that
    :func:`uuid7_column_trigger_sql`'s trigger replaces. ``serial=True``
    calls ``sqla_ids_uuid7_serial()`` (no database has a native one).
    """
    database = for_dialect(dialect)
    native = None if serial or isinstance(dialect, str) else database.uuid7_native_function(dialect)
    return database.uuid7_column_default_sql(native or _function(serial))


def uuid7_column_trigger_sql(
    dialect: Dialect | str, table: str, column: str, serial: bool = False
) -> list[str]:
    """Extra DDL making ``table.column`` server-filled (MariaDB/MySQL trigger; else none).

    ``table`` and ``column`` must already be quoted for the dialect.
    """
    return for_dialect(dialect).uuid7_column_after_create_sql(_function(serial), table, column)


def uuid7_serial_supported(dialect: sa.engine.Dialect) -> bool:
    """Whether ``sqla_ids_uuid7_serial()`` can exist on ``dialect`` (it needs sequences)."""
    return for_dialect(dialect).uuid7_serial_supported(dialect)


def install_uuid7_function(
    connection: Connection, serial: bool = False, schema: str | None = None
) -> None:
    """Create ``sqla_ids_uuid7()`` in the database (SQLite: register it on this connection).

    ``serial=True`` also creates ``sqla_ids_uuid7_serial()`` and its sequence,
    or raises :class:`~sqla_ids.dialects.UnsupportedDialectError` (before
    creating anything) where the database has no sequences. Idempotent. On
    SQLite use :func:`register_uuid7_function` on the engine so every new
    connection has them. ``schema``: the PostgreSQL schema or MariaDB database
    to create them in; by default the current one (``current_schema()``,
    ``DATABASE()``), where an unqualified ``DEFAULT`` or trigger finds them.
    """
    dialect = connection.dialect
    database = for_dialect(dialect)
    if serial and not uuid7_serial_supported(dialect):
        raise UnsupportedDialectError(
            f"{UUID7_SERIAL_FUNCTION}() needs {database.uuid7_serial_requires}, "
            f"not {dialect.name} {_version(dialect)}"
        )
    if schema is None:
        schema = database.uuid7_function_schema(connection)
    for statement in uuid7_function_create_sql(dialect, schema=schema):
        execute_sql(connection, statement)
    if serial:
        for statement in uuid7_function_create_sql(dialect, serial=True, schema=schema):
            execute_sql(connection, statement)
    if database.client_functions:
        for name in (UUID7_FUNCTION, UUID7_SERIAL_FUNCTION):
            database.uuid7_function_register(connection.connection.dbapi_connection, name)


def _version(dialect: sa.engine.Dialect) -> str:
    return ".".join(str(part) for part in dialect.server_version_info or ())


def remove_uuid7_function(connection: Connection, schema: str | None = None) -> list[str]:
    """Drop ``sqla_ids_uuid7()`` and, where it can exist, the serial one, unless in use.

    Only in ``schema`` (by default the current one, as for
    :func:`install_uuid7_function`), never one further down a ``search_path``.
    A function that something still calls -- a column ``DEFAULT``, a trigger, a
    view, a routine -- is kept, and so is the serial one's sequence with it.
    Returns what keeps them (empty when nothing was kept); each is also
    logged. A no-op on SQLite, whose functions live in the client.
    """
    dialect = connection.dialect
    database = for_dialect(dialect)
    if database.client_functions:
        return []
    if schema is None:
        schema = database.uuid7_function_schema(connection)
        if schema is None:  # no current schema/database: nothing can be in it
            return []
    kept: list[str] = []
    for serial in (False, True) if uuid7_serial_supported(dialect) else (False,):
        name = _function(serial)
        users = database.uuid7_function_users(connection, name, schema)
        if users:
            logger.info("kept %s.%s(): still used by %s", schema, name, "; ".join(users))
            kept.extend(users)
            continue
        for statement in uuid7_function_drop_sql(dialect, serial=serial, schema=schema):
            execute_sql(connection, statement)
    return kept


def register_uuid7_function(engine: Engine | AsyncEngine) -> None:
    """Make ``sqla_ids_uuid7()`` available on every connection of ``engine``.

    Needed on SQLite, whose functions live in the client; a no-op elsewhere
    (install the function once with :func:`install_uuid7_function`). An
    ``AsyncEngine`` (``sqlite+aiosqlite``) is registered through its
    ``sync_engine``, whose pool hands out the driver's connections.
    """
    asynchronous = not isinstance(engine, Engine)
    if not isinstance(engine, Engine):
        engine = engine.sync_engine
    database = for_dialect(engine.dialect)
    if not database.client_functions:
        return

    def on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        for name in (UUID7_FUNCTION, UUID7_SERIAL_FUNCTION):
            database.uuid7_function_register(dbapi_connection, name)

    if not sa.event.contains(engine, "connect", on_connect):
        sa.event.listen(engine, "connect", on_connect)
    # Connections already in the pool were made before the listener. An async
    # driver's connections can only be closed inside the event loop: they are let
    # go (closed when collected), the pool replaced all the same.
    engine.dispose(close=not asynchronous)


def uuid7_function_ddl(metadata: sa.MetaData) -> None:
    """Install the function with ``metadata.create_all`` and drop it with ``drop_all``.

    The serial function and its sequence are installed too when a column of
    ``metadata`` has ``UUIDv7ServerDefault(serial=True)``.
    """

    def create(target: Any, connection: Connection, **kw: Any) -> None:
        serial = any(
            isinstance(column.server_default, UUIDv7ServerDefault) and column.server_default.serial
            for table in metadata.tables.values()
            for column in table.columns
        )
        for schema in _function_schemas(connection, metadata):
            install_uuid7_function(connection, serial=serial, schema=schema)

    def drop(target: Any, connection: Connection, **kw: Any) -> None:
        for schema in _function_schemas(connection, metadata):
            remove_uuid7_function(connection, schema=schema)

    sa.event.listen(metadata, "before_create", create)
    sa.event.listen(metadata, "after_drop", drop)


def _function_schemas(connection: Connection, metadata: sa.MetaData) -> list[str | None]:
    """Where ``metadata``'s tables need the function: the current schema (``None``)
    or, where a trigger resolves it in its table's own database (MariaDB/MySQL),
    the database of each table with a server-filled UUIDv7 column, as the
    connection names it (``schema_translate_map`` included)."""
    if not for_dialect(connection.dialect).function_in_table_schema:
        return [None]
    schemas = {
        connection.schema_for_object(table)
        for table in metadata.tables.values()
        if any(isinstance(column.server_default, UUIDv7ServerDefault) for column in table.columns)
    }
    return sorted(schemas, key=lambda schema: (schema is not None, schema or "")) or [None]


class UUIDv7ServerDefault(sa.DefaultClause):
    """``server_default`` that fills the column with ``sqla_ids_uuid7()`` on the server.

    Renders the dialect's ``DEFAULT`` (a function call, or on MariaDB a nil
    placeholder) and, on MariaDB/MySQL, creates the ``BEFORE INSERT`` trigger
    after the table. ``serial=True`` calls ``sqla_ids_uuid7_serial()``
    instead, ordered across connections (see the module docs). The function
    itself must exist: call :func:`uuid7_function_ddl` on the metadata or
    :func:`install_uuid7_function`.
    """

    def __init__(self, serial: bool = False) -> None:
        super().__init__(_UUIDv7SerialServerCall() if serial else _UUIDv7ServerCall())
        self.serial = serial

    def __repr__(self) -> str:
        return "UUIDv7ServerDefault(serial=True)" if self.serial else "UUIDv7ServerDefault()"

    def _set_parent(self, parent: Any, **kw: Any) -> None:
        super()._set_parent(parent, **kw)
        column: sa.Column[Any] = parent
        # Runs now if the column already has its table, else when it gets one.
        column._on_table_attach(_listen_after_create)


def _listen_after_create(column: sa.Column[Any], table: sa.Table) -> None:
    def after_create(target: sa.Table, connection: Connection, **kw: Any) -> None:
        q = quoter(connection.dialect)
        serial = isinstance(column.server_default, UUIDv7ServerDefault) and (
            column.server_default.serial
        )
        schema = connection.schema_for_object(target)  # schema_translate_map included
        name = q(target.name) if schema is None else f"{q(schema)}.{q(target.name)}"
        for statement in uuid7_column_trigger_sql(
            connection.dialect, name, q(column.name), serial=serial
        ):
            execute_sql(connection, statement)

    sa.event.listen(table, "after_create", after_create)


class _UUIDv7ServerCall(sa.sql.expression.ColumnElement[Any]):
    """The dialect's ``DEFAULT`` expression for a server-filled UUIDv7 column.

    Not marked ``monotonic`` (SQLAlchemy 2.1's trusted server-side sentinel),
    although the values do increase within a statement: the mark is read
    once per ``Table``, for every dialect, and SQLAlchemy 2.1.9 then batches
    ORM inserts on PostgreSQL and MariaDB but fails an internal assertion on
    SQLite (``insert().returning(..., sort_by_parameter_order=True)`` too);
    SQLAlchemy 2.0 has no such mark. The ORM batches server-keyed objects
    another way: before a flush, :func:`sqla_ids.types.defaults.prefetch_server_keys`
    fetches their keys from this same function, so the ``INSERT`` carries them
    like client-made keys (SQLAlchemy 2.0 and 2.1, every database).
    """

    inherit_cache = True


class _UUIDv7SerialServerCall(_UUIDv7ServerCall):
    """The dialect's ``DEFAULT`` expression calling ``sqla_ids_uuid7_serial()``."""

    inherit_cache = True


@compiles(_UUIDv7ServerCall)
def _compile_server_call(element: _UUIDv7ServerCall, compiler: Any, **kw: Any) -> str:
    return uuid7_column_default_sql(compiler.dialect)


@compiles(_UUIDv7SerialServerCall)
def _compile_serial_server_call(element: _UUIDv7SerialServerCall, compiler: Any, **kw: Any) -> str:
    return uuid7_column_default_sql(compiler.dialect, serial=True)
