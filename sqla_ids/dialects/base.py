"""The database object every feature asks, and the registry that finds it.

Modelled on Alembic's ``ddl/impl.py``: one class per database family
(:class:`~sqla_ids.dialects.postgresql.PostgreSQL` and its variants
:class:`~sqla_ids.dialects.cockroachdb.CockroachDB` and
:class:`~sqla_ids.dialects.yugabytedb.YugabyteDB`,
:class:`~sqla_ids.dialects.mysql.MySQL` and its subclass
:class:`~sqla_ids.dialects.mysql.MariaDB`,
:class:`~sqla_ids.dialects.sqlite.SQLite`,
:class:`~sqla_ids.dialects.mssql.SQLServer`), registered under the SQLAlchemy
dialect names it serves. A variant inherits its parent's SQL and overrides
what differs, refusing by name what it cannot do. What a database can do is a documented class
attribute; what it does differently is a method. Every method of this base
class raises :class:`UnsupportedDialectError` naming the database and the
feature, so a database that lacks a feature fails the same way everywhere.

Bigger concerns have their own objects, built on first use by the database's
own subpackage: :meth:`Database.scanning` (the UUID tools' SQL) and
:meth:`Database.bench` (the insert benchmark). The SQL itself lives next to
the class, grouped by database then by concern: ``dialects/<database>/ddl.py``,
``scanning.py``, ``bench.py``. The key migration is a layer above, with its
own per-database backends (:mod:`sqla_ids.migration.backends`); nothing here
imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeEngine

from sqla_ids.errors import SqlaIdsError

if TYPE_CHECKING:  # concern objects: imported by each database on first use
    from sqla_ids.dialects.bench import Bench
    from sqla_ids.dialects.order_number_owner import OrderNumberOwner, OwnedSequence
    from sqla_ids.dialects.scanning import Scanning
    from sqla_ids.order_numbers.format import OrderNumberFormat
    from sqla_ids.types.uuid7 import UUIDv7


class UnsupportedDialectError(SqlaIdsError, NotImplementedError):
    """The database has no support in sqla_ids for the feature asked for."""


_REGISTRY: dict[str, type[Database]] = {}


class Database:
    """What sqla_ids knows about one database family.

    Subclasses set :attr:`names` and are registered when their class body
    runs. Use :func:`for_dialect` to get the instance for a dialect.
    """

    names: ClassVar[tuple[str, ...]] = ()
    """SQLAlchemy dialect names served by this class (the registry's keys)."""
    label: ClassVar[str] = "this database"
    """The database's name in messages ("PostgreSQL", "MariaDB"…)."""

    alter_table_add_check: ClassVar[bool] = False
    """``ALTER TABLE … ADD CONSTRAINT … CHECK`` works on an existing table
    (SQLite cannot: Alembic ops leave the CHECK to the next table rebuild)."""
    client_functions: ClassVar[bool] = False
    """SQL functions live in the client and are registered on every new
    connection (:meth:`uuid7_function_register`), as on SQLite."""
    range_partitions: ClassVar[bool] = False
    """``PARTITION BY RANGE`` on a UUIDv7 key (:meth:`uuid7_month_partition_sql`)."""
    backslash_escapes: ClassVar[bool] = False
    """A backslash escapes the next character in a string literal (MariaDB/MySQL's
    default): a ``'`` after one does not end the literal
    (:func:`sqla_ids.dialects.sql.text_sql` reads literals so)."""
    function_in_default: ClassVar[bool] = False
    """A column ``DEFAULT`` may call a function (MariaDB/MySQL forbid stored
    functions there: a ``BEFORE INSERT`` trigger fills the column instead)."""
    function_in_table_schema: ClassVar[bool] = False
    """The function must be in each table's own schema (database): the trigger
    calling it resolves the unqualified name there each time it runs
    (MariaDB/MySQL). PostgreSQL resolves a ``DEFAULT``'s call through
    ``search_path`` once, when the table is created, so one function in the
    current schema serves tables in every schema."""
    uuid7_serial_requires: ClassVar[str] = "database sequences: PostgreSQL or MariaDB 10.3+"
    """What ``sqla_ids_uuid7_serial()`` needs that a database without it lacks
    (in the error :func:`~sqla_ids.types.install_uuid7_function` raises)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in cls.names:
            _REGISTRY[name] = cls

    def __repr__(self) -> str:
        return f"<sqla_ids database {self.label}>"

    # --- errors ---------------------------------------------------------------

    def unsupported(self, feature: str, hint: str = "") -> NoReturn:
        """Raise :class:`UnsupportedDialectError` for ``feature`` on this database."""
        message = f"{feature} is not supported on {self.label}"
        raise UnsupportedDialectError(f"{message} ({hint})" if hint else message)

    def reflected_name(self, name: str) -> str:
        """A name as SQLAlchemy's reflection of this database returns it, as the
        database has it (the same, but on MariaDB/MySQL)."""
        return name

    def declared_references(
        self, connection: Connection, schema: str | None, tables: set[str]
    ) -> set[tuple[str, str, str, str]]:
        """``(table, column, referred table, referred column)`` of each column pair
        of the foreign keys declared on ``tables`` (SQLAlchemy's reflection)."""
        return reflected_references(connection, schema, tables)

    # --- concerns (built by each database's subpackage) ------------------------

    def scanning(self) -> Scanning:
        """The SQL of the UUID tools (``find``, ``relations``) on this database."""
        self.unsupported("searching for UUIDs", "supported: PostgreSQL, MariaDB/MySQL, SQLite")

    def bench(self) -> Bench:
        """The insert benchmark's SQL on this database."""
        self.unsupported("the insert benchmark", "supported: PostgreSQL, MariaDB/MySQL, SQLite")

    # --- UUIDv7 columns ---------------------------------------------------------

    def uuid7_storage(self, type_: UUIDv7, dialect: Dialect) -> TypeEngine[Any]:
        """Storage type of a ``UUIDv7`` column."""
        self.unsupported("a UUIDv7 column type")

    def uuid7_timestamp_ms_sql(self, inner: str) -> str:
        """SQL of the Unix milliseconds stored in the UUIDv7 expression ``inner``."""
        self.unsupported("reading a UUIDv7's timestamp in SQL")

    def uuid7_month_partition_sql(
        self, table: str, schema: str | None, name: str, low: Any, high: Any
    ) -> str:
        """``CREATE TABLE … PARTITION OF`` for one UUIDv7 range ``[low, high)``."""
        self.unsupported("UUIDv7 range partitions", "a PostgreSQL feature")

    def uuid192_storage(self) -> TypeEngine[Any]:
        """Storage of a ``UUID192Type`` column (up to 24 bytes, compared bytewise)."""
        self.unsupported("the UUID192Type column type")

    def uuid192_uuid_sql(self, inner: str) -> str:
        """SQL of the leading UUID of a UUID192 value, as the UUID storage compares."""
        self.unsupported("UUID192 expressions")

    # --- server-side UUIDv7 function ------------------------------------------
    # ``name``, ``sequence`` and ``schema`` arrive quoted for the dialect
    # (sqla_ids.types.server_functions quotes them with the dialect's preparer).
    # ``schema=None``: the schema unqualified names are created in when the
    # statements run (PostgreSQL's ``current_schema()``, MariaDB's current
    # database) -- never a schema further down a search path.

    def uuid7_function_create_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Statements creating the UUIDv7 function ``name()`` in ``schema``."""
        self.unsupported("the server-side UUIDv7 function")

    def uuid7_function_drop_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Statements dropping the UUIDv7 function ``schema.name()``."""
        self.unsupported("the server-side UUIDv7 function")

    def uuid7_function_schema(self, connection: Connection) -> str | None:
        """The schema ``schema=None`` stands for on ``connection`` now (unquoted)."""
        return None

    def uuid7_function_users(self, connection: Connection, name: str, schema: str) -> list[str]:
        """What in the database calls ``schema.name()`` (unquoted names): while
        anything does, the function is kept. None where nothing can call it."""
        return []

    def uuid7_native_function(self, dialect: Dialect) -> str | None:
        """The database's own UUIDv7 function a ``DEFAULT`` can call instead of
        ours on the server ``dialect`` is connected to (PostgreSQL 18's ``uuidv7``)."""
        return None

    def uuid7_column_default_sql(self, name: str) -> str:
        """``DEFAULT`` expression of a column filled by the function ``name()``."""
        self.unsupported("the server-side UUIDv7 function")

    def uuid7_column_after_create_sql(self, name: str, table: str, column: str) -> list[str]:
        """Extra DDL after creating a table with such a column (quoted names)."""
        return []

    def uuid7_reserve_ticks_sql(self) -> str | None:
        """One statement reserving ``:count`` consecutive ticks of this connection's
        ``sqla_ids_uuid7()`` state (its later keys sort after them) and returning
        the first, for keys assembled by the client
        (:func:`sqla_ids.identifiers.server_layouts.uuid7s_from_ticks`). ``None``:
        keys are fetched one function call each."""
        return None

    def uuid7_serial_reserve_sql(self, sequence: str) -> tuple[str, str] | None:
        """Two statements for a block of serial keys
        (:func:`sqla_ids.identifiers.server_layouts.uuid7s_from_serial`): the
        first sets and returns this connection's millisecond as
        ``sqla_ids_uuid7_serial()`` does, the second up to ``:count`` new values
        of ``sequence`` (quoted) as one comma-separated text. ``None``: one
        function call each."""
        return None

    def uuid7_function_register(self, dbapi_connection: Any, name: str) -> None:
        """Register ``name()`` on one DBAPI connection (client-side functions only)."""
        self.unsupported("registering UUIDv7 functions on a connection")

    def uuid7_serial_supported(self, dialect: Dialect) -> bool:
        """Whether ``sqla_ids_uuid7_serial()`` can exist (it needs sequences)."""
        return False

    def uuid7_serial_function_create_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Statements creating ``sequence`` and the serial UUIDv7 function ``name()``."""
        self.unsupported("the serial UUIDv7 function", "it needs database sequences")

    def uuid7_serial_function_drop_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Statements dropping the serial function and its sequence."""
        self.unsupported("the serial UUIDv7 function", "it needs database sequences")

    # --- order numbers -----------------------------------------------------------

    def order_number_create_sequence(
        self,
        connection: Connection,
        name: str,
        schema: str | None,
        owner: OrderNumberOwner | None = None,
    ) -> None:
        """Create the order-number sequence ``name`` (no-op if it exists).

        ``owner``: a table (and column) it numbers, added to the tables the
        sequence records (:mod:`sqla_ids.dialects.order_number_owner`), so
        that :meth:`order_number_sequences` finds it.
        """
        self.unsupported("order-number sequences")

    def order_number_sequences(
        self, connection: Connection, schema: str | None
    ) -> list[OwnedSequence]:
        """(sequence, table, column) for each table each order-number sequence of
        ``schema`` records (sequences that record none are left out)."""
        self.unsupported("order-number sequences")

    def order_number_drop_sequence(
        self, connection: Connection, name: str, schema: str | None
    ) -> None:
        """Drop the order-number sequence ``name`` if it exists."""
        self.unsupported("order-number sequences")

    def order_number_next_value(self, connection: Connection, name: str, schema: str | None) -> int:
        """The next value of the sequence: atomic across connections, never rolled back."""
        self.unsupported("order-number sequences")

    def order_number_format_check(self, column_sql: str, layout: OrderNumberFormat) -> str:
        """CHECK constraint text: ``column_sql`` matches exactly the display format."""
        self.unsupported("the order-number format CHECK")


def reflected_references(
    connection: Connection, schema: str | None, tables: set[str]
) -> set[tuple[str, str, str, str]]:
    """:meth:`Database.declared_references` from SQLAlchemy's reflection (any database)."""
    inspector = sa.inspect(connection)
    found: set[tuple[str, str, str, str]] = set()
    for table in tables:
        for fk in inspector.get_foreign_keys(table, schema=schema):
            for source, target in zip(
                fk["constrained_columns"], fk["referred_columns"], strict=True
            ):
                found.add((table, source, fk["referred_table"], target))
    return found


def registered() -> dict[str, type[Database]]:
    """SQLAlchemy dialect name → database class, for every registered database."""
    return dict(_REGISTRY)


_INSTANCES: dict[type[Database], Database] = {}


def _is_mariadb(dialect: Dialect) -> bool:
    # A ``mysql+driver://`` URL gives a MySQL dialect that learns it talks to
    # MariaDB when it first connects (``mariadb+driver://`` knows from the start).
    from sqlalchemy.dialects.mysql.base import MySQLDialect

    return isinstance(dialect, MySQLDialect) and dialect.is_mariadb


def for_dialect(dialect: Dialect | str) -> Database:
    """The :class:`Database` for a SQLAlchemy dialect (or dialect/backend name).

    A MySQL dialect connected to MariaDB gives :class:`MariaDB` -- once it has
    connected: SQLAlchemy learns the server at the first connection, so ask with
    ``connection.dialect`` (a ``mysql://`` engine that has not connected yet gives
    :class:`MySQL`). Unknown databases raise :class:`UnsupportedDialectError` naming them.
    (Importing this module imports :mod:`sqla_ids.dialects` first, which
    registers the built-in databases.)
    """
    if isinstance(dialect, str):
        name = dialect
    else:
        name = "mariadb" if _is_mariadb(dialect) else dialect.name
    try:
        cls = _REGISTRY[name]
    except KeyError:
        supported = ", ".join(sorted(_REGISTRY))
        raise UnsupportedDialectError(
            f"database {name!r} is not supported by sqla_ids (supported: {supported})"
        ) from None
    if cls not in _INSTANCES:
        _INSTANCES[cls] = cls()
    return _INSTANCES[cls]
