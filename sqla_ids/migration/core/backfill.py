"""The online backfill: one keyset loop for every backend and every column.

A backend describes one backfill as a :class:`Walk` -- the SQL of one batch
and of "what is left" -- and :func:`run_walk` drives it: batches in key
order, each in its own short transaction, sized by the time they take
(:class:`~sqla_ids.migration.core.progress.Batches`), with progress; then
sweeps again while rows are left (a key moved behind the walk, a row written
in a way the sync triggers could not follow), up to :data:`SWEEPS` times.

The parent's new keys are computed in SQL from an *ordinal* (the row's rank in
old-key order, continued across batches, sweeps and resumed runs): a 48-bit
millisecond timestamp of :func:`first_ms` plus ``ordinal >> 12``, then the
ordinal's low 12 bits as the UUIDv7's ``rand_a``. The first timestamp lies
far enough before the plan's time that every backfilled key sorts before
every key given to a new row since the expand, and a resumed run reads the
last ordinal back from the keys below :func:`backfilled_below`.

With a ``timestamp_column`` the parent's keys follow the offline rule instead
(:func:`sqla_ids.migration.core.mapping.key_numbers`, in SQL: the same
expressions as the offline mapping): each key's millisecond is the row's
timestamp, kept from going back by the key before it -- rows whose times tie
or go back take the next counter values after it -- so the keys increase
strictly in old-key order (a ``NULL`` time takes the next number after the
key before). Batches continue from the last key made (:attr:`ParentKeysWalk.prev`).
A walk (re)starting reads it back from the mapping table: each key the
backfill makes carries in its 56 last bits ``sha256("<seed>:<old key>")``
(:func:`marked`), which the keys the application's rows get from
``sqla_ids_uuid7()`` do not, so the largest marked key is the last one made,
whatever the application inserted above it. Rows the application inserts
during the migration keep getting keys of their own time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, TypeVar
from uuid import UUID

from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql, quoter
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.core import mapping
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.progress import Batches
from sqla_ids.migration.core.reflected import inspect

T = TypeVar("T")

#: Walks over a table before giving up on rows that keep moving.
SWEEPS = 5


def first_ms(plan: PkMigrationPlan) -> int:
    """The timestamp of ordinal 0: 4,096 ordinals per millisecond, ending before
    the plan's time (so backfilled keys sort below the keys of new rows)."""
    return plan.base_time_ms - (plan.row_count >> 12) - 2


def backfilled_below(plan: PkMigrationPlan) -> str:
    """32 hex digits: every backfilled key is below this UUID, every new row's above."""
    return f"{plan.base_time_ms:012x}70008000000000000000"


class Transactions(Protocol):
    """Where a walk's statements run: short transactions, retried on lock timeouts."""

    def transaction(self, work: Callable[[Connection], T], what: str) -> T:
        """``work`` in one short transaction under the migration's ``lock_timeout``."""


class Walk(ABC):
    """One backfill, as SQL: a backend subclasses it per kind of column."""

    label: str
    """What the progress lines call it (``shop.id new keys``)."""

    @abstractmethod
    def start(self, connection: Connection) -> int:
        """Begin a sweep (read its bounds); the rows it covers, for progress."""

    @abstractmethod
    def batch(self, connection: Connection, after: Any, size: int) -> tuple[Any, int] | None:
        """Do the batch of about ``size`` rows after key ``after`` (``None``: from
        the start): its last key and the rows it covered, or ``None`` at the end."""

    def finish(self, connection: Connection) -> None:  # noqa: B027 - optional
        """After a sweep's last batch (nothing by default)."""

    @abstractmethod
    def left(self, connection: Connection) -> int:
        """Rows still to do after a sweep (``0``: the backfill is complete)."""

    @abstractmethod
    def stuck(self) -> str:
        """Why the backfill stops when rows are still left after every sweep."""


def timestamp_refusals(plan: PkMigrationPlan) -> list[str]:
    """Why the online mode cannot take the keys' times from ``timestamp_column``
    (the planner has refused a missing or non-date column already): a column the
    migration converts holds old keys, not times."""
    ts = plan.timestamp_column
    if ts is not None and ts in plan.columns_of(plan.table):
        return [
            f"timestamp column {plan.table}.{ts} is a column the migration converts to"
            " UUIDs; name a date or timestamp column that stays (or none)"
        ]
    return []


def marked(key: UUID, seed: str, old_key: int | str) -> bool:
    """Whether ``key`` is one the online backfill made for ``old_key`` with a
    timestamp column: its 56 last bits are ``sha256("<seed>:<old key>")``'s first."""
    return mapping.new_key(0, seed, old_key).int & ((1 << 56) - 1) == key.int & ((1 << 56) - 1)


class ParentKeysWalk(Walk):
    """The parent's new keys (each backend's ``ParentKeys`` gives ``start`` and
    ``batch``): what is left and why it stops are the same on every database."""

    plan: PkMigrationPlan
    prev: int | None = None
    """With a timestamp column: ``ms << 18 | counter`` of the last key the walk
    made (``-1``: none), read back from the mapping when the walk (re)starts."""

    def last_made(self, connection: Connection) -> UUID | None:
        """With a timestamp column: the largest key of the mapping whose last bits
        are its old key's mark (:func:`marked`) -- the last key the backfill made."""
        raise NotImplementedError  # pragma: no cover - every backend has one

    def resume(self, connection: Connection) -> None:
        """With a timestamp column, at each sweep's start: continue after the last
        key made (read from the mapping, not kept from a run that may have been
        killed), and refuse by name a timestamp column dropped since the plan."""
        ts = self.plan.timestamp_column
        if ts is None:
            return
        names = {c["name"] for c in inspect(connection).get_columns(self.plan.table)}
        if ts not in names:
            raise MigrationRefusedError(
                f"timestamp column {self.plan.table}.{ts} no longer exists (the new keys"
                " take their times from it); add it back, or undo the migration"
                " (migrate_pk_to_uuid7 ... undo) and plan it again; nothing was changed"
            )
        last = self.last_made(connection)
        self.prev = -1 if last is None else mapping.key_number(last)

    def left(self, connection: Connection) -> int:
        """Rows still without a new key (their key moved behind the walk)."""
        q = quoter(connection.dialect)
        tmp = q(self.plan.temp_column(self.plan.table, self.plan.column))
        return int(
            query_sql(
                connection, f"SELECT count(*) FROM {q(self.plan.table)} WHERE {tmp} IS NULL"
            ).scalar_one()
        )

    def stuck(self) -> str:
        """Rows kept changing their keys."""
        return (
            f"{self.plan.table}: rows keep changing their keys faster than the backfill;"
            " stopped before the swap (run the migration again to continue)"
        )


def run_walk(
    tx: Transactions, walk: Walk, batches: Callable[[str, int], Batches], sweeps: int = SWEEPS
) -> None:
    """Drive ``walk`` to the end (see the module docstring); ``batches`` makes the
    sizing and progress of the walk from its label and its rows."""
    sizes: Batches | None = None
    for _ in range(sweeps):
        total = tx.transaction(walk.start, "backfill")
        if sizes is None:
            sizes = batches(walk.label, total)
        after: Any = None
        while True:
            done = tx.transaction(partial(walk.batch, after=after, size=sizes.next()), "backfill")
            if done is None:
                break
            after, rows = done
            sizes.done(rows)
        tx.transaction(walk.finish, "backfill")
        if not tx.transaction(walk.left, "backfill check"):
            return
    raise MigrationRefusedError(walk.stuck())
