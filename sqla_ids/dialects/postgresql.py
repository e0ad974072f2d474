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


# --- uuid7 server function ---
# PostgreSQL >= 18 has a native ``uuidv7()``; older servers get our function.
# It packs a 1/4096 ms tick (12 sub-millisecond bits in rand_a, RFC 9562 §6.2
# method 3) kept strictly increasing per database session in a custom
# setting, so values from one connection always increase; across connections
# they follow the server clock. It is one SQL expression, so the planner
# inlines it (no PL/pgSQL call per row: about 2.5x faster). The hex of the
# tick is 12 digits of milliseconds + 3 of sub-millisecond; ``overlay(... FOR
# 0)`` inserts the version digit between them, and gen_random_uuid() gives
# the variant and 62 random bits. The version test runs on the server (a DO
# block), so offline ``--sql`` scripts work too.
_UUID7_SQL = """\
CREATE OR REPLACE FUNCTION {name}() RETURNS uuid LANGUAGE sql VOLATILE AS $fn$
SELECT (overlay(lpad(to_hex(set_config('sqla_ids.uuid7_tick', greatest(
    (extract(epoch FROM clock_timestamp()) * 4096000)::bigint,
    coalesce(nullif(current_setting('sqla_ids.uuid7_tick', true), '')::bigint + 1, 0)
  )::text, false)::bigint), 15, '0') PLACING '7' FROM 13 FOR 0)
  || substr(gen_random_uuid()::text, 20))::uuid
$fn$"""

_UUID7_INSTALL = """\
DO $do$
BEGIN
  IF current_setting('server_version_num')::int >= 180000 THEN
    EXECUTE 'CREATE OR REPLACE FUNCTION {name}() RETURNS uuid LANGUAGE sql VOLATILE '
      'AS ''SELECT uuidv7()''';
  ELSE
    EXECUTE $sql${body}$sql$;
  END IF;
END
$do$"""


def uuid7_function_create_sql(name: str) -> list[str]:
    """Statements creating the UUIDv7 function ``name()``."""
    return [_UUID7_INSTALL.format(name=name, body=_UUID7_SQL.format(name=name))]


def uuid7_function_drop_sql(name: str) -> list[str]:
    """Statements dropping the UUIDv7 function ``name()``."""
    return [f"DROP FUNCTION IF EXISTS {name}()"]


def uuid7_column_default_sql(name: str) -> str:
    """``DEFAULT`` expression of a column filled by the function."""
    return f"{name}()"


def uuid7_column_after_create_sql(name: str, table: str, column: str) -> list[str]:
    """Extra DDL after creating a table with such a column: none on PostgreSQL."""
    return []


# The serial variant, ``sqla_ids_uuid7_serial()``, orders values across
# connections: after the millisecond come 44 bits of a SEQUENCE (12 in rand_a,
# 32 after the variant nibble, which is fixed to 8), then 28 random bits.
# nextval is atomic and CACHE 1 hands out values in call order, so a call that
# starts after another has returned gets a later-or-equal millisecond and a
# larger sequence value: a greater UUID, whichever connection made it. The
# millisecond is also kept from going back per session, like the tick above.
# The sequence's name is schema-qualified when the function is created (a DO
# block puts current_schema() in place of @seq@), so callers with another
# search_path work.
UUID7_SERIAL_MAX = 2**44 - 1
"""Largest sequence value the serial layout holds; the sequence cycles after it."""

_UUID7_SERIAL_SQL = """\
CREATE OR REPLACE FUNCTION {name}() RETURNS uuid LANGUAGE sql VOLATILE AS $fn$
SELECT (lpad(to_hex(set_config('sqla_ids.uuid7_serial_ms', greatest(
    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
    coalesce(nullif(current_setting('sqla_ids.uuid7_serial_ms', true), '')::bigint, 0)
  )::text, false)::bigint), 12, '0') || '7'
  || overlay(lpad(to_hex(nextval('@seq@'::regclass)), 11, '0') PLACING '8' FROM 4 FOR 0)
  || substr(gen_random_uuid()::text, 1, 7))::uuid
$fn$"""


def uuid7_serial_supported(dialect: Any) -> bool:
    """Every supported PostgreSQL has sequences."""
    return True


def uuid7_serial_function_create_sql(name: str, sequence: str) -> list[str]:
    """Statements creating ``sequence`` and the serial UUIDv7 function ``name()``."""
    body = _UUID7_SERIAL_SQL.format(name=name)
    return [
        # CACHE 1: a per-session cache would hand out values out of call order.
        f"CREATE SEQUENCE IF NOT EXISTS {sequence} AS bigint MAXVALUE {UUID7_SERIAL_MAX} "
        "CACHE 1 CYCLE",
        f"DO $do$\nBEGIN\n  EXECUTE replace($sql${body}$sql$, $q$'@seq@'$q$,\n"
        f"    quote_literal(quote_ident(current_schema()) || '.{sequence}'));\nEND\n$do$",
    ]


def uuid7_serial_function_drop_sql(name: str, sequence: str) -> list[str]:
    """Statements dropping the serial function and its sequence."""
    return [f"DROP FUNCTION IF EXISTS {name}()", f"DROP SEQUENCE IF EXISTS {sequence}"]


# --- uuid7 sql expressions ---
# UUID192 is ``bytea``; its first 16 bytes are the UUID. A UUIDv7's
# millisecond timestamp is its first 12 hex digits.
def uuid192_storage() -> Any:
    """Storage of a ``UUID192Type`` column: ``bytea``."""
    from sqlalchemy.dialects.postgresql import BYTEA

    return BYTEA()


