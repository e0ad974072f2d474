"""MariaDB and MySQL pieces of sqla_ids.

Each feature adds its own section below; keep sections independent.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.order_numbers.layout import Layout

# --- order numbers -----------------------------------------------------------
# MariaDB >= 10.3 has SEQUENCE objects; the CHECK constraint uses REGEXP.
# MySQL has no sequences: order-number defaults are MariaDB-only here.


def order_number_create_sequence(connection: Connection, name: str, schema: str | None) -> None:
    """Create the order-number sequence ``name`` (no-op if it exists)."""
    if not connection.dialect.supports_sequences:
        raise NotImplementedError(
            "order-number sequences need MariaDB 10.3 or later (MySQL has no SEQUENCE)"
        )
    sequence = sa.Sequence(name, schema=schema, start=1)
    connection.execute(sa.schema.CreateSequence(sequence, if_not_exists=True))


def order_number_drop_sequence(connection: Connection, name: str, schema: str | None) -> None:
    """Drop the order-number sequence ``name`` if it exists."""
    if connection.dialect.supports_sequences:
        connection.execute(sa.schema.DropSequence(sa.Sequence(name, schema=schema), if_exists=True))


def order_number_next_value(connection: Connection, name: str, schema: str | None) -> int:
    """``NEXTVAL`` of the sequence: atomic across connections, never rolled back."""
    sequence = sa.Sequence(name, schema=schema)
    return int(connection.execute(sa.select(sequence.next_value())).scalar_one())


def order_number_format_check(column_sql: str, layout: Layout) -> str:
    """CHECK constraint text: the column matches the display regex."""
    # Backslashes are escapes in MariaDB string literals; letters must match
    # case-sensitively whatever the column's collation.
    pattern = layout.display_regex().replace("\\", "\\\\")
    if not layout.alphabet.symbols.isdecimal():
        pattern = "(?-i)" + pattern
    return f"{column_sql} REGEXP '{pattern}'"


# --- uuid7 types ---
# MariaDB >= 10.7 has a native 16-byte ``UUID`` type. It stores (and sorts)
# every UUID other than version 1 in plain byte order, so UUIDv7 keeps time
# order (verified in tests/test_types_uuid7.py). MySQL has no such type.
# SQLAlchemy 2.1 picks native UUID on MariaDB and 2.0 picks CHAR(32); we
# choose explicitly so both versions create the same column.
_MARIADB_NATIVE_UUID = (10, 7)


def uuid7_storage(type_: Any, dialect: Any) -> Any:
    """Storage type of a ``UUIDv7`` column: native ``UUID`` on MariaDB ≥ 10.7 or ``CHAR(32)``."""
    version = getattr(dialect, "server_version_info", None) or ()
    native = (
        type_.mariadb_native
        and getattr(dialect, "is_mariadb", False)
        and tuple(version) >= _MARIADB_NATIVE_UUID
    )
    if native:
        # ``UUID`` renders the native type on both SQLAlchemy 2.0 and 2.1; on
        # 2.0 it binds 32-hex text, which MariaDB's UUID type accepts.
        return sa.UUID()
    return sa.Uuid(native_uuid=False)


# --- tools ---
# SQL of the UUID tools (find, relations) lives in its own module, named here.
TOOLS_MODULE = "sqla_ids.tools.dialects.mysql"
