"""MySQL and MariaDB: DDL and column types (order-number sequences, UUIDv7
storage, the server-side UUIDv7 function and its triggers, UUID192 SQL).

:class:`MariaDB` inherits everything from :class:`MySQL` and adds what only
MariaDB has (sequences, the native ``UUID`` type).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeEngine

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
from sqla_ids.dialects.storage import Binary16

if TYPE_CHECKING:
    from sqla_ids.dialects.bench import Bench
    from sqla_ids.dialects.scanning import Scanning
    from sqla_ids.order_numbers.format import OrderNumberFormat
    from sqla_ids.types.uuid7 import UUIDv7


# --- uuid7 storage ---
# ``BINARY(16)`` holding the UUID's 16 bytes in order (``mysql_storage="binary"``):
# compared bytewise, so UUIDv7 keys sort by time. Every driver binds ``bytes``
# and hands back ``bytes`` or ``bytearray``.


class MySQL(Database):
    """MySQL: no native UUID type, no sequences; functions filled in by triggers."""

    names: ClassVar[tuple[str, ...]] = ("mysql",)
    label: ClassVar[str] = "MySQL"
    alter_table_add_check: ClassVar[bool] = True
    backslash_escapes: ClassVar[bool] = True
    function_in_default: ClassVar[bool] = False
    function_in_table_schema: ClassVar[bool] = True

    def reflected_name(self, name: str) -> str:
        """A backtick undoubled: SQLAlchemy's reflection of MariaDB/MySQL parses
        ``SHOW CREATE TABLE`` and returns a backtick inside a column's, key's or
        index's name doubled, as quoted there (``se``q`` for ``se`q``, 2.1.9; a
        foreign key with one is not reflected at all: read the catalog)."""
        return name.replace("``", "`")

    def declared_references(
        self, connection: Connection, schema: str | None, tables: set[str]
    ) -> set[tuple[str, str, str, str]]:
        """From ``information_schema``: SQLAlchemy's reflection (2.1.9) leaves out
        a foreign key with a backtick in a name (``Unknown schema content``)."""
        if not tables:
            return set()
        rows = connection.execute(
            sa.text(
                "SELECT TABLE_NAME, COLUMN_NAME, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME"
                " FROM information_schema.KEY_COLUMN_USAGE"
                " WHERE TABLE_SCHEMA = COALESCE(:s, DATABASE())"
                " AND REFERENCED_TABLE_SCHEMA = TABLE_SCHEMA AND TABLE_NAME IN :t"
            ).bindparams(sa.bindparam("t", expanding=True)),
            {"s": schema, "t": sorted(tables)},
        ).all()
        return {(str(t), str(c), str(rt), str(rc)) for t, c, rt, rc in rows}

    def scanning(self) -> Scanning:
        """SQL of the UUID tools (native ``UUID``, ``BINARY(16)``, ``CHAR``, JSON)."""
        from sqla_ids.dialects.mysql.scanning import MySQLScanning

        return MySQLScanning()

    def bench(self) -> Bench:
        """The insert benchmark in a throw-away database."""
        from sqla_ids.dialects.mysql.bench import MySQLBench

        return MySQLBench()

    # --- order numbers -----------------------------------------------------------
    # MySQL has no SEQUENCE: order-number defaults need MariaDB (below). The
    # CHECK constraint uses REGEXP on both.

    def order_number_create_sequence(
        self,
        connection: Connection,
        name: str,
        schema: str | None,
        owner: OrderNumberOwner | None = None,
    ) -> None:
        """MySQL has no sequences: raises :class:`UnsupportedDialectError`."""
        self.unsupported("order-number sequences", "they need MariaDB 10.3 or later")

    def order_number_drop_sequence(
        self, connection: Connection, name: str, schema: str | None
    ) -> None:
        """Nothing to drop: MySQL has no sequences."""

    def order_number_sequences(
        self, connection: Connection, schema: str | None
    ) -> list[OwnedSequence]:
        """None: MySQL has no sequences."""
        return []

    def order_number_next_value(self, connection: Connection, name: str, schema: str | None) -> int:
        """MySQL has no sequences: raises :class:`UnsupportedDialectError`."""
        self.unsupported("order-number sequences", "they need MariaDB 10.3 or later")

    def order_number_format_check(self, column_sql: str, layout: OrderNumberFormat) -> str:
        """CHECK constraint text: the column matches the display regex."""
        # Backslashes are escapes in MariaDB string literals; letters must match
        # case-sensitively whatever the column's collation.
        # ``$`` also matches before a final newline in PCRE (MariaDB) and ICU
        # (MySQL), so '071-887-996\n' would pass: ``\z`` is the very end.
        regex = layout.display_regex()
        regex = regex[:-1] + "\\z" if regex.endswith("$") else regex
        pattern = regex.replace("\\", "\\\\")
        if not layout.alphabet.symbols.isdecimal():
            pattern = "(?-i)" + pattern
        return f"{column_sql} REGEXP '{pattern}'"

    # --- uuid7 types ---
    # MySQL has no UUID type: CHAR(32) hex, SQLAlchemy 2.0's choice, whose text
    # order is the UUID's byte order (time order for UUIDv7), or BINARY(16)
    # (``mysql_storage="binary"``), the bytes in order: half the size, same order.
    def uuid7_storage(self, type_: UUIDv7, dialect: Dialect) -> TypeEngine[Any]:
        """Storage type of a ``UUIDv7`` column, by its ``mysql_storage`` option:
        ``CHAR(32)`` (``"char32"``) or ``BINARY(16)`` (``"binary"``)."""
        if type_.mysql_storage == "binary":
            return Binary16()
        return sa.Uuid(native_uuid=False)

    # --- uuid7 server function ---
    # MariaDB/MySQL forbid stored functions in DEFAULT, so a column gets a nil
    # placeholder default and a BEFORE INSERT trigger replaces it. The function is
    # one RETURN expression (no BEGIN ... END), so offline scripts need no
    # DELIMITER. It packs a 1/4096 ms tick (RFC 9562 §6.2 method 3) kept strictly
    # increasing per connection in a user variable; ``@@timestamp`` is the
    # statement's Unix time, independent of the session time zone. It returns 32
    # hex digits, which both native UUID and CHAR(32) columns accept.
    _UUID7_NIL = "00000000000000000000000000000000"
    # The connection's next tick: the statement's clock, or one past the last one.
    _NEXT_TICK = (
        "GREATEST(CAST(@@timestamp * 4096000 AS UNSIGNED), COALESCE(@sqla_ids_uuid7_tick + 1, 0))"
    )
    _UUID7_FUNCTION = f"""\
