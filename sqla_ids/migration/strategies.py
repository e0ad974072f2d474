"""Ways of carrying out a planned key migration: one strategy object per database.

The runner does what every database shares (the state row, the mapping
table, the final checks); a :class:`Strategy` changes the columns:

* PostgreSQL (:class:`~sqla_ids.dialects.postgresql.migration.AlterType`):
  converted values go into temporary columns, then each column changes type
  in place with ``ALTER COLUMN ... TYPE uuid USING <temporary column>``, all
  in one transaction. The column keeps its position, comment and grants;
  PostgreSQL rebuilds its indexes and constraints under the same names, and
  recurses into the partitions of a partitioned table.
* MariaDB/MySQL (:class:`~sqla_ids.dialects.mysql.migration.Swap`): filled
  temporary columns are swapped in by one ``ALTER TABLE`` per table, each
  step recorded so a re-run after a crash continues (DDL commits implicitly).
* SQLite (:class:`~sqla_ids.dialects.sqlite.migration.Rebuild`): each
  affected table is recreated and refilled through the mapping table.

This module holds the shared pieces: filling a column through the mapping
table in key-range batches and checking the result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationVerificationError
from sqla_ids.migration import mapping
from sqla_ids.migration.model import PkMigrationPlan, View
from sqla_ids.migration.progress import Batches, Progress

T = TypeVar("T")


@dataclass(frozen=True)
class Fill:
    """Set ``target`` of every row of ``table`` from the mapping, looked up by ``source``.

    ``copy``: further ``target <- source`` columns set in the same ``UPDATE``
    (the old key kept next to the new one). ``keep``: columns set to
    themselves, so that MariaDB's ``ON UPDATE CURRENT_TIMESTAMP`` does not
    overwrite them (an explicitly assigned column is left as assigned).
    """

    table: str
    source: str
    target: str
    copy: tuple[tuple[str, str], ...] = ()
    keep: tuple[str, ...] = field(default=())


class Strategy(ABC):
    """How the converted values replace the old ones (see the module docstring).

    ``transactional``: the whole run happens in one transaction, so a failure
    rolls everything back; otherwise each step is durable and recorded.
    """

    transactional: bool = True

    def prepare(self, connection: Connection) -> None:  # noqa: B027 - optional hook
        """Check or set connection-level settings before the transaction begins
        (nothing by default)."""

    @contextmanager
    def quiet(self, connection: Connection, plan: PkMigrationPlan) -> Iterator[None]:
        """Run the block without firing the affected tables' triggers where the
        database allows it (PostgreSQL); elsewhere as it is."""
        yield

    @abstractmethod
    def upgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Replace the old key values by the mapped UUIDs in every affected column."""

    @abstractmethod
    def downgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Put the old key values back in every affected column."""


class OnlineContext(Protocol):
    """What an :class:`OnlineStrategy` runs its statements through (the online runner).

    Every statement that takes a lock runs under the migration's
    ``lock_timeout`` and is retried with backoff, so the application's
    statements never wait behind it for longer than that.
    """

    plan: PkMigrationPlan
    metadata_lock_wait: float
    """Seconds a long online DDL may wait for its metadata lock (MariaDB; 0: never)."""

    def transaction(self, work: Callable[[Connection], T], what: str) -> T:
        """Run ``work`` in one short transaction under ``lock_timeout``, retried."""

    def autocommit(self, sql: str, what: str, params: dict[str, Any] | None = None) -> None:
        """Run one statement outside any transaction (``CREATE INDEX CONCURRENTLY``), retried."""

    def pause(self) -> None:
        """Sleep between backfill batches (``batch_pause``)."""

    def batches(self, step: str, total: int) -> Batches:
        """The batches of a backfill step (their size, progress and pauses)."""


class OnlineStrategy(ABC):
    """Online migration: the application keeps writing while the key changes.

    Phases, each made of short transactions, each resumable from what the
    database holds: :meth:`expand` (new columns kept in sync by triggers),
    :meth:`backfill` (keyset batches), :meth:`prepare` (indexes and foreign
    keys built without blocking writes), :meth:`swap` (one short transaction)
    and, later and separately, :meth:`contract`.
    """

    @abstractmethod
    def refusals(self, connection: Connection, plan: PkMigrationPlan) -> list[str]:
        """What the online mode cannot carry over for this plan (empty: it can)."""

    @abstractmethod
    def set_lock_timeout(self, connection: Connection, seconds: float, local: bool) -> None:
        """Make lock waits of this transaction (``local``) or session give up after ``seconds``."""

    def retry_delays(self, attempts: int) -> list[float]:
        """Seconds to sleep before each retry of a step that met a lock timeout
        (``attempts`` from the options): exponential backoff from 0.1 s to 5 s."""
        return [min(0.1 * 2**n, 5.0) for n in range(max(attempts - 1, 0))]

    def release(self, connection: Connection) -> None:  # noqa: B027 - optional hook
        """Undo the session settings :meth:`set_lock_timeout` made, before the
        connection returns to the application's pool (nothing by default)."""

    @abstractmethod
    def is_lock_timeout(self, error: BaseException) -> bool:
        """Whether ``error`` is a lock wait that gave up (the step is retried)."""

    @abstractmethod
    def expand(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Mapping table, new columns, sync triggers, server default for new rows
        (run in one short transaction)."""

    @abstractmethod
    def backfill(self, ctx: OnlineContext) -> None:
        """Give every existing row its new key / new reference, batch by batch."""

    @abstractmethod
    def prepare(self, ctx: OnlineContext) -> None:
        """Unique index, NOT NULL checks, foreign keys and indexes on the new columns."""

    @abstractmethod
    def verify(self, connection: Connection, plan: PkMigrationPlan, swapped: bool) -> list[str]:
        """Problems found comparing every row through the mapping (one snapshot)."""

    @abstractmethod
    def swap(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Put the new columns in place of the old ones (run in one short transaction)."""

    @abstractmethod
    def contract(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Drop what only served the transition: triggers, old child columns."""

    @abstractmethod
    def abort(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Undo :meth:`expand` and :meth:`prepare` before the swap (the table as it was)."""

    @abstractmethod
    def unprepare(self, ctx: OnlineContext) -> None:
        """After the swap, before :meth:`contract`: indexes and foreign keys back on the
        old columns (kept in step by the triggers), without blocking writes."""

    @abstractmethod
    def unswap(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """Undo :meth:`swap` (run in one short transaction after :meth:`unprepare`)."""


def count(connection: Connection, table: str | sa.TableClause, *where: Any) -> int:
    """``SELECT count(*)`` of ``table`` (optionally filtered)."""
    source = sa.table(table) if isinstance(table, str) else table
    query = sa.select(sa.func.count()).select_from(source)
    if where:
        query = query.where(*where)
    return int(connection.execute(query).scalar_one())


def fill(
    connection: Connection,
    plan: PkMigrationPlan,
    fills: list[Fill],
    source_key: str,
    target_key: str,
) -> None:
    """Run every :class:`Fill` through the mapping table, one key range at a time
    (``source_key``/``target_key``: ``"old_key"``/``"new_key"`` or the reverse)."""
    pairs = mapping.mapping_table(plan)
    for f in fills:
        names = {f.source, f.target, *f.keep, *(c for pair in f.copy for c in pair)}
        t = sa.table(f.table, *(sa.column(n) for n in sorted(names)))
        values: dict[str, Any] = {f.target: pairs.c[target_key]}
        values.update({target: t.c[source] for target, source in f.copy})
        values.update({k: t.c[k] for k in f.keep})
        progress = Progress(f"{f.table}.{f.source}", count(connection, f.table))
        for after, up_to in mapping.key_ranges(connection, plan, source_key):
            where = [pairs.c[source_key] == t.c[f.source], t.c[f.source] <= up_to]
            if after is not None:
                where.append(t.c[f.source] > after)
            done = connection.execute(sa.update(t).values(values).where(*where)).rowcount
            progress.advance(done)


def count_orphans(connection: Connection, parent: str, key: str, child: str, column: str) -> int:
    """Rows of ``child`` whose non-null ``column`` matches no ``parent.key``."""
    parents = sa.table(parent, sa.column(key)).alias("parent")  # may be the child itself
    children = sa.table(child, sa.column(column))
    return int(
        connection.execute(
            sa.select(sa.func.count())
            .select_from(children)
            .where(
                children.c[column].is_not(None),
                ~sa.exists().where(parents.c[key] == children.c[column]),
            )
        ).scalar_one()
    )


def verify_filled(
    connection: Connection,
    plan: PkMigrationPlan,
    fills: list[Fill],
    source_key: str,
    target_key: str,
) -> None:
    """Every non-null source has its target, equal to the mapping's value for it."""
    pairs = mapping.mapping_table(plan)
    for f in fills:
        t = sa.table(f.table, sa.column(f.source), sa.column(f.target))
        expected = count(connection, t, t.c[f.source].is_not(None))
        matched = connection.execute(
            sa.select(sa.func.count())
            .select_from(t)
            .join(
                pairs,
                sa.and_(
                    pairs.c[source_key] == t.c[f.source],
                    pairs.c[target_key] == t.c[f.target],
                ),
            )
        ).scalar_one()
        if matched != expected:
            raise MigrationVerificationError(
                f"{f.table}.{f.source}: {expected - matched} of {expected} values have no"
                " matching converted value; stopped before changing any key"
            )


def execute_sql(connection: Connection, sql: str) -> None:
    """Run a complete SQL statement (no parameters); ``%`` in it (``LIKE 'a%'`` in a
    recreated definition) is escaped for drivers with ``format`` paramstyle."""
    if connection.dialect.paramstyle in ("format", "pyformat"):
        sql = sql.replace("%", "%%")
    connection.exec_driver_sql(sql)


def literal(connection: Connection, value: str) -> str:
    """``value`` as a string literal of this database (for DDL, which takes no
    bound parameters: ``COMMENT``), escaped by SQLAlchemy's literal renderer.

    The renderer doubles ``%`` for ``format``-paramstyle drivers; that is undone
    here because :func:`execute_sql` does it for the whole statement."""
    rendered = str(
        sa.literal(value, sa.String()).compile(
            dialect=connection.dialect, compile_kwargs={"literal_binds": True}
        )
    )
    if connection.dialect.paramstyle in ("format", "pyformat"):
        rendered = rendered.replace("%%", "%")
    return rendered


def drop_views(connection: Connection, plan: PkMigrationPlan) -> None:
    """Drop the views over affected columns, those built on others first."""
    for view in reversed(plan.views):
        execute_sql(connection, view.drop_sql)


def recreate_views(connection: Connection, plan: PkMigrationPlan) -> None:
    """Recreate the dropped views from their recorded definitions; a failure names
    the view (a comparison with an unconverted column is the usual reason)."""
    for view in plan.views:
        for sql in [view.create_sql, *view.after_sql]:
            try:
                execute_sql(connection, sql)
            except sa.exc.DBAPIError as error:
                raise view_error(view, error) from error


def view_error(view: View, error: sa.exc.DBAPIError) -> MigrationVerificationError:
    """The error for a view that could not be recreated, naming it and the way out."""
    reason = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
    return MigrationVerificationError(
        f"could not recreate view {view.name} (it depends on {view.depends_on}): {reason}."
        " If the view compares a converted column with one that holds the same keys"
        " without a foreign key, name that column in extra_references=[(table, column)]"
    )
