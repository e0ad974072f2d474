"""PostgreSQL: DDL and column types (order-number sequences, UUIDv7 storage,
the server-side UUIDv7 function, UUID192 and partition SQL).

Each feature has its own section in the class; keep sections independent.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.base import Database
from sqla_ids.dialects.order_number_owner import (
    OrderNumberOwner,
    OwnedSequence,
    SequenceCommentStatement,
    can_read,
    owned_sequences,
    owners_record,
    with_owner,
)

if TYPE_CHECKING:
    from sqla_ids.dialects.bench import Bench
    from sqla_ids.dialects.scanning import Scanning
    from sqla_ids.order_numbers.format import OrderNumberFormat


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    """``text`` as a SQL string literal, whatever ``standard_conforming_strings``
    says: with a backslash in it, an escape string (``E'...'``), in which a
    backslash is always an escape (in a plain literal it is one only when that
    setting is off -- and then ``\'`` would end the string early)."""
    if "\\" in text:
        return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + text.replace("'", "''") + "'"


def _dollar_quoted(text: str, tag: str) -> str:
    """``text`` as a dollar-quoted SQL string, with a tag ``text`` does not contain."""
    candidate, n = tag, 0
    while f"${candidate}$" in text or text.endswith(f"${candidate}"):
        n += 1
        candidate = f"{tag}{n}"
    return f"${candidate}${text}${candidate}$"


def _filled(template: str, **values: str) -> str:
    """SQL of ``template`` with each ``@key@`` replaced by the SQL expression
    ``values[key]``: dollar-quoted pieces and the expressions, concatenated (one
    pass, so a value containing ``@key@`` stays as it is)."""
    pieces = re.split("@(" + "|".join(map(re.escape, values)) + ")@", template)
    return " || ".join(
        values[piece] if i % 2 else _dollar_quoted(piece, "sql") for i, piece in enumerate(pieces)
    )


def _do_block(schema: str | None, body: str) -> str:
    """A DO block running ``body`` with ``s``, the quoted schema: ``schema`` (quoted
    already) or the one ``current_schema()`` names when the block runs (NULL if none)."""
    schema_sql = _literal(schema) if schema is not None else "quote_ident(current_schema())"
    code = f"\nDECLARE\n  s text := {schema_sql};\nBEGIN\n{body}\nEND\n"
    return f"DO {_dollar_quoted(code, 'do')}"


class PostgreSQL(Database):
    """PostgreSQL: native ``uuid``, sequences, SQL functions usable in ``DEFAULT``."""

    names: ClassVar[tuple[str, ...]] = ("postgresql",)
    label: ClassVar[str] = "PostgreSQL"
    alter_table_add_check: ClassVar[bool] = True
    function_in_default: ClassVar[bool] = True
    range_partitions: ClassVar[bool] = True

    def scanning(self) -> Scanning:
        """SQL of the UUID tools (``uuid``, ``bytea``, text, ``jsonb``, arrays)."""
        from sqla_ids.dialects.postgresql.scanning import PostgreSQLScanning

        return PostgreSQLScanning()

    def bench(self) -> Bench:
        """The insert benchmark in a throw-away schema, with ``COPY`` and WAL bytes."""
        from sqla_ids.dialects.postgresql.bench import PostgreSQLBench

        return PostgreSQLBench()

    # --- order numbers -----------------------------------------------------------
    # A real SEQUENCE feeds FormattedOrderNumber's default; the CHECK constraint
    # is a POSIX regular expression (``~``). The sequence's comment records the
    # tables it numbers (sqla_ids.dialects.order_number_owner). An unqualified
    # sequence is created in ``current_schema()``, where it is looked for.

    _ORDER_NUMBER_SEQUENCES = sa.text(
        "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind = 'S' AND n.nspname = coalesce(:schema, current_schema())"
    )
    # Offline (``--sql``), nothing can be read: the script comments a sequence
    # that has no comment yet.
    _ORDER_NUMBER_COMMENT_IF_NONE = """BEGIN
IF NOT EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind = 'S' AND c.relname = {name} AND n.nspname = coalesce({schema}, current_schema())
  AND obj_description(c.oid, 'pg_class') IS NOT NULL) THEN
  COMMENT ON SEQUENCE {sequence} IS {comment};
END IF;
END"""

    def _order_number_comments(
        self, connection: Connection, schema: str | None
    ) -> dict[str, str | None]:
        """Sequence name -> comment, for every sequence of ``schema``."""
        rows = connection.execute(self._ORDER_NUMBER_SEQUENCES, {"schema": schema})
        return {str(name): comment for name, comment in rows}

    def order_number_create_sequence(
        self,
        connection: Connection,
        name: str,
        schema: str | None,
        owner: OrderNumberOwner | None = None,
    ) -> None:
        """Create the order-number sequence ``name`` (no-op if it exists).

        ``owner`` is added to the tables its comment records (a comment that
        is not sqla_ids' own is left alone).
        """
        sequence = sa.Sequence(name, schema=schema, start=1)
        connection.execute(sa.schema.CreateSequence(sequence, if_not_exists=True))
        if owner is None:
            return
        if not can_read(connection):
            connection.execute(
                SequenceCommentStatement(
                    self._ORDER_NUMBER_COMMENT_IF_NONE,
                    sequence,
                    owners_record([owner]),
                    do_block=True,
                )
            )
            return
        comment = with_owner(self._order_number_comments(connection, schema).get(name), owner)
        if comment is not None:
            connection.execute(
                SequenceCommentStatement(
                    "COMMENT ON SEQUENCE {sequence} IS {comment}", sequence, comment
                )
            )

    def order_number_sequences(
        self, connection: Connection, schema: str | None
    ) -> list[OwnedSequence]:
        """The sequences of ``schema`` with each table their comment records."""
        return owned_sequences(self._order_number_comments(connection, schema))

    def order_number_drop_sequence(
        self, connection: Connection, name: str, schema: str | None
    ) -> None:
        """Drop the order-number sequence ``name`` if it exists."""
        connection.execute(sa.schema.DropSequence(sa.Sequence(name, schema=schema), if_exists=True))

    def order_number_next_value(self, connection: Connection, name: str, schema: str | None) -> int:
        """``nextval`` of the sequence: atomic across connections, never rolled back."""
        sequence = sa.Sequence(name, schema=schema)
        return int(connection.execute(sa.select(sequence.next_value())).scalar_one())

    def order_number_format_check(self, column_sql: str, layout: OrderNumberFormat) -> str:
        """CHECK constraint text: the column matches the display regex."""
        return f"{column_sql} ~ '{layout.display_regex()}'"

    # --- uuid7 types ---
    # PostgreSQL's native ``uuid`` compares bytes left to right, so UUIDv7 values
    # sort by time as stored.
    def uuid7_storage(self, type_: Any, dialect: Any) -> Any:
        """Storage type of a ``UUIDv7`` column: native ``uuid``."""
        return sa.Uuid()

    # --- uuid7 server function ---
    # PostgreSQL >= 18 has a native ``uuidv7()``: on such a server a column
    # ``DEFAULT`` calls it directly (uuid7_native_function), so no table depends
    # on our function, and our function is a thin wrapper around it. Older
    # servers get our own: it packs a 1/4096 ms tick (12 sub-millisecond bits in
    # rand_a, RFC 9562 §6.2 method 3) kept strictly increasing per database
    # session in a custom setting, so values from one connection always
    # increase; across connections they follow the server clock. It is one SQL
    # expression, so the planner inlines it (no PL/pgSQL call per row: about
    # 2.5x faster). The hex of the tick is 12 digits of milliseconds + 3 of
    # sub-millisecond; ``overlay(... FOR 0)`` inserts the version digit between
    # them, and gen_random_uuid() gives the variant and 62 random bits.
    #
    # Every statement is a DO block naming the function by schema: the given
    # one, or ``current_schema()`` when the block runs (so offline ``--sql``
    # scripts work too), never a schema further down the search_path. The
    # version test runs on the server for the same reason. The drop keeps the
    # function while anything depends on it (a column DEFAULT, a view):
    # PostgreSQL refuses the DROP, the block notes it and goes on.
    NATIVE_UUIDV7_FROM: ClassVar[tuple[int, ...]] = (18,)
    """First PostgreSQL release with a native ``uuidv7()``."""

    # The connection's next tick: the clock's, or one past the last one made.
    _NEXT_TICK = """greatest(
    (extract(epoch FROM clock_timestamp()) * 4096000)::bigint,
    coalesce(nullif(current_setting('sqla_ids.uuid7_tick', true), '')::bigint + 1, 0)
  )"""
    _UUID7_SQL = f"""\
CREATE OR REPLACE FUNCTION @fn@() RETURNS uuid LANGUAGE sql VOLATILE AS $fn$
SELECT (overlay(lpad(to_hex(set_config('sqla_ids.uuid7_tick', {_NEXT_TICK}::text,
    false)::bigint), 15, '0') PLACING '7' FROM 13 FOR 0)
  || substr(gen_random_uuid()::text, 20))::uuid
$fn$"""

    _UUID7_NATIVE_SQL = (
        "CREATE OR REPLACE FUNCTION @fn@() RETURNS uuid LANGUAGE sql VOLATILE AS 'SELECT uuidv7()'"
    )

    function_ddl_lock: ClassVar[bool] = True
    """The function's (and serial sequence's) create and drop blocks first take a
    transaction advisory lock on the schema (:attr:`FUNCTION_DDL_LOCK_CLASS`, then
    ``hashtext()`` of the quoted schema name): two sessions running ``CREATE OR
    REPLACE FUNCTION`` at once -- application instances starting together, each
    ``metadata.create_all()`` -- fail with "tuple concurrently updated" or a
    duplicate key in ``pg_proc``. Held until the transaction ends, so the next one
    sees the function committed (in autocommit mode the block is its own
    transaction); sessions working in other schemas do not wait."""
    FUNCTION_DDL_LOCK_CLASS: ClassVar[int] = 0x7371_6C61  # "sqla"
    """The first key of :attr:`function_ddl_lock`'s two-key advisory lock."""

    def _function_block(self, schema: str | None, body: str) -> str:
        """A DO block of the function's DDL: ``body`` after the lock (see
        :attr:`function_ddl_lock`; none without a schema, which the body refuses)."""
        if self.function_ddl_lock:
            lock = f"pg_advisory_xact_lock({self.FUNCTION_DDL_LOCK_CLASS}, hashtext(s))"
            body = f"  PERFORM {lock};\n{body}"
        return _do_block(schema, body)

    def _drop_function(self, name: str) -> str:
        """PL/pgSQL dropping ``s.name()`` if ``pg_proc`` has it, read with the
        statement's snapshot, taken after the lock: a session that waited for
        another one's drop finds the function gone. Its cached catalog may still
        name it, and ``DROP FUNCTION IF EXISTS`` alone failed there with "cache
        lookup failed for function" (7 of 8 sessions dropping at once)."""
        return (
            "  IF EXISTS (SELECT FROM pg_catalog.pg_proc WHERE proname = "
            f"{_literal(name)} AND pronamespace = to_regnamespace(s)) THEN\n"
            f"    EXECUTE 'DROP FUNCTION IF EXISTS ' || s || '.' || {_literal(name + '()')};\n"
            "  END IF;\n"
        )

    # No ``%`` anywhere (format(), RAISE's placeholders): drivers such as
    # psycopg read it as a parameter marker even in a statement without any.
    _NO_SCHEMA = (
        "  IF s IS NULL THEN\n"
        "    RAISE EXCEPTION USING MESSAGE = 'sqla_ids: no schema to create the UUIDv7 "
        "function in: search_path (' || current_setting('search_path') "
        "|| ') names no existing schema';\n"
        "  END IF;"
    )

    def uuid7_function_create_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Statements creating the UUIDv7 function ``name()`` in ``schema`` (quoted names)."""
        function = f"s || '.' || {_literal(name)}"
        return [
            self._function_block(
                schema,
                f"{self._NO_SCHEMA}\n"
                "  IF current_setting('server_version_num')::int >= "
                f"{self.NATIVE_UUIDV7_FROM[0] * 10000} THEN\n"
                f"    EXECUTE {_filled(self._UUID7_NATIVE_SQL, fn=function)};\n"
                "  ELSE\n"
                f"    EXECUTE {_filled(self._UUID7_SQL, fn=function)};\n"
                "  END IF;",
            )
        ]

    def uuid7_function_drop_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Statements dropping ``schema.name()`` unless something depends on it."""
        return [
            self._function_block(
                schema,
                "  IF s IS NULL THEN\n    RETURN;\n  END IF;\n"
                f"{self._drop_function(name)}"
                "EXCEPTION WHEN dependent_objects_still_exist THEN\n"
                "  RAISE NOTICE USING MESSAGE = 'sqla_ids: kept the UUIDv7 function: ' || SQLERRM;",
            )
        ]

    def uuid7_function_schema(self, connection: Connection) -> str | None:
        """``current_schema()``: where unqualified names are created."""
        schema = connection.exec_driver_sql("SELECT current_schema()").scalar()
        return None if schema is None else str(schema)

    def uuid7_function_users(self, connection: Connection, name: str, schema: str) -> list[str]:
        """Objects depending on ``schema.name()`` (column defaults, views...), described."""
        rows = connection.execute(
            sa.text(
                "SELECT pg_describe_object(classid, objid, objsubid) FROM pg_depend "
                "WHERE refclassid = 'pg_proc'::regclass AND deptype = 'n' AND refobjid = "
                "to_regprocedure(quote_ident(:schema) || '.' || quote_ident(:name) || '()') "
                "ORDER BY 1"
            ),
            {"schema": schema, "name": name},
        )
        return [str(description) for description in rows.scalars()]

    def uuid7_native_function(self, dialect: Any) -> str | None:
        """``uuidv7`` on PostgreSQL 18+ (decided from the connected server's version)."""
        version = tuple(dialect.server_version_info or ())
        return "uuidv7" if version >= self.NATIVE_UUIDV7_FROM else None

    def uuid7_column_default_sql(self, name: str) -> str:
        """``DEFAULT`` expression of a column filled by the function."""
        return f"{name}()"

    # A block of ticks for keys assembled by the client (identifiers.server_layouts):
    # the session's tick moves on by :count at once, as if the function had
    # been called :count times, so the function's later keys sort after them.
    def uuid7_reserve_ticks_sql(self) -> str | None:
        """Reserves ``:count`` ticks of ``sqla_ids_uuid7()``'s state; returns the first."""
        return (
            "SELECT set_config('sqla_ids.uuid7_tick', "
            f"({self._NEXT_TICK} + CAST(:count AS bigint) - 1)::text, false)::bigint"
            " - CAST(:count AS bigint) + 1"
        )

    def uuid7_column_after_create_sql(self, name: str, table: str, column: str) -> list[str]:
        """Extra DDL after creating a table with such a column: none on PostgreSQL."""
        return []

    # The serial variant, ``sqla_ids_uuid7_serial()``, orders values across
    # connections: after the millisecond come 44 bits of a SEQUENCE (12 in rand_a,
    # 32 after the variant nibble, which is fixed to 8), then 28 random bits.
    # nextval is atomic and CACHE 1 hands out values in call order, so a call that
    # starts after another has returned gets a later-or-equal millisecond and a
    # larger sequence value: a greater UUID, whichever connection made it. The
    # millisecond is also kept from going back per session, like the tick above.
    # The function names its sequence by schema (a literal, @seq@ below), so callers
    # with another search_path work. PostgreSQL has no native equivalent.
    UUID7_SERIAL_MAX = 2**44 - 1
    """Largest sequence value the serial layout holds; the sequence cycles after it."""

    # The session's millisecond, never going back (set and returned).
    _SERIAL_MS = """set_config('sqla_ids.uuid7_serial_ms', greatest(
    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
    coalesce(nullif(current_setting('sqla_ids.uuid7_serial_ms', true), '')::bigint, 0)
  )::text, false)::bigint"""
    _UUID7_SERIAL_SQL = f"""\
CREATE OR REPLACE FUNCTION @fn@() RETURNS uuid LANGUAGE sql VOLATILE AS $fn$
SELECT (lpad(to_hex({_SERIAL_MS}), 12, '0') || '7'
  || overlay(lpad(to_hex(nextval(@seq@::regclass)), 11, '0') PLACING '8' FROM 4 FOR 0)
  || substr(gen_random_uuid()::text, 1, 7))::uuid
$fn$"""

    def uuid7_serial_supported(self, dialect: Any) -> bool:
        """Every supported PostgreSQL has sequences."""
        return True

    # A block of serial keys: the millisecond read once, then sequence values. A
    # call starting after the block was fetched still gets a later-or-equal
    # millisecond and a larger value, as after one call of the function.
    def uuid7_serial_reserve_sql(self, sequence: str) -> tuple[str, str] | None:
        """The session's millisecond (set and returned), then up to ``:count``
        values of ``sequence`` (quoted; resolved like the function's name)."""
        return (
            f"SELECT {self._SERIAL_MS}",
            # A regclass literal is looked up once, when the statement is parsed;
            # one text, not a row per value (measured: 2 us per row to fetch).
            f"SELECT string_agg(nextval({_literal(sequence)}::regclass)::text, ',')"
            " FROM generate_series(1, CAST(:count AS integer))",
        )

    def uuid7_serial_function_create_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Statements creating ``sequence`` and the serial UUIDv7 function ``name()``."""
        seq = f"s || '.' || {_literal(sequence)}"
        return [
            self._function_block(
                schema,
                f"{self._NO_SCHEMA}\n"
                # CACHE 1: a per-session cache would hand out values out of call order.
                f"  EXECUTE 'CREATE SEQUENCE IF NOT EXISTS ' || {seq} "
                f"|| ' AS bigint MAXVALUE {self.UUID7_SERIAL_MAX} CACHE 1 CYCLE';\n"
                "  EXECUTE "
                + _filled(
                    self._UUID7_SERIAL_SQL,
                    fn=f"s || '.' || {_literal(name)}",
                    seq=f"quote_literal({seq})",
                )
                + ";",
            )
        ]

    def uuid7_serial_function_drop_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Statements dropping the serial function and its sequence, unless in use."""
        return [
            self._function_block(
                schema,
                "  IF s IS NULL THEN\n    RETURN;\n  END IF;\n"
                f"{self._drop_function(name)}"
                f"  EXECUTE 'DROP SEQUENCE IF EXISTS ' || s || '.' || {_literal(sequence)};\n"
                "EXCEPTION WHEN dependent_objects_still_exist THEN\n"
                "  RAISE NOTICE USING MESSAGE = 'sqla_ids: kept the serial UUIDv7 function: ' "
                "|| SQLERRM;",
            )
        ]

    # --- uuid7 sql expressions ---
    # UUID192 is ``bytea``; its first 16 bytes are the UUID. A UUIDv7's
    # millisecond timestamp is its first 12 hex digits.
    def uuid192_storage(self) -> Any:
        """Storage of a ``UUID192Type`` column: ``bytea``."""
        from sqlalchemy.dialects.postgresql import BYTEA

        return BYTEA()

    def uuid192_uuid_sql(self, inner: str) -> str:
        """SQL of the leading UUID of a UUID192 value."""
        return f"CAST(encode(substring({inner} FROM 1 FOR 16), 'hex') AS uuid)"

    def uuid7_timestamp_ms_sql(self, inner: str) -> str:
        """SQL of the Unix milliseconds stored in a UUIDv7 (bigint)."""
        return f"('x' || substr(replace(CAST({inner} AS text), '-', ''), 1, 12))::bit(48)::bigint"

    def uuid7_month_partition_sql(
        self, table: str, schema: str | None, name: str, low: Any, high: Any
    ) -> str:
        """``CREATE TABLE … PARTITION OF`` for one UUIDv7 range ``[low, high)``."""
        # Plain DDL strings (offline scripts too): names are quoted here, and
        # the bounds are uuid.UUID values, whose text is hex digits and dashes.
        prefix = f"{_quote(schema)}." if schema else ""
        return (
            f"CREATE TABLE IF NOT EXISTS {prefix}{_quote(name)} "
            f"PARTITION OF {prefix}{_quote(table)} "
            f"FOR VALUES FROM ('{UUID(str(low))}') TO ('{UUID(str(high))}')"
        )
