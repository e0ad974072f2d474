"""What adding a UUIDv7 key needs from a database: :class:`KeyAdder`.

Each backend package has its own (``backends/<database>/add_key.py``); the
runner (:mod:`sqla_ids.migration.add_key`) finds it with :func:`key_adder_for`.
The runner plans and checks, then calls, in order: :meth:`KeyAdder.start`
(the nullable column, and whatever finds a row), the shared batched fill
(:func:`~sqla_ids.migration.core.added_key.fill_keys`), :meth:`KeyAdder.finish`
(``NOT NULL``, the primary key, the default); the downgrade calls
:meth:`KeyAdder.undo`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import execute_sql, query_sql
from sqla_ids.migration.core.added_key import AddKeyPlan, UniqueKey, quoted
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.core.reflected import Inspector
from sqla_ids.types.server_functions import install_uuid7_function, uuid7_column_default_sql


class KeyAdder(ABC):
    """One database's DDL for adding (and dropping) a UUIDv7 primary key.

    ``transactional``: the whole run happens in one transaction (a failure
    rolls everything back); otherwise each DDL statement commits on its own
    and :meth:`abandon` removes what a failed run added.
    """

    transactional: bool = True

    def prepare(self, connection: Connection) -> None:  # noqa: B027 - optional hook
        """Connection settings to change before the transaction begins (none by default)."""

    @abstractmethod
    def unique_key(self, connection: Connection, table: str, name: str) -> UniqueKey | str | None:
        """The unique constraint or index ``name`` of ``table``; ``None`` when there
        is none, or a string saying why it cannot order the keys (partial,
        expression)."""

    def problems(self, connection: Connection, inspector: Inspector, plan: AddKeyPlan) -> list[str]:
        """What this database cannot do for ``plan`` (none by default); fills
        the plan's database-specific fields."""
        return []

    @abstractmethod
    def start(self, connection: Connection, plan: AddKeyPlan) -> list[sa.ColumnElement[Any]]:
        """Add the nullable key column; return the expressions that find one row."""

    @abstractmethod
    def finish(self, connection: Connection, plan: AddKeyPlan) -> None:
        """Make the filled column the primary key (``NOT NULL``, default, and the
        unique key dropped when asked)."""

    @abstractmethod
    def undo(self, connection: Connection, plan: AddKeyPlan) -> None:
        """Drop the key column and put back what :meth:`finish` removed."""

    @contextmanager
    def quiet(self, connection: Connection, plan: AddKeyPlan) -> Iterator[None]:
        """Around the fill: the application's ``UPDATE`` triggers kept from firing
        on the fill's writes, which are not application updates (each database
        its own way; nothing by default)."""
        yield

    @contextmanager
    def batch(self, connection: Connection) -> Iterator[None]:
        """Run one fill batch's statements (as they come: inside the run's
        transaction by default)."""
        yield

    def write_batch(
        self,
        connection: Connection,
        plan: AddKeyPlan,
        update: sa.Update,
        params: list[dict[str, Any]],
    ) -> None:
        """Write one batch's keys: ``update`` (by the rows' handle) for each of
        ``params`` (``sqla_ids_h<i>``: the handle, ``sqla_ids_key``: the key)."""
        connection.execute(update, params)

    def reached(self, connection: Connection, plan: AddKeyPlan) -> str:
        """How far a killed run of ``plan`` got (non-transactional databases):
        ``"nothing"``, ``"added"`` (the columns :meth:`start` adds are there) or
        ``"keyed"`` (:meth:`finish`'s rebuild is done). Transactional databases
        roll a killed run back: ``"nothing"``."""
        return "nothing"

    def abandon(self, connection: Connection, plan: AddKeyPlan) -> None:  # noqa: B027
        """After a failed non-transactional run: remove what it added (nothing by default)."""


@contextmanager
def explicit_transaction(connection: Connection) -> Iterator[None]:
    """One transaction around what runs inside, on a connection in autocommit mode
    (a non-transactional run's), where SQLAlchemy's ``begin()`` starts none on
    the server: each statement would otherwise commit on its own."""
    query_sql(connection, "START TRANSACTION")
    try:
        yield
    except BaseException:
        query_sql(connection, "ROLLBACK")
        raise
    query_sql(connection, "COMMIT")


#: Tries of an online step that meets the lock timeout (the waits between them:
#: the database's :meth:`~sqla_ids.migration.backends.base.OnlineStrategy.retry_delays`).
STEP_ATTEMPTS = 20


