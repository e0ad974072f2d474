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


# --- uuid7 server function ---
# MariaDB/MySQL forbid stored functions in DEFAULT, so a column gets a nil
# placeholder default and a BEFORE INSERT trigger replaces it. The function is
# one RETURN expression (no BEGIN ... END), so offline scripts need no
# DELIMITER. It packs a 1/4096 ms tick (RFC 9562 §6.2 method 3) kept strictly
# increasing per connection in a user variable; ``@@timestamp`` is the
# statement's Unix time, independent of the session time zone. It returns 32
# hex digits, which both native UUID and CHAR(32) columns accept.
_UUID7_NIL = "00000000000000000000000000000000"
_UUID7_FUNCTION = """\
CREATE FUNCTION IF NOT EXISTS {name}() RETURNS CHAR(32) CHARSET ascii NOT DETERMINISTIC NO SQL
RETURN LOWER(CONCAT(
  LPAD(HEX((@sqla_ids_uuid7_tick := GREATEST(CAST(@@timestamp * 4096000 AS UNSIGNED),
    COALESCE(@sqla_ids_uuid7_tick + 1, 0))) >> 12), 12, '0'),
  '7', LPAD(HEX(@sqla_ids_uuid7_tick & 4095), 3, '0'),
  HEX(8 | (ASCII(RANDOM_BYTES(1)) & 3)), SUBSTRING(HEX(RANDOM_BYTES(8)), 2)))"""


# The serial variant, ``sqla_ids_uuid7_serial()``, orders values across
# connections with the layout of the PostgreSQL one: the millisecond, then 44
# bits of a SEQUENCE (MariaDB >= 10.3; its cache is shared by all
# connections, so values come out in call order), then 28 random bits. It
# reads the clock at the call (``SYSDATE(6)``), not at the statement's start
# like ``@@timestamp``, so a long statement cannot stamp late rows early.
# ``UNIX_TIMESTAMP`` of a local time is exact unless the session time zone
# has daylight saving (one ambiguous hour a year); the per-connection
# millisecond never goes back.
_UUID7_SERIAL_MAX = 2**44 - 1
_UUID7_SERIAL_FUNCTION = """\
CREATE FUNCTION IF NOT EXISTS {name}() RETURNS CHAR(32) CHARSET ascii
NOT DETERMINISTIC MODIFIES SQL DATA
RETURN LOWER(CONCAT(
  LPAD(HEX(@sqla_ids_uuid7_serial_ms := GREATEST(
    CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000 AS UNSIGNED), COALESCE(@sqla_ids_uuid7_serial_ms, 0))),
    12, '0'),
  '7', INSERT(LPAD(HEX(NEXTVAL({sequence})), 11, '0'), 4, 0, '8'),
  SUBSTRING(HEX(RANDOM_BYTES(4)), 2)))"""


def uuid7_serial_supported(dialect: Any) -> bool:
    """MariaDB 10.3+ has sequences; MySQL has none."""
    return bool(dialect.supports_sequences)


def uuid7_serial_function_create_sql(name: str, sequence: str) -> list[str]:
    """Statements creating ``sequence`` and the serial UUIDv7 function ``name()``."""
    return [
        f"CREATE SEQUENCE IF NOT EXISTS {sequence} MAXVALUE {_UUID7_SERIAL_MAX} CYCLE",
        _UUID7_SERIAL_FUNCTION.format(name=name, sequence=sequence),
    ]


def uuid7_serial_function_drop_sql(name: str, sequence: str) -> list[str]:
    """Statements dropping the serial function and its sequence."""
    return [f"DROP FUNCTION IF EXISTS {name}", f"DROP SEQUENCE IF EXISTS {sequence}"]


def uuid7_function_create_sql(name: str) -> list[str]:
    """Statements creating the UUIDv7 function ``name()``."""
    return [_UUID7_FUNCTION.format(name=name)]


def uuid7_function_drop_sql(name: str) -> list[str]:
    """Statements dropping the UUIDv7 function ``name()``."""
    return [f"DROP FUNCTION IF EXISTS {name}"]


def uuid7_column_default_sql(name: str) -> str:
    """``DEFAULT`` of a column filled by the function: a nil placeholder the trigger replaces."""
    return f"'{_UUID7_NIL}'"


