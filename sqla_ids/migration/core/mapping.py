"""New keys in old-key order, and the mapping table (old key -> new UUIDv7).

Each key's 48-bit millisecond and 18-bit counter
(:attr:`~sqla_ids.identifiers.layout.Layout.DEFAULT`) are those
:func:`sqla_ids.identifiers.ordered_uuid7s` gives the rows in primary-key
order: the plan's time, or the row's ``timestamp_column`` value kept from going
back by a running maximum; rows sharing a millisecond take the next counter
values, and a full counter moves on to the next millisecond. So the new keys
sort exactly like the old ones. Their 56 other bits are the first of
``sha256("<seed>:<position>")`` (a random seed is drawn and stored with the
plan when none is given): the same data and seed give the same keys, on every
database.

PostgreSQL and MariaDB compute them in SQL (:func:`fill_mapping_in_sql`): one
``INSERT ... SELECT`` per batch of keys, nothing sent to the client and back --
but MariaDB with a timestamp column, whose running ``MAX()`` window is quadratic
in the batch: it makes them in Python, as SQLite does (:func:`fill_mapping`).
The (millisecond, counter) pair read as one number, ``v = ms << 18 | counter``,
is ``v(i) = max(t(i) << 18, v(i - 1) + 1)`` (:func:`key_numbers`), which
unrolls to ``i + max over j <= i of ((t(j) << 18) - j)``: a running ``max()``
window over the batch, continued from the batch before through ``v`` of its
last row. A run resumed after a crash (MariaDB, whose batches commit)
continues after the last mapped key. SQLite makes the same keys in Python
(:func:`fill_mapping`). The online backfill follows the same rule
(:mod:`sqla_ids.migration.core.backfill`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from itertools import islice
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import UserDefinedType

from sqla_ids.dialects.sql import quote_name, quoter, text_sql
from sqla_ids.identifiers import UUID192
from sqla_ids.identifiers.layout import Layout
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.options import PkMigrationOptions
from sqla_ids.migration.core.progress import Progress
from sqla_ids.migration.core.reflected import create_table, inspect


class RawType(UserDefinedType[Any]):
    """A column type rendered as the exact SQL recorded in the plan (``int(11) unsigned``)."""

    cache_ok = True

    def __init__(self, sql: str) -> None:
        self.sql = sql

    def get_col_spec(self, **kw: Any) -> str:
        """The recorded type SQL."""
        return self.sql


def uuid_type() -> sa.types.TypeEngine[Any]:
    """The type of every new key column: the plugin's ``UUIDv7``, so the migrated
    columns are stored exactly as a model declaring ``UUIDv7()`` expects."""
    from sqla_ids.types.uuid7 import UUIDv7

    return UUIDv7()


def new_key_type(plan: PkMigrationPlan) -> sa.types.TypeEngine[Any]:
    """The type of the plan's new key and reference columns: :func:`uuid_type`, or
    the plugin's ``UUID192Type`` for ``target="uuid192"``."""
    if not plan.uuid192:
        return uuid_type()
    from sqla_ids.types.uuid192 import UUID192Type

    return UUID192Type()


def new_type_sql(connection: Connection, plan: PkMigrationPlan) -> str:
    """:func:`new_key_type` as this database's column type SQL."""
    return str(new_key_type(plan).compile(dialect=connection.dialect))


def segment_sql(connection: Connection, options: PkMigrationOptions) -> str | None:
    """SQL of a parent row's UUID192 segment (its ``segment_column`` quoted, or
    the author's ``segment_sql``), ``None`` without one."""
    if options.segment_column is not None:
        return quote_name(connection.dialect, options.segment_column)
    return None if options.segment_sql is None else f"({options.segment_sql})"


def row_segment_sql(
    dialect: Dialect, plan: PkMigrationPlan, row: str, one_row: str, swapped: bool = False
) -> str | None:
    """The UUID192 segment of the parent row a trigger fires for (its record
    ``row``, ``NEW``): its ``segment_column``, or the ``segment_sql`` expression
    evaluated over that row alone -- ``one_row`` is the database's one-row
    ``SELECT`` of the record's columns, named like the table, so the author's
    column names, bare or qualified by the table, mean the row's. ``None``
    without a segment (or for UUIDv7 keys). Once ``swapped``, a segment column
    that is the key is read from the old key's column (the planner refuses a
    ``segment_sql`` naming the key online: the swap renames it)."""
    options = plan.options
    if not plan.uuid192:
        return None
    quote = quoter(dialect)
    if options.segment_column is not None:
        column = options.segment_column
        if swapped and column == plan.column:
            column = plan.old_column
        return f"{row}.{quote(column)}"
    if options.segment_sql is None:
        return None
    return f"(SELECT ({options.segment_sql}) FROM ({one_row}) AS {quote(plan.table)})"


