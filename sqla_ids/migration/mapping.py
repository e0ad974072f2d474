"""New keys in old-key order, and the mapping table (old key -> new UUIDv7).

Keys come from :func:`sqla_ids.identifiers.ordered_uuid7s` fed with the rows
in primary-key order, so the new values sort exactly like the old ones. The
generation is always seeded (a random seed is drawn and stored with the plan
when none is given), which makes it reproducible: a run resumed after a crash
regenerates the same values and skips the rows already in the mapping table.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from itertools import islice
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.types import UserDefinedType

from sqla_ids.identifiers import ordered_uuid7s
from sqla_ids.migration.model import PkMigrationPlan
from sqla_ids.migration.progress import Progress


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


def mapping_table(plan: PkMigrationPlan) -> sa.Table:
    """The mapping table: old key (primary key) and its new UUID (unique)."""
    return sa.Table(
        plan.mapping_table,
        sa.MetaData(),
        sa.Column("old_key", RawType(plan.key_type_sql), primary_key=True, autoincrement=False),
        sa.Column("new_key", uuid_type(), nullable=False, unique=True),
    )


def _time_point(value: Any) -> int | None:
    """Milliseconds for a row's timestamp; naive values are taken as UTC, pre-1970 as 0."""
    if value is None or isinstance(value, int):
        return value
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=UTC)
        return max(int(aware.timestamp() * 1000), 0)
    if isinstance(value, date):
        return max(
            int(datetime(value.year, value.month, value.day, tzinfo=UTC).timestamp()) * 1000, 0
        )
    raise ValueError(f"timestamp column value {value!r} is not a date or datetime")


def _parent_rows(connection: Connection, plan: PkMigrationPlan) -> Iterator[tuple[Any, Any]]:
    """``(key, timestamp)`` of every parent row in key order, read in keyset batches."""
    columns = {c["name"]: c for c in sa.inspect(connection).get_columns(plan.table)}
    key: sa.ColumnClause[Any] = sa.column(plan.column)
    ts: sa.ColumnClause[Any] | None = None
    if plan.timestamp_column:
        ts = sa.column(plan.timestamp_column, columns[plan.timestamp_column]["type"])
    selected = [key] if ts is None else [key, ts]
    table = sa.table(plan.table, *selected)
    last: Any = None
    while True:
        query = sa.select(*selected).select_from(table).order_by(key).limit(plan.batch_size)
        if last is not None:
            query = query.where(key > last)
        rows = connection.execute(query).all()
        if not rows:
            return
        for row in rows:
            yield row[0], (plan.base_time_ms if ts is None else row[1])
        last = rows[-1][0]


def fill_mapping(connection: Connection, plan: PkMigrationPlan, commit: bool) -> None:
    """Create and fill the mapping table; continue after the rows already there."""
    table = mapping_table(plan)
    table.create(connection, checkfirst=True)
    done = connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
    keys: list[Any] = []

    def timestamps() -> Iterator[int | None]:
        for index, (key, when) in enumerate(_parent_rows(connection, plan)):
            keys.append(key)
            ms = _time_point(when)
            yield 0 if ms is None and index == 0 else ms

    uuids = ordered_uuid7s(timestamps(), seed=plan.seed)
    progress = Progress(f"{plan.table}: mapping", plan.row_count)
    progress.advance(done)
    position = 0
    while True:
        chunk = list(islice(uuids, plan.batch_size))
        if not chunk:
            break
        start = position
        position += len(chunk)
        batch_keys, keys[:] = keys[: len(chunk)], keys[len(chunk) :]
        if position <= done:
            continue  # written by an earlier, interrupted run
        skip = max(done - start, 0)
        rows = [
            {"old_key": k, "new_key": u}
            for k, u in zip(batch_keys[skip:], chunk[skip:], strict=True)
        ]
        connection.execute(sa.insert(table), rows)
        if commit:
            connection.commit()
        progress.advance(len(rows))


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
