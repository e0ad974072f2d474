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