def mapping_table(plan: PkMigrationPlan) -> sa.Table:
    """The mapping table: old key (primary key) and its new key (unique)."""
    return sa.Table(
        plan.mapping_table,
        sa.MetaData(),
        sa.Column("old_key", RawType(plan.key_type_sql), primary_key=True, autoincrement=False),
        sa.Column("new_key", new_key_type(plan), nullable=False, unique=True),
    )


#: Bits of the counter that follows the millisecond in every new key.
COUNTER_BITS = Layout.DEFAULT.counter_bits
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def time_point(value: Any) -> int | None:
    """Milliseconds for a row's timestamp; naive values are taken as UTC, pre-1970 as 0."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return max((aware - _EPOCH) // _MS, 0)
    if isinstance(value, date):
        return max((datetime(value.year, value.month, value.day, tzinfo=UTC) - _EPOCH) // _MS, 0)
    raise ValueError(f"timestamp column value {value!r} is not a date or datetime")


def key_numbers(times: Iterable[int | None], prev: int = -1) -> Iterator[int]:
    """``ms << 18 | counter`` of each new key, for the rows' milliseconds in key
    order (``None``: the row before's), continuing after ``prev``: the (millisecond,
    counter) pairs of :func:`~sqla_ids.identifiers.ordered_uuid7s`."""
    for ms in times:
        wanted = -1 if ms is None else ms << COUNTER_BITS
        prev = max(wanted, prev + 1)
        yield prev


def new_key(number: int, seed: str, ordinal: int | str) -> UUID:
    """The new key of the row at ``ordinal`` (from 0, in key order) whose
    (millisecond, counter) number is ``number``: its 56 other bits are the first
    of ``sha256("<seed>:<ordinal>")`` -- what the servers' SQL computes (the
    online backfill hashes the old key instead:
    :func:`~sqla_ids.migration.core.backfill.marked`)."""
    random = int(hashlib.sha256(f"{seed}:{ordinal}".encode()).hexdigest()[:14], 16)
    counter = number & Layout.DEFAULT.counter_max
    return UUID(int=Layout.DEFAULT.compose(number >> COUNTER_BITS, counter, random))


def key_number(key: UUID | UUID192) -> int:
    """``ms << 18 | counter`` of a new key (a UUID192's leading UUIDv7): where the
    next key continues from."""
    value = (key.uuid if isinstance(key, UUID192) else key).int
    return ((value >> 80) << COUNTER_BITS) | Layout.DEFAULT.counter_of(value)


def _resume_point(connection: Connection, table: sa.Table) -> tuple[int, Any, int]:
    """``(rows mapped, last old key, its key number)`` of a mapping being filled
    (``(0, None, -1)`` when empty): batches fill it in key order."""
    last = connection.execute(
        sa.select(table.c.old_key, table.c.new_key).order_by(table.c.old_key.desc()).limit(1)
    ).first()
    if last is None:
        return 0, None, -1
    done = connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    return int(done), last[0], key_number(last[1])


def fill_mapping_in_sql(
    connection: Connection, plan: PkMigrationPlan, insert_sql: Callable[[bool], str]
) -> None:
    """Create and fill the mapping table in SQL, ``batch_size`` keys at a time;
    continue after the rows already there (see the module docstring).

    ``insert_sql(bounded)`` is the database's ``INSERT ... SELECT`` of the
    mapping rows of the parent's keys ``<= :upto`` (and ``> :after`` when
    ``bounded``), numbering them from ``:ordinal``, their key numbers
    continuing after ``:prev`` -- or, without a timestamp column, ``:start +
    row_number``.
    """
    table = mapping_table(plan)
    create_table(connection, table)
    q = quoter(connection.dialect)
    key = q(plan.column)
    done, after, prev = _resume_point(connection, table)
    progress = Progress(f"{plan.table}: mapping", plan.row_count)
    progress.advance(done)
    while True:
        # The batch's last key, read from the primary key's index alone.
        where = f" WHERE {key} > :after" if after is not None else ""
        upto = connection.execute(
            text_sql(
                connection.dialect,
                f"SELECT max(k) FROM (SELECT {key} AS k FROM {q(plan.table)}{where}"
                f" ORDER BY {key} LIMIT :n) b",
            ),
            {"after": after, "n": plan.batch_size},
        ).scalar()
        if upto is None:
            return
        params = {
            "after": after,
            "upto": upto,
            "ordinal": done,
            "prev": prev,
            # Without a timestamp column every row has the plan's time.
            "start": max(prev, (plan.base_time_ms << COUNTER_BITS) - 1),
            "seed": plan.seed,
        }
        rows = connection.execute(
            text_sql(connection.dialect, insert_sql(after is not None)), params
        ).rowcount
        last_key = connection.execute(
            sa.select(table.c.new_key).where(table.c.old_key == upto)
        ).scalar_one()
        prev, done, after = key_number(last_key), done + rows, upto
        progress.advance(rows)


def fill_mapping(connection: Connection, plan: PkMigrationPlan) -> None:
    """Create and fill the mapping table with the same keys made in Python (SQLite);
    continue after the rows already there."""
    table = mapping_table(plan)
    create_table(connection, table)
    done, after, prev = _resume_point(connection, table)
    progress = Progress(f"{plan.table}: mapping", plan.row_count)
    progress.advance(done)
    rows = _parent_rows(connection, plan, after)
    while True:
        batch = list(islice(rows, plan.batch_size))
        if not batch:
            return
        numbers = key_numbers((time_point(when) for _, when, _ in batch), prev)
        values = [
            {"old_key": old, "new_key": _made(plan, new_key(number, plan.seed, done + n), segment)}
            for n, ((old, _, segment), number) in enumerate(zip(batch, numbers, strict=True))
        ]
        connection.execute(sa.insert(table), values)
        prev = key_number(values[-1]["new_key"])
        done += len(values)
        progress.advance(len(values))


def _made(plan: PkMigrationPlan, key: UUID, segment: int | None) -> UUID | UUID192:
    """The new key as the plan's target stores it: the UUIDv7, or the UUID192 of
    that UUIDv7 and the row's segment."""
    return UUID192(key, None if segment is None else int(segment)) if plan.uuid192 else key