def uuid192_uuid_sql(inner: str) -> str:
    """SQL of the leading UUID of a UUID192 value."""
    return f"CAST(encode(substring({inner} FROM 1 FOR 16), 'hex') AS uuid)"


def uuid7_timestamp_ms_sql(inner: str) -> str:
    """SQL of the Unix milliseconds stored in a UUIDv7 (bigint)."""
    return f"('x' || substr(replace(CAST({inner} AS text), '-', ''), 1, 12))::bit(48)::bigint"


def uuid7_month_partition_sql(
    table: str, schema: str | None, name: str, low: Any, high: Any
) -> str:
    """``CREATE TABLE … PARTITION OF`` for one UUIDv7 range ``[low, high)``."""
    prefix = f'"{schema}".' if schema else ""
    return (
        f'CREATE TABLE IF NOT EXISTS {prefix}"{name}" PARTITION OF {prefix}"{table}" '
        f"FOR VALUES FROM ('{low}') TO ('{high}')"
    )


# --- alembic DDL capabilities ---

ALTER_TABLE_ADD_CHECK = True


# --- insert benchmark ---
# ``sqla-ids bench`` and benchmarks/insert_keys.py work in a throw-away schema
# (first in search_path, so our server function lands there too and goes with
# it). Leaf density and fragmentation come from pgstattuple's pgstatindex;
# WAL bytes from the insert position, which is server-wide.

BENCH_METHODS = ("core", "COPY")
BENCH_CONCURRENT = True  # concurrent writers are measured


def bench_key_ddl(dialect: Any) -> dict[str, str]:
    """The ``id`` column DDL of the benchmark table per key column kind."""
    return {
        "bigint": "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        "uuid": "id UUID PRIMARY KEY",
        "text": "id TEXT PRIMARY KEY",
        "gen_random_uuid": "id UUID DEFAULT gen_random_uuid() PRIMARY KEY",
    }


def bench_key_type(dialect: Any, column: str) -> Any:
    """The type an application declares for ``column`` (keys from other libraries)."""
    return sa.Text() if column == "text" else sa.Uuid()


def bench_index_stats(
    connection: Connection, table: str
) -> tuple[int | None, float | None, float | None]:
    """Primary-key index bytes, leaf density % and leaf fragmentation % of ``table``."""
    index = connection.exec_driver_sql(
        "SELECT indexrelid::regclass::text FROM pg_index "
        f"WHERE indrelid = '{table}'::regclass AND indisprimary"
    ).scalar_one()
    size = int(connection.exec_driver_sql(f"SELECT pg_relation_size('{index}')").scalar_one())
    schema = connection.exec_driver_sql(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'pgstattuple'"
    ).scalar()
    if schema is None:
        return size, None, None
    try:
        with connection.begin_nested():  # pgstatindex needs a privilege the user may lack
            density, fragmentation = connection.exec_driver_sql(
                f"SELECT avg_leaf_density, leaf_fragmentation "
                f"FROM \"{schema}\".pgstatindex('{index}')"
            ).one()
    except sa.exc.DBAPIError:
        return size, None, None
    return size, float(density), float(fragmentation)


def bench_settle(connection: Connection) -> None:
    """Write out the previous run's dirty pages first (``CHECKPOINT``), if allowed.

    Otherwise the checkpointer may flush them while the next run is timed.
    """
    try:
        with connection.begin_nested():  # needs superuser or pg_checkpoint
            connection.exec_driver_sql("CHECKPOINT")
    except sa.exc.DBAPIError:
        pass


def bench_wal_position(connection: Connection) -> int | None:
    """The server's WAL insert position in bytes (differences give WAL volume)."""
    try:
        with connection.begin_nested():
            value = connection.exec_driver_sql(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')"
            ).scalar()
    except sa.exc.DBAPIError:
        return None
    return None if value is None else int(value)


def bench_copy(connection: Connection, table: str, keys: list[Any] | None, rows: int) -> None:
    """Load ``rows`` rows (``n`` = 0 … rows-1, ids from ``keys``) with psycopg ``COPY``."""
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    columns = "(n)" if keys is None else "(id, n)"
    with cursor.copy(f"COPY {table} {columns} FROM STDIN") as copy:
        if keys is None:
            for n in range(rows):
                copy.write_row((n,))
        else:
            for n in range(rows):
                copy.write_row((keys[n], n))


def bench_scratch_create(admin: sa.Engine, url: sa.URL, name: str) -> sa.URL:
    """Create the throw-away schema ``name``; return a URL that works inside it."""
    from contextlib import suppress

    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        installed = connection.exec_driver_sql(
            "SELECT 1 FROM pg_extension WHERE extname = 'pgstattuple'"
        ).scalar()
        if installed is None:
            # Into the scratch schema, so it goes when the schema goes; where it is
            # not available or not allowed, density is reported as n/a.
            with suppress(sa.exc.DBAPIError):
                connection.exec_driver_sql(f'CREATE EXTENSION pgstattuple SCHEMA "{name}"')
    options = url.query.get("options", "")
    if not isinstance(options, str):
        options = " ".join(options)
    # A later -c wins, so the user's other options stay and our search_path applies.
    return url.update_query_dict({"options": f"{options} -csearch_path={name},public".strip()})


def bench_scratch_drop(admin: sa.Engine, url: sa.URL, name: str) -> None:
    """Drop the throw-away schema ``name`` and everything in it."""
    with admin.connect() as connection:
        connection.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