def install_default(connection: Connection, plan: AddKeyPlan) -> tuple[str, str]:
    """The server function new rows' keys come from, installed (idempotent); the
    column's default SQL recorded in the plan. Returns the table and column
    quoted for the SQL text."""
    install_uuid7_function(connection)
    plan.default_sql = uuid7_column_default_sql(connection.dialect)
    return quoted(connection, plan.table), quoted(connection, plan.column)


def autocommit(connection: Connection) -> bool:
    """Whether each statement commits on its own (an online run's connection)."""
    return connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"


def unindexed_order(
    indexes: list[tuple[list[str], bool]], plan: AddKeyPlan, create_index: str
) -> list[str]:
    """Online: the refusal when no index starts with the ordering columns.

    An online fill finds each row again by its ordering columns (``UPDATE ...
    WHERE <columns> = ...``, one per row): without an index each of them reads
    the whole table -- measured on PostgreSQL, 20,000 rows took 24 s against
    0.56 s with one (5,000: 1.8 s; it grows with the square of the rows: a
    million would take hours), and on MariaDB each also locks every row it
    reads. ``indexes``: the columns of each index over every row, in order, and
    whether it is unique (one over some of the ordering columns alone finds one
    row too); ``create_index``: how this database builds one without blocking
    writes, ``{table}`` and ``{columns}`` to fill in (the message's)."""
    order = set(plan.order_columns)
    if not order or any(
        set(names[: len(order)]) == order or (unique and set(names) <= order)
        for names, unique in indexes
    ):
        return []
    columns = ", ".join(plan.order_columns)
    return [
        f"online=True finds each row again by its ordering columns ({columns}), and no"
        " index starts with them: each row's UPDATE would read the whole table (20,000"
        " rows took 24 s against 0.56 s with one, growing with the square of the rows);"
        " build one first, without blocking writes ("
        + create_index.format(table=plan.table, columns=columns)
        + "), or add the key offline"
    ]


class LockWaits(Protocol):
    """How a database's sessions bound their lock waits (its online strategy has
    these, :class:`~sqla_ids.migration.backends.base.OnlineStrategy`)."""

    def set_lock_timeout(self, connection: Connection, seconds: float, local: bool) -> None:
        """Lock waits of the session give up after ``seconds`` (``0``: the default)."""

    def retry_delays(self, attempts: int) -> list[float]:
        """Seconds to sleep before each retry."""

    def is_lock_timeout(self, error: BaseException) -> bool:
        """Whether ``error`` is a lock wait that gave up."""

    def vacuum_holding(self, connection: Connection, tables: Sequence[str]) -> list[str]:
        """Which of ``tables`` the server's maintenance holds, which a longer wait
        makes it give up (PostgreSQL's autovacuum)."""

    def outlast_vacuum(self, connection: Connection, local: bool) -> None:
        """Make the session's lock waits outlast the server's deadlock check."""


def online_step(connection: Connection, online: LockWaits, plan: AddKeyPlan, sql: str) -> None:
    """Run one DDL statement of an online run under the run's ``lock_timeout``
    (the database's own lock settings, ``online``), again after a
    timeout -- an application's transaction holding the table -- after the
    strategy's pause: the application's statements never queue behind it for
    longer. In the caller's transaction (Alembic's, for a downgrade) a timeout
    would abort it and nothing could be tried again: the statement waits instead."""
    if not autocommit(connection):
        execute_sql(connection, sql)
        return
    delays = online.retry_delays(STEP_ATTEMPTS)
    outlast = False
    for attempt, delay in enumerate([*delays, None], 1):
        online.set_lock_timeout(connection, plan.options.lock_timeout, local=False)
        if outlast:
            online.outlast_vacuum(connection, local=False)
        try:
            execute_sql(connection, sql)
            return
        except Exception as error:
            if delay is None or not online.is_lock_timeout(error):
                raise
            vacuum = online.vacuum_holding(connection, [plan.table])
            logger.info(
                "%s: %s met the lock timeout (attempt %d%s)",
                plan.table,
                sql,
                attempt,
                f"; {', '.join(vacuum)} being vacuumed by the server: the next attempt"
                " outlasts the server's deadlock check, which cancels it"
                if vacuum
                else "",
            )
        finally:
            online.set_lock_timeout(connection, 0, local=False)
        # A vacuum the server cancels: waited for once, at once (one that an
        # attempt outlasting the check did not end is backed off from).
        if vacuum and not outlast:
            outlast = True
            continue
        outlast = bool(vacuum)
        time.sleep(delay)