def _parent_rows(
    connection: Connection, plan: PkMigrationPlan, after: Any
) -> Iterator[tuple[Any, Any, Any]]:
    """``(key, timestamp, segment)`` of every parent row after ``after`` in key
    order, read in keyset batches (the timestamp: the plan's time without a
    timestamp column; the segment: ``None`` without one)."""
    columns = {c["name"]: c for c in inspect(connection).get_columns(plan.table)}
    key: sa.ColumnClause[Any] = sa.column(plan.column)
    ts: sa.ColumnElement[Any] = sa.literal_column(str(plan.base_time_ms))
    if plan.timestamp_column:
        ts = sa.column(plan.timestamp_column, columns[plan.timestamp_column]["type"])
    segment = segment_sql(connection, plan.options)
    # (The segment's SQL is a quoted column, or the author's expression.)
    selected = [key, ts, sa.literal_column(segment or "NULL")]
    table = sa.table(plan.table, key)
    while True:
        query = sa.select(*selected).select_from(table).order_by(key).limit(plan.batch_size)
        if after is not None:
            query = query.where(key > after)
        batch = connection.execute(query).all()
        if not batch:
            return
        for row in batch:
            yield row[0], row[1], row[2]
        after = batch[-1][0]


def key_ranges(
    connection: Connection, plan: PkMigrationPlan, column: str
) -> Iterator[tuple[Any, Any]]:
    """``(after, up_to)`` bounds of ``column`` in the mapping table, ``batch_size`` keys each."""
    table = mapping_table(plan)
    col = table.c[column]
    last: Any = None
    while True:
        query = sa.select(col).order_by(col).limit(plan.batch_size)
        if last is not None:
            query = query.where(col > last)
        values = connection.execute(query).scalars().all()
        if not values:
            return
        yield last, values[-1]
        last = values[-1]
