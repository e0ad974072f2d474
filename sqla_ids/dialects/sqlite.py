"""SQLite pieces of sqla_ids.

Each feature adds its own section below; keep sections independent.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.order_numbers.layout import Layout

# --- order numbers -----------------------------------------------------------
# SQLite has no sequences: a counter table, one row per sequence name. The
# UPDATE takes SQLite's write lock, so the following SELECT in the same
# transaction reads a value no other connection can also get. The CHECK
# constraint is one GLOB per allowed length.

ORDER_NUMBER_COUNTERS = "sqla_ids_counters"


def _order_number_counters(connection: Connection, schema: str | None) -> str:
    preparer = connection.dialect.identifier_preparer
    table = preparer.quote(ORDER_NUMBER_COUNTERS)
    return f"{preparer.quote_schema(schema)}.{table}" if schema else table


def order_number_create_sequence(connection: Connection, name: str, schema: str | None) -> None:
    """Create the counter row ``name`` (and the counter table) if missing."""
    table = _order_number_counters(connection, schema)
    connection.execute(
        sa.text(
            f"CREATE TABLE IF NOT EXISTS {table} (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
        )
    )
    connection.execute(
        sa.text(f"INSERT OR IGNORE INTO {table} (name, value) VALUES (:name, 0)"), {"name": name}
    )


def order_number_drop_sequence(connection: Connection, name: str, schema: str | None) -> None:
    """Remove the counter row ``name``; drop the counter table once empty."""
    table = _order_number_counters(connection, schema)
    if not sa.inspect(connection).has_table(ORDER_NUMBER_COUNTERS, schema=schema):
        return
    connection.execute(sa.text(f"DELETE FROM {table} WHERE name = :name"), {"name": name})
    if not connection.scalar(sa.text(f"SELECT count(*) FROM {table}")):
        connection.execute(sa.text(f"DROP TABLE {table}"))


def order_number_next_value(connection: Connection, name: str, schema: str | None) -> int:
    """Increment and read the counter ``name`` atomically."""
    table = _order_number_counters(connection, schema)
    updated = connection.execute(
        sa.text(f"UPDATE {table} SET value = value + 1 WHERE name = :name"), {"name": name}
    )
    if updated.rowcount != 1:
        raise LookupError(
            f"order-number counter {name!r} does not exist: create its table with "
            "metadata.create_all() / table.create(), which creates the counter"
        )
    value = connection.scalar(
        sa.text(f"SELECT value FROM {table} WHERE name = :name"), {"name": name}
    )
    return int(value)


def order_number_format_check(column_sql: str, layout: Layout) -> str:
    """CHECK constraint text: the column matches one GLOB pattern per length."""
    classes = {"P": layout.payload_class, "C": layout.check_class}
    globs = [
        "".join(classes.get(char, char) for char in template) for template in layout.templates()
    ]
    return "(" + " OR ".join(f"{column_sql} GLOB '{g}'" for g in globs) + ")"


# --- uuid7 types ---
# SQLite stores SQLAlchemy's ``Uuid`` as 32 lowercase hex digits (CHAR(32)),
# whose text order is the UUID's byte order, hence time order for UUIDv7.
def uuid7_storage(type_: Any, dialect: Any) -> Any:
    """Storage type of a ``UUIDv7`` column: ``CHAR(32)`` hex."""
    return sa.Uuid()


# --- tools ---
# SQL of the UUID tools (find, relations) lives in its own module, named here.
TOOLS_MODULE = "sqla_ids.tools.dialects.sqlite"


# --- uuid7 server function ---
# SQLite has no stored functions: the function is registered on each DBAPI
# connection (``sqlite3.Connection.create_function``) by an engine "connect"
# listener. It returns 32 lowercase hex digits, SQLAlchemy's ``Uuid`` storage
# on SQLite, from the process-wide monotonic generator.


def uuid7_function_create_sql(name: str) -> list[str]:
    """No DDL: the function lives in the client (see ``uuid7_function_register``)."""
    return []


def uuid7_function_drop_sql(name: str) -> list[str]:
    """No DDL: the function lives in the client."""
    return []


def uuid7_column_default_sql(name: str) -> str:
    """``DEFAULT`` expression of a column filled by the function."""
    return f"({name}())"


def uuid7_column_after_create_sql(name: str, table: str, column: str) -> list[str]:
    """Extra DDL after creating a table with such a column: none on SQLite."""
    return []


def uuid7_function_register(dbapi_connection: Any, name: str) -> None:
    """Register ``name()`` on one ``sqlite3`` connection."""
    from sqla_ids.identifiers import uuid7

    def sqlite_uuid7() -> str:
        return uuid7().hex

    dbapi_connection.create_function(name, 0, sqlite_uuid7, deterministic=False)


# The serial variant needs nothing more here: the process-wide generator is
# already monotonic across every connection of the process, and SQLite lets
# one writer in at a time.
def uuid7_serial_supported(dialect: Any) -> bool:
    """Always: the function is the process-wide generator."""
    return True


def uuid7_serial_function_create_sql(name: str, sequence: str) -> list[str]:
    """No DDL: registered like the plain function."""
    return []


def uuid7_serial_function_drop_sql(name: str, sequence: str) -> list[str]:
    """No DDL: the function lives in the client."""
    return []


# --- uuid7 sql expressions ---
# UUID192 is a BLOB; UUIDv7 columns are 32 lowercase hex digits. SQLite has no
# hex-to-integer function, so the 12 timestamp digits are summed one by one.
def uuid192_storage() -> Any:
    """Storage of a ``UUID192Type`` column: ``BLOB``."""
    return sa.LargeBinary()


def uuid192_uuid_sql(inner: str) -> str:
    """SQL of the leading UUID of a UUID192 value (32 hex digits, as ``Uuid`` stores)."""
    return f"lower(hex(substr({inner}, 1, 16)))"


def uuid7_timestamp_ms_sql(inner: str) -> str:
    """SQL of the Unix milliseconds stored in a UUIDv7 (CHAR(32) hex)."""
    digits = " + ".join(
        f"((instr('0123456789abcdef', lower(substr({inner}, {i + 1}, 1))) - 1) << {4 * (11 - i)})"
        for i in range(12)
    )
    return f"({digits})"


# --- alembic DDL capabilities ---

ALTER_TABLE_ADD_CHECK = False  # SQLite cannot add a constraint to an existing table


# --- insert benchmark ---
# ``sqla-ids bench`` and benchmarks/insert_keys.py work in a throw-away
# database file next to the user's (same disk), never in the user's file.
# Index size comes from the dbstat virtual table where SQLite has it.

BENCH_METHODS = ("core",)
BENCH_CONCURRENT = False  # one writer at a time: SQLite locks the whole file


def bench_key_ddl(dialect: Any) -> dict[str, str]:
    """The ``id`` column DDL of the benchmark table per key column kind."""
    return {
        "bigint": "id INTEGER PRIMARY KEY",
        "uuid": "id CHAR(32) PRIMARY KEY",
        "text": "id TEXT PRIMARY KEY",
    }


def bench_key_type(dialect: Any, column: str) -> Any:
    """The type an application declares for ``column``: ``Uuid`` stores ``CHAR(32)`` hex."""
    return sa.Text() if column == "text" else sa.Uuid()


def bench_index_stats(
    connection: Connection, table: str
) -> tuple[int | None, float | None, float | None]:
    """Bytes of the primary-key b-tree of ``table`` (the table itself for INTEGER keys)."""
    try:
        value = connection.exec_driver_sql(
            "SELECT sum(pgsize) FROM dbstat WHERE name = "
            f"coalesce((SELECT name FROM sqlite_master WHERE tbl_name = '{table}' "
            "AND type = 'index'), ?)",
            (table,),
        ).scalar()
    except sa.exc.OperationalError:  # SQLite built without dbstat
        return None, None, None
    return (None if value is None else int(value)), None, None


def bench_wal_position(connection: Connection) -> int | None:
    """Not measured on SQLite."""
    return None


def _bench_scratch_path(url: sa.URL, name: str) -> str:
    import os
    import tempfile

    database = url.database or ""
    folder = (
        os.path.dirname(os.path.abspath(database))
        if database and database != ":memory:" and not database.startswith("file:")
        else tempfile.gettempdir()
    )
    return os.path.join(folder, f"{name}.sqlite3")


def bench_scratch_create(admin: sa.Engine, url: sa.URL, name: str) -> sa.URL:
    """A URL of the throw-away database file ``name`` next to the user's database."""
    return url.set(database=_bench_scratch_path(url, name), query={})


def bench_scratch_drop(admin: sa.Engine, url: sa.URL, name: str) -> None:
    """Delete the throw-away database file (and its journal files)."""
    import os

    path = _bench_scratch_path(url, name)
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