CREATE FUNCTION IF NOT EXISTS {{name}}() RETURNS CHAR(32) CHARSET ascii NOT DETERMINISTIC NO SQL
RETURN LOWER(CONCAT(
  LPAD(HEX((@sqla_ids_uuid7_tick := {_NEXT_TICK}) >> 12), 12, '0'),
  '7', LPAD(HEX(@sqla_ids_uuid7_tick & 4095), 3, '0'),
  HEX(8 | (ASCII(RANDOM_BYTES(1)) & 3)), SUBSTRING(HEX(RANDOM_BYTES(8)), 2)))"""

    @staticmethod
    def _qualified(name: str, schema: str | None) -> str:
        """``schema.name`` (both quoted already), or ``name``: the current database."""
        return f"{schema}.{name}" if schema is not None else name

    def uuid7_function_create_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Statements creating the UUIDv7 function ``name()`` in ``schema`` (quoted names)."""
        return [self._UUID7_FUNCTION.format(name=self._qualified(name, schema))]

    def uuid7_function_drop_sql(self, name: str, schema: str | None = None) -> list[str]:
        """Statements dropping the UUIDv7 function ``schema.name()``.

        Unconditional: MariaDB records no dependencies, so
        :meth:`uuid7_function_users` is asked first (online only).
        """
        return [f"DROP FUNCTION IF EXISTS {self._qualified(name, schema)}"]

    def uuid7_function_schema(self, connection: Connection) -> str | None:
        """``DATABASE()``: where unqualified names are created."""
        schema = connection.exec_driver_sql("SELECT DATABASE()").scalar()
        return None if schema is None else str(schema)

    # Nothing records which trigger calls a function: the users are triggers,
    # routines and views whose text calls it -- unqualified from its own
    # database, or from any database whose text also names the function's one.
    # Erring on the side of "in use" only ever keeps the function.
    _USERS_SQL = """\
SELECT CONCAT('trigger ', TRIGGER_SCHEMA, '.', TRIGGER_NAME) FROM information_schema.TRIGGERS
WHERE ACTION_STATEMENT REGEXP :call
  AND (TRIGGER_SCHEMA = :schema OR INSTR(ACTION_STATEMENT, :schema) > 0)
UNION ALL
SELECT CONCAT(LOWER(ROUTINE_TYPE), ' ', ROUTINE_SCHEMA, '.', ROUTINE_NAME)
FROM information_schema.ROUTINES
WHERE ROUTINE_DEFINITION REGEXP :call AND NOT (ROUTINE_SCHEMA = :schema AND ROUTINE_NAME = :name)
  AND (ROUTINE_SCHEMA = :schema OR INSTR(ROUTINE_DEFINITION, :schema) > 0)
UNION ALL
SELECT CONCAT('view ', TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.VIEWS
WHERE VIEW_DEFINITION REGEXP :call
  AND (TABLE_SCHEMA = :schema OR INSTR(VIEW_DEFINITION, :schema) > 0)
ORDER BY 1"""

    def uuid7_function_users(self, connection: Connection, name: str, schema: str) -> list[str]:
        """Triggers, routines and views calling ``schema.name()``, described."""
        call = "(^|[^0-9a-z_$])" + re.escape(name) + "`?[[:space:]]*[(]"
        rows = connection.execute(
            sa.text(self._USERS_SQL), {"call": call, "schema": schema, "name": name}
        )
        return [str(description) for description in rows.scalars()]

    # A block of ticks for keys assembled by the client (identifiers.server_layouts):
    # the connection's tick moves on by :count at once, as if the function had
    # been called :count times, so its later keys sort after them.
    def uuid7_reserve_ticks_sql(self) -> str | None:
        """Reserves ``:count`` ticks of ``sqla_ids_uuid7()``'s state; returns the first."""
        return f"SELECT (@sqla_ids_uuid7_tick := {self._NEXT_TICK} + :count - 1) - :count + 1"

    def uuid7_column_default_sql(self, name: str) -> str:
        """``DEFAULT`` of a server-filled column: a nil placeholder the trigger replaces."""
        return f"'{self._UUID7_NIL}'"

    def uuid7_column_after_create_sql(self, name: str, table: str, column: str) -> list[str]:
        """The BEFORE INSERT trigger filling ``column`` (already quoted names)."""
        # The trigger lives in the table's schema: `db`.`t` -> `db`.`t_id_uuid7`.
        schema, _, table_name = table.rpartition(".")
        trigger = (
            f"{schema + '.' if schema else ''}`{table_name.strip('`')}_{column.strip('`')}_uuid7`"
        )
        return [
            f"CREATE TRIGGER IF NOT EXISTS {trigger} BEFORE INSERT ON {table} FOR EACH ROW "
            f"SET NEW.{column} = IF(NEW.{column} IS NULL OR NEW.{column} = '{self._UUID7_NIL}', "
            f"{name}(), NEW.{column})"
        ]

    # --- uuid7 sql expressions ---
    # UUID192 is VARBINARY(24) (indexable, unlike BLOB). In string context a
    # native UUID reads with dashes and a CHAR(32) one without, so the SQL strips
    # dashes; 32 lowercase hex digits compare equal to either storage.
    def uuid192_storage(self) -> Any:
        """Storage of a ``UUID192Type`` column: ``VARBINARY(24)``."""
        return sa.VARBINARY(24)

    def uuid192_uuid_sql(self, inner: str) -> str:
        """SQL of the leading UUID of a UUID192 value (32 hex digits)."""
        return f"LOWER(HEX(SUBSTRING({inner}, 1, 16)))"

    def uuid7_timestamp_ms_sql(self, inner: str) -> str:
        """SQL of the Unix milliseconds stored in a UUIDv7."""
        return f"CAST(CONV(LEFT(REPLACE(CAST({inner} AS CHAR), '-', ''), 12), 16, 10) AS UNSIGNED)"


