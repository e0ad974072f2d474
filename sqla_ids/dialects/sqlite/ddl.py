"""SQLite: DDL and column types (order-number counters, UUIDv7 storage, the
UUIDv7 function registered on each connection, UUID192 SQL).

Each feature has its own section in the class; keep sections independent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects.base import Database
from sqla_ids.dialects.order_number_owner import (
    OWNERS_PREFIX,
    OrderNumberOwner,
    OwnedSequence,
    owned_sequences,
    with_owner,
)
from sqla_ids.dialects.sql import quote_name, text_sql
from sqla_ids.dialects.storage import Blob16

if TYPE_CHECKING:
    from sqla_ids.dialects.bench import Bench
    from sqla_ids.dialects.scanning import Scanning
    from sqla_ids.order_numbers.format import OrderNumberFormat
    from sqla_ids.types.uuid7 import UUIDv7


# --- uuid7 storage ---
# ``sqlite_storage="binary"``: a ``BLOB`` column holding the 16 bytes in order.
# Blobs compare with memcmp, so UUIDv7 keys sort by time. SQLite has no
# ``BINARY(16)``: a column so declared gets NUMERIC affinity and is reflected
# as ``NUMERIC(16)``, so Alembic's autogenerate would report a change forever.


class SQLite(Database):
    """SQLite: no sequences (a counter table), functions registered per connection."""

    names: ClassVar[tuple[str, ...]] = ("sqlite",)
    label: ClassVar[str] = "SQLite"
    alter_table_add_check: ClassVar[bool] = False
    client_functions: ClassVar[bool] = True
    function_in_default: ClassVar[bool] = True

    def scanning(self) -> Scanning:
        """SQL of the UUID tools: any column may hold text or a blob."""
        from sqla_ids.dialects.sqlite.scanning import SQLiteScanning

        return SQLiteScanning()

    def bench(self) -> Bench:
        """The insert benchmark in a throw-away database file."""
        from sqla_ids.dialects.sqlite.bench import SQLiteBench

        return SQLiteBench()

    # --- order numbers -----------------------------------------------------------
    # SQLite has no sequences: a counter table, one row per sequence name. The
    # UPDATE takes SQLite's write lock, so the following SELECT in the same
    # transaction reads a value no other connection can also get. The CHECK
    # constraint is one GLOB per allowed length. The ``owners`` column lists, as
    # JSON, the tables a counter numbers (sqla_ids.dialects.order_number_owner);
    # a counter table made before it existed gets it when an owner is recorded.
    ORDER_NUMBER_COUNTERS: ClassVar[str] = "sqla_ids_counters"
    """The counter table (one row per order-number sequence)."""

    def _order_number_counters(self, connection: Connection, schema: str | None) -> str:
        # Quoted as the database reads it; the statements go through text_sql, as
        # an attached schema's name may hold ``:x``, which ``text()`` reads as a parameter.
        table = quote_name(connection.dialect, self.ORDER_NUMBER_COUNTERS)
        return f"{quote_name(connection.dialect, schema)}.{table}" if schema else table

    def _order_number_counter_columns(
        self, connection: Connection, schema: str | None
    ) -> list[str]:
        """Columns of the counter table (none if it does not exist)."""
        preparer = connection.dialect.identifier_preparer
        rows = connection.exec_driver_sql(
            f"PRAGMA {preparer.quote_schema(schema or 'main')}"
            f".table_info({preparer.quote(self.ORDER_NUMBER_COUNTERS)})"
        )
        return [str(row[1]) for row in rows]

    def order_number_create_sequence(
        self,
        connection: Connection,
        name: str,
        schema: str | None,
        owner: OrderNumberOwner | None = None,
    ) -> None:
        """Create the counter row ``name`` (and the counter table) if missing.

        ``owner`` is added to the tables the row records.
        """
        table = self._order_number_counters(connection, schema)
        connection.execute(
            text_sql(
                connection.dialect,
                f"CREATE TABLE IF NOT EXISTS {table} "
                "(name TEXT PRIMARY KEY, value INTEGER NOT NULL, owners TEXT)",
            )
        )
        connection.execute(
            text_sql(
                connection.dialect, f"INSERT OR IGNORE INTO {table} (name, value) VALUES (:name, 0)"
            ),
            {"name": name},
        )
        if owner is None:
            return
        if "owners" not in self._order_number_counter_columns(connection, schema):
            connection.execute(
                text_sql(connection.dialect, f"ALTER TABLE {table} ADD COLUMN owners TEXT")
            )
        owners = connection.scalar(
            text_sql(connection.dialect, f"SELECT owners FROM {table} WHERE name = :name"),
            {"name": name},
        )
        record = with_owner(OWNERS_PREFIX + owners if owners else None, owner)
        if record is not None:
            connection.execute(
                text_sql(
                    connection.dialect, f"UPDATE {table} SET owners = :owners WHERE name = :name"
                ),
                {"name": name, "owners": record.removeprefix(OWNERS_PREFIX)},
            )

    def order_number_sequences(
        self, connection: Connection, schema: str | None
    ) -> list[OwnedSequence]:
        """The counters of ``schema`` with each table their row records."""
        if "owners" not in self._order_number_counter_columns(connection, schema):
            return []  # no counter table, or one that records no owners
        table = self._order_number_counters(connection, schema)
        rows = connection.execute(
            text_sql(
                connection.dialect, f"SELECT name, owners FROM {table} WHERE owners IS NOT NULL"
            )
        )
        return owned_sequences({str(name): OWNERS_PREFIX + str(owners) for name, owners in rows})

    def order_number_drop_sequence(
        self, connection: Connection, name: str, schema: str | None
    ) -> None:
        """Remove the counter row ``name``; drop the counter table once empty."""
        table = self._order_number_counters(connection, schema)
        if not sa.inspect(connection).has_table(self.ORDER_NUMBER_COUNTERS, schema=schema):
            return
        connection.execute(
            text_sql(connection.dialect, f"DELETE FROM {table} WHERE name = :name"), {"name": name}
        )
        if not connection.scalar(text_sql(connection.dialect, f"SELECT count(*) FROM {table}")):
            connection.execute(text_sql(connection.dialect, f"DROP TABLE {table}"))

    def order_number_next_value(self, connection: Connection, name: str, schema: str | None) -> int:
        """Increment and read the counter ``name`` atomically."""
        table = self._order_number_counters(connection, schema)
        updated = connection.execute(
            text_sql(
                connection.dialect, f"UPDATE {table} SET value = value + 1 WHERE name = :name"
            ),
            {"name": name},
        )
        if updated.rowcount != 1:
            raise LookupError(
                f"order-number counter {name!r} does not exist: create its table with "
                "metadata.create_all() / table.create(), which creates the counter"
            )
        value = connection.scalar(
            text_sql(connection.dialect, f"SELECT value FROM {table} WHERE name = :name"),
            {"name": name},
        )
        return int(value)

    def order_number_format_check(self, column_sql: str, layout: OrderNumberFormat) -> str:
        """CHECK constraint text: the column matches one GLOB pattern per length."""
        classes = {"P": layout.payload_class, "C": layout.check_class}
        globs = [
            "".join(classes.get(char, char) for char in template) for template in layout.templates()
        ]
        return "(" + " OR ".join(f"{column_sql} GLOB '{g}'" for g in globs) + ")"

    # --- uuid7 types ---
    # SQLite stores SQLAlchemy's ``Uuid`` as 32 lowercase hex digits (CHAR(32)),
    # whose text order is the UUID's byte order, hence time order for UUIDv7.
    # ``sqlite_storage="binary"``: the 16 bytes in a ``BLOB`` (blobs compare with
    # memcmp: the same order, in half the space).
    def uuid7_storage(self, type_: UUIDv7, dialect: Dialect) -> TypeEngine[Any]:
        """Storage type of a ``UUIDv7`` column, by its ``sqlite_storage`` option:
        ``CHAR(32)`` hex (``"char32"``) or the 16 bytes in a ``BLOB`` (``"binary"``)."""
        if type_.sqlite_storage == "binary":
            return Blob16()
        return sa.Uuid()

    # --- uuid7 server function ---
    # SQLite has no stored functions: the function is registered on each DBAPI
    # connection (``sqlite3.Connection.create_function``) by an engine "connect"
    # listener. It returns 32 lowercase hex digits, SQLAlchemy's ``Uuid`` storage
    # on SQLite, from the process-wide monotonic generator.

    def uuid7_function_create_sql(self, name: str, schema: str | None = None) -> list[str]:
        """No DDL: the function lives in the client (see ``uuid7_function_register``)."""
        return []

    def uuid7_function_drop_sql(self, name: str, schema: str | None = None) -> list[str]:
        """No DDL: the function lives in the client."""
        return []

    def uuid7_column_default_sql(self, name: str) -> str:
        """``DEFAULT`` expression of a column filled by the function."""
        return f"({name}())"

    def uuid7_column_after_create_sql(self, name: str, table: str, column: str) -> list[str]:
        """Extra DDL after creating a table with such a column: none on SQLite."""
        return []

    def uuid7_function_register(self, dbapi_connection: Any, name: str) -> None:
        """Register ``name()`` on one ``sqlite3`` connection."""
        from sqla_ids.identifiers import uuid7

        def sqlite_uuid7() -> str:
            return uuid7().hex

        dbapi_connection.create_function(name, 0, sqlite_uuid7, deterministic=False)

    # The serial variant needs nothing more here: the process-wide generator is
    # already monotonic across every connection of the process, and SQLite lets
    # one writer in at a time.
    def uuid7_serial_supported(self, dialect: Any) -> bool:
        """Always: the function is the process-wide generator."""
        return True

    def uuid7_serial_function_create_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """No DDL: registered like the plain function."""
        return []

    def uuid7_serial_function_drop_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """No DDL: the function lives in the client."""
        return []

    # --- uuid7 sql expressions ---
    # UUID192 is a BLOB; UUIDv7 columns are 32 lowercase hex digits. SQLite has no
    # hex-to-integer function, so the 12 timestamp digits are summed one by one.
    def uuid192_storage(self) -> Any:
        """Storage of a ``UUID192Type`` column: ``BLOB``."""
        return sa.LargeBinary()

    def uuid192_uuid_sql(self, inner: str) -> str:
        """SQL of the leading UUID of a UUID192 value (32 hex digits, as ``Uuid`` stores)."""
        return f"lower(hex(substr({inner}, 1, 16)))"

    def uuid7_timestamp_ms_sql(self, inner: str) -> str:
        """SQL of the Unix milliseconds stored in a UUIDv7 (CHAR(32) hex)."""
        digit = "(instr('0123456789abcdef', lower(substr({inner}, {position}, 1))) - 1)"
        digits = " + ".join(
            f"({digit.format(inner=inner, position=i + 1)} << {4 * (11 - i)})" for i in range(12)
        )
        return f"({digits})"