def uuid7_column_after_create_sql(name: str, table: str, column: str) -> list[str]:
    """The BEFORE INSERT trigger filling ``column`` (already quoted names)."""
    # The trigger lives in the table's schema: `db`.`t` -> `db`.`t_id_uuid7`.
    schema, _, table_name = table.rpartition(".")
    trigger = f"{schema + '.' if schema else ''}`{table_name.strip('`')}_{column.strip('`')}_uuid7`"
    return [
        f"CREATE TRIGGER IF NOT EXISTS {trigger} BEFORE INSERT ON {table} FOR EACH ROW "
        f"SET NEW.{column} = IF(NEW.{column} IS NULL OR NEW.{column} = '{_UUID7_NIL}', "
        f"{name}(), NEW.{column})"
    ]


# --- uuid7 sql expressions ---
# UUID192 is VARBINARY(24) (indexable, unlike BLOB). In string context a
# native UUID reads with dashes and a CHAR(32) one without, so the SQL strips
# dashes; 32 lowercase hex digits compare equal to either storage.
def uuid192_storage() -> Any:
    """Storage of a ``UUID192Type`` column: ``VARBINARY(24)``."""
    return sa.VARBINARY(24)


def uuid192_uuid_sql(inner: str) -> str:
    """SQL of the leading UUID of a UUID192 value (32 hex digits)."""
    return f"LOWER(HEX(SUBSTRING({inner}, 1, 16)))"


def uuid7_timestamp_ms_sql(inner: str) -> str:
    """SQL of the Unix milliseconds stored in a UUIDv7."""
    return f"CAST(CONV(LEFT(REPLACE(CAST({inner} AS CHAR), '-', ''), 12), 16, 10) AS UNSIGNED)"


# --- alembic DDL capabilities ---

ALTER_TABLE_ADD_CHECK = True


# --- insert benchmark ---
# ``sqla-ids bench`` and benchmarks/insert_keys.py work in a throw-away
# database. InnoDB clusters rows by primary key, so the PK index is the
# table's data_length. Native UUID on MariaDB >= 10.7, else CHAR(32) as
# SQLAlchemy's Uuid stores it.

BENCH_METHODS = ("core",)
BENCH_CONCURRENT = True  # concurrent writers are measured


def _bench_native_uuid(dialect: Any) -> bool:
    return bool(
        getattr(dialect, "is_mariadb", False)
        and (dialect.server_version_info or (0,)) >= _MARIADB_NATIVE_UUID
    )


def bench_key_ddl(dialect: Any) -> dict[str, str]:
    """The ``id`` column DDL of the benchmark table per key column kind."""
    return {
        "bigint": "id BIGINT AUTO_INCREMENT PRIMARY KEY",
        "uuid": "id UUID PRIMARY KEY"
        if _bench_native_uuid(dialect)
        else "id CHAR(32) CHARACTER SET ascii PRIMARY KEY",
        "text": "id VARCHAR(36) CHARACTER SET ascii PRIMARY KEY",
    }


def bench_key_type(dialect: Any, column: str) -> Any:
    """The type an application declares for ``column``, matching :func:`bench_key_ddl`."""
    if column == "text":
        return sa.Text()
    return sa.UUID() if _bench_native_uuid(dialect) else sa.Uuid(native_uuid=False)


def bench_index_stats(
    connection: Connection, table: str
) -> tuple[int | None, float | None, float | None]:
    """Primary-key bytes (the clustered table) of ``table``; no density on InnoDB."""
    connection.exec_driver_sql(f"ANALYZE TABLE {table}").all()
    value = connection.exec_driver_sql(
        "SELECT data_length FROM information_schema.tables "
        f"WHERE table_schema = DATABASE() AND table_name = '{table}'"
    ).scalar()
    return (None if value is None else int(value)), None, None


def bench_wal_position(connection: Connection) -> int | None:
    """Not measured on MariaDB/MySQL."""
    return None


def bench_scratch_create(admin: sa.Engine, url: sa.URL, name: str) -> sa.URL:
    """Create the throw-away database ``name``; return a URL that works inside it."""
    with admin.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE `{name}`")
    return url.set(database=name)


def bench_scratch_drop(admin: sa.Engine, url: sa.URL, name: str) -> None:
    """Drop the throw-away database ``name`` and everything in it."""
    with admin.connect() as connection:
        connection.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