class MariaDB(MySQL):
    """MariaDB: MySQL plus sequences (10.3+) and a native ``UUID`` type (10.7+)."""

    names: ClassVar[tuple[str, ...]] = ("mariadb",)
    label: ClassVar[str] = "MariaDB"

    def scanning(self) -> Scanning:
        """SQL of the UUID tools, with MariaDB's statement time limit."""
        from sqla_ids.dialects.mysql.scanning import MariaDBScanning

        return MariaDBScanning()

    def bench(self) -> Bench:
        """The insert benchmark in a throw-away database (native ``UUID`` keys on 10.7+)."""
        from sqla_ids.dialects.mysql.bench import MySQLBench

        return MySQLBench(native_uuid=self.native_uuid)

    # --- order numbers -----------------------------------------------------------
    # MariaDB >= 10.3 has SEQUENCE objects. A sequence is a table, whose comment
    # records the tables it numbers (sqla_ids.dialects.order_number_owner): set
    # by CREATE SEQUENCE … COMMENT, then by ALTER TABLE … COMMENT, which
    # discards the sequence's cache (up to 1000 numbers skipped) -- once for
    # each further table created on a sequence.
    ORDER_NUMBER_COMMENT_MAX: ClassVar[int] = 2048
    """Longest table comment MariaDB keeps."""

    _ORDER_NUMBER_SEQUENCES = sa.text(
        "SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES "
        "WHERE TABLE_TYPE = 'SEQUENCE' AND TABLE_SCHEMA = COALESCE(:schema, DATABASE())"
    )

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
        is not sqla_ids' own is left alone). Offline (``--sql``), only a
        sequence the statement creates gets it.
        """
        if not connection.dialect.supports_sequences:
            super().order_number_create_sequence(connection, name, schema, owner)
        sequence = sa.Sequence(name, schema=schema, start=1)
        if owner is None:
            connection.execute(sa.schema.CreateSequence(sequence, if_not_exists=True))
            return
        limit = self.ORDER_NUMBER_COMMENT_MAX
        if not can_read(connection):
            comment = owners_record([owner], limit)
            statement = "{create} COMMENT = {comment}"
        else:
            comments = self._order_number_comments(connection, schema)
            if name not in comments:
                comment, statement = owners_record([owner], limit), "{create} COMMENT = {comment}"
            else:
                added = with_owner(comments[name], owner, limit)
                if added is None:
                    return
                comment, statement = added, "ALTER TABLE {sequence} COMMENT = {comment}"
        connection.execute(SequenceCommentStatement(statement, sequence, comment))

    def order_number_sequences(
        self, connection: Connection, schema: str | None
    ) -> list[OwnedSequence]:
        """The sequences of ``schema`` with each table their comment records."""
        if not connection.dialect.supports_sequences:
            return []
        return owned_sequences(self._order_number_comments(connection, schema))

    def order_number_drop_sequence(
        self, connection: Connection, name: str, schema: str | None
    ) -> None:
        """Drop the order-number sequence ``name`` if it exists."""
        if connection.dialect.supports_sequences:
            connection.execute(
                sa.schema.DropSequence(sa.Sequence(name, schema=schema), if_exists=True)
            )

    def order_number_next_value(self, connection: Connection, name: str, schema: str | None) -> int:
        """``NEXTVAL`` of the sequence: atomic across connections, never rolled back."""
        sequence = sa.Sequence(name, schema=schema)
        return int(connection.execute(sa.select(sequence.next_value())).scalar_one())

    # --- uuid7 types ---
    # MariaDB >= 10.7 has a native 16-byte ``UUID`` type. Fixed releases store
    # (and sort) every UUID other than version 1 in plain byte order, so UUIDv7
    # keeps time order (verified in tests/test_types_uuid7.py). SQLAlchemy 2.1 picks native
    # UUID on MariaDB and 2.0 picks CHAR(32); we choose explicitly so both
    # versions create the same column.
    # Releases before the fix of MDEV-29959 store every UUID byte-swapped
    # (time-low group last), so UUIDv7 keys would not be time-ordered there:
    # CHAR(32) instead. 10.7 and 10.8 reached end of life unfixed.
    NATIVE_UUID: ClassVar[tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]] = (
        ((10, 9, 8), (10, 10)),
        ((10, 10, 6), (10, 11)),
        ((10, 11, 5), (11, 0)),
        ((11, 0, 3), (11, 1)),
        ((11, 1, 2), (999,)),
    )
    """Release ranges ``[from, to)`` whose native ``UUID`` type stores bytes in order."""

    @classmethod
    def native_uuid(cls, dialect: Dialect) -> bool:
        """Whether the connected server's native ``UUID`` keeps UUIDv7 in time order."""
        version = tuple(dialect.server_version_info or ())
        return any(low <= version < high for low, high in cls.NATIVE_UUID)

    def uuid7_storage(self, type_: UUIDv7, dialect: Dialect) -> TypeEngine[Any]:
        """Native ``UUID`` where it keeps time order, else (or with
        ``mariadb_native=False``) MySQL's storage (``mysql_storage``)."""
        if type_.mariadb_native and self.native_uuid(dialect):
            # ``UUID`` renders the native type on both SQLAlchemy 2.0 and 2.1.
            # ``as_uuid=False``: ``UUIDv7`` binds canonical text, which every
            # driver sends (2.1 binds ``uuid.UUID`` objects as they are, which
            # mysql-connector refuses; 2.0 binds 32 hex digits) and MariaDB's
            # UUID type reads.
            return sa.UUID(as_uuid=False)
        return super().uuid7_storage(type_, dialect)

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
    # The connection's millisecond, never going back (set and returned).
    _SERIAL_MS = (
        "@sqla_ids_uuid7_serial_ms := GREATEST(CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000 AS UNSIGNED),"
        " COALESCE(@sqla_ids_uuid7_serial_ms, 0))"
    )
    _UUID7_SERIAL_FUNCTION = f"""\
CREATE FUNCTION IF NOT EXISTS {{name}}() RETURNS CHAR(32) CHARSET ascii
NOT DETERMINISTIC MODIFIES SQL DATA
RETURN LOWER(CONCAT(
  LPAD(HEX({_SERIAL_MS}), 12, '0'),
  '7', INSERT(LPAD(HEX(NEXTVAL({{sequence}})), 11, '0'), 4, 0, '8'),
  SUBSTRING(HEX(RANDOM_BYTES(4)), 2)))"""

    def uuid7_serial_supported(self, dialect: Dialect) -> bool:
        """MariaDB 10.3+ has sequences."""
        return bool(dialect.supports_sequences)

    # A block of serial keys: the millisecond read once, then sequence values. A
    # call starting after the block was fetched still gets a later-or-equal
    # millisecond and a larger value, as after one call of the function. The
    # recursion may stop short at max_recursive_iterations: the caller asks again.
    def uuid7_serial_reserve_sql(self, sequence: str) -> tuple[str, str] | None:
        """The connection's millisecond (set and returned), then up to ``:count``
        values of ``sequence`` (quoted)."""
        return (
            f"SELECT {self._SERIAL_MS}",
            "WITH RECURSIVE sqla_ids_n (n) AS (SELECT 1 UNION ALL"
            " SELECT n + 1 FROM sqla_ids_n WHERE n < :count)"
            # One text, not a row per value (within group_concat_max_len's 1 MB).
            f" SELECT GROUP_CONCAT(NEXTVAL({sequence})) FROM sqla_ids_n",
        )

    def uuid7_serial_function_create_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Statements creating ``sequence`` and the serial UUIDv7 function ``name()``."""
        name, sequence = self._qualified(name, schema), self._qualified(sequence, schema)
        return [
            f"CREATE SEQUENCE IF NOT EXISTS {sequence} MAXVALUE {self._UUID7_SERIAL_MAX} CYCLE",
            self._UUID7_SERIAL_FUNCTION.format(name=name, sequence=sequence),
        ]

    def uuid7_serial_function_drop_sql(
        self, name: str, sequence: str, schema: str | None = None
    ) -> list[str]:
        """Statements dropping the serial function and its sequence (unconditional)."""
        return [
            f"DROP FUNCTION IF EXISTS {self._qualified(name, schema)}",
            f"DROP SEQUENCE IF EXISTS {self._qualified(sequence, schema)}",
        ]
