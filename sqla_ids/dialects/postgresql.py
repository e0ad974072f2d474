"""PostgreSQL pieces of sqla_ids.

Each feature adds its own section below; keep sections independent.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.order_numbers.layout import Layout

# --- order numbers -----------------------------------------------------------
# A real SEQUENCE feeds FormattedOrderNumber's default; the CHECK constraint
# is a POSIX regular expression (``~``).


def order_number_create_sequence(connection: Connection, name: str, schema: str | None) -> None:
    """Create the order-number sequence ``name`` (no-op if it exists)."""
    sequence = sa.Sequence(name, schema=schema, start=1)
    connection.execute(sa.schema.CreateSequence(sequence, if_not_exists=True))


def order_number_drop_sequence(connection: Connection, name: str, schema: str | None) -> None:
    """Drop the order-number sequence ``name`` if it exists."""
    connection.execute(sa.schema.DropSequence(sa.Sequence(name, schema=schema), if_exists=True))


def order_number_next_value(connection: Connection, name: str, schema: str | None) -> int:
    """``nextval`` of the sequence: atomic across connections, never rolled back."""
    sequence = sa.Sequence(name, schema=schema)
    return int(connection.execute(sa.select(sequence.next_value())).scalar_one())


def order_number_format_check(column_sql: str, layout: Layout) -> str:
    """CHECK constraint text: the column matches the display regex."""
    return f"{column_sql} ~ '{layout.display_regex()}'"


# --- uuid7 types ---
# PostgreSQL's native ``uuid`` compares bytes left to right, so UUIDv7 values
# sort by time as stored.
def uuid7_storage(type_: Any, dialect: Any) -> Any:
    """Storage type of a ``UUIDv7`` column: native ``uuid``."""
    return sa.Uuid()


# --- tools ---
# SQL of the UUID tools (find, relations) lives in its own module, named here.
TOOLS_MODULE = "sqla_ids.tools.dialects.postgresql"
