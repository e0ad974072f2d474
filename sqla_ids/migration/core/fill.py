"""Filling columns through the mapping table, batch by batch, each batch checked.

MariaDB's offline strategy (and a downgrade that puts a dropped ``<key>_old``
back) sets a converted column of every row from the mapping (old key -> new
UUIDv7, or back) with one ``UPDATE`` per batch, so each statement -- and,
where statements commit on their own, each transaction -- stays small on
large tables. A table with a single-column primary key is walked in that key's
order (InnoDB's physical order: each batch reads consecutive pages, and the
mapping is probed by its primary key); other tables by ranges of the mapping's
keys. Every row of a batch gets the mapping's value for its source, or
``NULL`` when the mapping has none -- so nothing an earlier, interrupted run
wrote survives -- and right after the ``UPDATE``, while its rows are still in
memory, the batch is checked: no non-null source without its target.
Otherwise :class:`~sqla_ids.errors.MigrationVerificationError`, before any key
changed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationVerificationError
from sqla_ids.migration.core import mapping
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.progress import Progress
from sqla_ids.migration.core.sql import count, examples


@dataclass(frozen=True)
class Fill:
    """Set ``target`` of every row of ``table`` from the mapping, looked up by ``source``.

    ``copy``: further ``target <- source`` columns set in the same ``UPDATE``
    (the old key kept next to the new one). ``keep``: columns set to
    themselves, so that MariaDB's ``ON UPDATE CURRENT_TIMESTAMP`` does not
    overwrite them (an explicitly assigned column is left as assigned).
    ``walk``: the table's single-column primary key, whose order the batches
    follow (``None``: ranges of the mapping's keys over ``source``).
    """

    table: str
    source: str
    target: str
    copy: tuple[tuple[str, str], ...] = ()
    keep: tuple[str, ...] = field(default=())
    walk: str | None = None


def fill(
    connection: Connection,
    plan: PkMigrationPlan,
    fills: list[Fill],
    source_key: str,
    target_key: str,
) -> None:
    """Run every :class:`Fill` through the mapping table, one batch at a time, each
    checked after its ``UPDATE`` (``source_key``/``target_key``: ``"old_key"``/
    ``"new_key"`` or the reverse)."""
    pairs = mapping.mapping_table(plan)
    for f in fills:
        names = {f.source, f.target, *f.keep, *(c for pair in f.copy for c in pair)}
        if f.walk is not None:
            names.add(f.walk)
        t = sa.table(f.table, *(sa.column(n) for n in sorted(names)))
        # Every row of the batch gets the mapping's value for its source -- or NULL:
        # no value from an earlier, interrupted run survives, and a row whose
        # source has no mapping row shows as a NULL target.
        mapped = sa.select(pairs.c[target_key]).where(pairs.c[source_key] == t.c[f.source])
        values: dict[str, Any] = {f.target: mapped.scalar_subquery()}
        values.update({target: t.c[source] for target, source in f.copy})
        values.update({k: t.c[k] for k in f.keep})
        walked = t.c[f.walk] if f.walk is not None else t.c[f.source]
        progress = Progress(f"{f.table}.{f.source}", count(connection, f.table))
        if f.walk is None:
            ranges = mapping.key_ranges(connection, plan, source_key)
        else:
            ranges = _key_ranges(connection, f.table, f.walk, plan.batch_size)
        for after, up_to in ranges:
            within = [walked <= up_to] + ([walked > after] if after is not None else [])
            done = connection.execute(sa.update(t).values(values).where(*within))
            # Read while the batch's rows are still in memory.
            wrong = connection.execute(
                sa.select(sa.func.count())
                .select_from(t)
                .where(*within, t.c[f.source].is_not(None), t.c[f.target].is_(None))
            ).scalar_one()
            if wrong:
                unmatched = sa.select(t.c[f.source]).where(
                    *within, t.c[f.source].is_not(None), t.c[f.target].is_(None)
                )
                raise MigrationVerificationError(
                    f"{f.table}.{f.source}: {wrong} values have no row in"
                    f" {plan.mapping_table} (first: {examples(connection, unmatched)});"
                    " stopped before changing any key. Fix those rows (a reference must"
                    f" name an existing {plan.table} row) and run it again"
                )
            progress.advance(done.rowcount)


def _key_ranges(
    connection: Connection, table: str, column: str, size: int
) -> Iterator[tuple[Any, Any]]:
    """``(after, up_to)`` bounds of ``table.column`` (its primary key), ``size`` rows each."""
    t = sa.table(table, sa.column(column))
    key = t.c[column]
    last: Any = None
    while True:
        page = sa.select(key).order_by(key).limit(size)
        if last is not None:
            page = page.where(key > last)
        up_to = connection.execute(sa.select(sa.func.max(page.subquery().c[0]))).scalar()
        if up_to is None:
            return
        yield last, up_to
        last = up_to
