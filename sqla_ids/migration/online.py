"""Online key migration: the phases, their transactions, retries and resumption.

The database's :class:`~sqla_ids.migration.strategies.OnlineStrategy` holds the
SQL; this module runs it: every step in its own short transaction on its own
connection, under ``lock_timeout`` and retried with exponential backoff when a
lock is not granted in time, the phase reached recorded in the state table
(in the same transaction as the step), so a run killed at any point continues
where it stopped.

Phases: ``prepare`` (expand, backfill, prepare, verify), ``swap`` (the short
cut-over, then verify again) and ``contract`` (later, separately). ``"all"``
runs the three in a row.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sqla_ids.dialects import for_dialect
from sqla_ids.errors import LockTimeoutError, MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration import state
from sqla_ids.migration.model import PkMigrationPlan, refuse
from sqla_ids.migration.options import PkMigrationOptions
from sqla_ids.migration.progress import Batches, logger
from sqla_ids.migration.strategies import OnlineStrategy

T = TypeVar("T")

Phase = Literal["all", "prepare", "swap", "contract"]
PHASES: tuple[str, ...] = ("all", "prepare", "swap", "contract")

# Steps recorded in the state table, in order. PLANNED is recorded before the
# expand begins: on MariaDB each of its statements commits on its own, and a
# run killed half-way must find the plan to continue (a new plan would be
# refused over the columns the killed run added).
PLANNED, EXPANDED, BACKFILLED, PREPARED, SWAPPED = (
    "online:planned",
    "online:expanded",
    "online:backfilled",
    "online:prepared",
    "online:swapped",
)
_ORDER = ["", PLANNED, EXPANDED, BACKFILLED, PREPARED, SWAPPED, "done"]


class OnlineRun:
    """Runs an online strategy's statements (the ``OnlineContext`` it is given)."""

    def __init__(
        self,
        engine: Engine,
        plan: PkMigrationPlan,
        strategy: OnlineStrategy,
        options: PkMigrationOptions,
    ) -> None:
        self.engine = engine
        self.plan = plan
        self.strategy = strategy
        # Timing knobs come from this run's options (a resumed run may change them).
        self.lock_timeout = options.lock_timeout
        self.attempts = options.swap_attempts
        self.batch_pause = options.batch_pause
        self.batch_time = options.batch_time
        self.nice_ratio = options.nice_ratio
        self.metadata_lock_wait = options.metadata_lock_wait
        self.retries = 0
        """Lock timeouts met (and retried) so far."""

    def _retrying(self, attempt: Callable[[], T], what: str) -> T:
        delays = self.strategy.retry_delays(self.attempts)
        total = len(delays) + 1
        for number in range(1, total + 1):
            started = time.monotonic()
            try:
                result = attempt()
            except sa.exc.DBAPIError as error:
                if not self.strategy.is_lock_timeout(error) or number == total:
                    if self.strategy.is_lock_timeout(error):
                        raise LockTimeoutError(
                            f"{self.plan.table}: {what} did not get its locks within"
                            f" {self.lock_timeout} s in {total} attempts (the"
                            " application holds them); this step changed nothing, run"
                            " the migration again to continue"
                        ) from None
                    raise
                self.retries += 1
                self._took(f"{what} (no lock, retried)", started)
                delay = delays[number - 1]
                logger.info(
                    "%s: %s could not get its locks in time (attempt %d/%d); retrying in %.2f s",
                    self.plan.table,
                    what,
                    number,
                    total,
                    delay,
                )
                time.sleep(delay)
            else:
                self._took(what, started)
                return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _took(self, what: str, started: float) -> None:
        # Every step's time at DEBUG: to tell which step an application's slow
        # statement waited for (benchmarks/online_migration.py names it).
        logger.debug("%s: %s took %.3f s", self.plan.table, what, time.monotonic() - started)

    def transaction(self, work: Callable[[Connection], T], what: str) -> T:
        """``work`` in one short transaction under ``lock_timeout``, retried."""

        def attempt() -> T:
            with self.engine.connect() as connection:
                try:
                    with connection.begin():
                        self.strategy.set_lock_timeout(connection, self.lock_timeout, local=True)
                        return work(connection)
                finally:
                    self._release(connection)

        return self._retrying(attempt, what)

    def autocommit(self, sql: str, what: str, params: dict[str, Any] | None = None) -> None:
        """One statement outside any transaction (``CREATE INDEX CONCURRENTLY``).

        No lock timeout: such a statement only takes locks that the
        application's reads and writes do not conflict with, and it waits for
        the transactions already running to end -- a wait that blocks nobody.
        """
        started = time.monotonic()
        with self.engine.connect() as connection:
            connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            try:
                self.strategy.set_lock_timeout(connection, 0, local=False)
                connection.execute(sa.text(sql), params or {})
            finally:
                self._release(connection)
        self._took(what, started)

    def _release(self, connection: Connection) -> None:
        # The connection goes back to the application's pool: no setting of ours
        # may stay on it (a connection that broke is discarded by the pool anyway).
        if connection.invalidated:
            return
        with contextlib.suppress(sa.exc.DBAPIError):
            self.strategy.release(connection)

    def pause(self) -> None:
        """Sleep ``batch_pause`` seconds between backfill batches."""
        if self.batch_pause:
            time.sleep(self.batch_pause)

    def batches(self, step: str, total: int) -> Batches:
        """The batches of a backfill step: sized by ``batch_time`` up to
        ``batch_size``, progress through Alembic's logger, ``nice_ratio`` and
        ``batch_pause``."""
        return Batches(
            step,
            total,
            largest=self.plan.batch_size,
            target=self.batch_time,
            pause=self.pause,
            nice_ratio=self.nice_ratio,
        )

    def step(self, work: Callable[[Connection], None], reached: str, what: str) -> None:
        """``work`` and the record that ``reached`` was reached, in one transaction."""

        def both(connection: Connection) -> None:
            work(connection)
            state.save(connection, self.plan, reached)

        self.transaction(both, what)


def online_strategy(engine: Engine | Connection) -> OnlineStrategy:
    """The database's online strategy, or a refusal naming the database."""
    database = for_dialect(engine.dialect)
    strategy = database.migration().online
    if strategy is None:
        raise MigrationRefusedError(
            f"cannot migrate online on {database.label}: the online mode needs PostgreSQL"
            " or MariaDB"
            + (
                " (SQLite lets one writer in at a time: use the offline mode)"
                if database.label == "SQLite"
                else "; use the offline mode with writers paused"
            )
            + "; nothing was changed"
        )
    return strategy


def _engine(connection: Connection) -> Engine:
    # Each step commits on its own, on connections of the same engine. An open
    # transaction on the caller's connection would hold locks and a snapshot
    # that CREATE INDEX CONCURRENTLY waits for forever: refused (in Alembic,
    # the sqla_ids operation runs in an autocommit block for this).
    autocommit = connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
    if connection.in_transaction() and not autocommit:
        raise MigrationRefusedError(
            "cannot migrate online from inside a transaction: each step commits on its own"
            " and would wait for it; pass a connection with no transaction open (commit"
            " first); nothing was changed"
        )
    return connection.engine


def migrate_online(
    connection: Connection,
    table: str,
    options: PkMigrationOptions,
    phase: Phase = "all",
    *,
    dry_run: bool = False,
) -> PkMigrationPlan:
    """Run ``phase`` of the online migration of ``table`` (see the module docstring)."""
    from sqla_ids.migration.plan import plan_pk_migration

    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    strategy = online_strategy(connection)
    engine = _engine(connection)
    with engine.connect() as conn:
        recorded = state.load(conn, table)
        if recorded is None:
            if phase == "contract":
                raise refuse(f"{table} has no online migration to contract", table)
            plan = plan_pk_migration(conn, table, options)
            problems = strategy.refusals(conn, plan)
            if problems:
                raise refuse("; ".join(problems), table)
            reached = ""
        else:
            reached, plan = recorded
            if reached == "done":
                logger.info("%s.%s is already migrated to UUIDv7: skipped", table, plan.column)
                return plan
            if reached not in _ORDER:
                raise refuse(f"{table} has an offline migration in progress ({reached})", table)
            check_recorded(conn, plan, reached)
            logger.info("%s: continuing the online migration after %s", table, reached or "start")
    if dry_run:
        return plan
    run = OnlineRun(engine, plan, strategy, options)
    goal = {"prepare": PREPARED, "swap": SWAPPED, "contract": "done", "all": "done"}[phase]
    if phase == "contract" and _ORDER.index(reached) < _ORDER.index(SWAPPED):
        raise refuse(f"{table} is not swapped yet (at {reached or 'start'}): run the swap first")
    started = time.monotonic()
    if reached == "":
        logger.info("%s", plan.describe())
        run.step(lambda c: None, PLANNED, "plan")
        reached = PLANNED
    if reached == PLANNED:
        run.step(lambda c: strategy.expand(c, plan), EXPANDED, "expand")
        reached = EXPANDED
    if reached == EXPANDED:
        strategy.backfill(run)
        run.step(lambda c: None, BACKFILLED, "backfill")
        reached = BACKFILLED
    if reached == BACKFILLED:
        strategy.prepare(run)
        _verify(run, strategy, swapped=False)
        run.step(lambda c: None, PREPARED, "prepare")
        reached = PREPARED
    if goal == PREPARED:
        return plan
    if reached == PREPARED:
        run.step(lambda c: strategy.swap(c, plan), SWAPPED, "swap")
        reached = SWAPPED
        _verify(run, strategy, swapped=True)
        logger.info("%s: swapped to UUIDv7 keys (%.1f s so far)", table, time.monotonic() - started)
    if goal == SWAPPED:
        return plan
    run.step(lambda c: strategy.contract(c, plan), "done", "contract")
    logger.info("%s: online migration finished", table)
    return plan


def check_recorded(connection: Connection, plan: PkMigrationPlan, reached: str) -> None:
    """The migrated table must still show the step the state table records: a
    table dropped and created again (a test database reset without the state
    table) would otherwise be taken for the migrated one -- "continued" by
    doing nothing, or swapped back by renaming columns it never had.

    On MariaDB a swap (or its undo) killed half-way leaves either name in
    place until it runs again: both are accepted from the prepare on.
    """
    key_tmp = plan.temp_column(plan.table, plan.column)
    either = {
        EXPANDED: [key_tmp],
        BACKFILLED: [key_tmp],
        PREPARED: [key_tmp, plan.old_column],
        SWAPPED: [plan.old_column, key_tmp],
    }.get(reached)
    if either is None:
        return
    dialect = for_dialect(connection.dialect).migration()
    inspector = sa.inspect(connection)
    if not inspector.has_table(plan.table):
        missing = [f"the table {plan.table}"]
    else:
        columns = dialect.columns(connection, inspector, plan.table)
        missing = [f"{plan.table}.{plan.column}"] if plan.column not in columns else []
        if not any(c in columns for c in either):
            missing.append(" or ".join(f"{plan.table}.{c}" for c in either))
    # (An undo of the swap drops the mapping before it ends: not asked for then.)
    if reached != SWAPPED and not inspector.has_table(plan.mapping_table):
        missing.append(f"the mapping table {plan.mapping_table}")
    if missing:
        raise refuse(
            f"the state table records its online migration at {reached}, but"
            f" {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing: the"
            " tables were changed outside the migration (dropped and created again?); if so,"
            f" delete the row of {plan.table!r} from {state.STATE_TABLE} to start over",
            plan.table,
        )


def _verify(run: OnlineRun, strategy: OnlineStrategy, swapped: bool) -> None:
    problems = run.transaction(lambda c: strategy.verify(c, run.plan, swapped), "verify")
    if problems:
        raise MigrationVerificationError(
            f"{run.plan.table}: online migration check failed: {'; '.join(problems)}"
        )


def unswap_online(
    connection: Connection, plan: PkMigrationPlan, options: PkMigrationOptions | None = None
) -> PkMigrationPlan:
    """Undo a swapped (not yet contracted) online migration, online: the old
    columns get their indexes and foreign keys back without blocking writes,
    then take their names again in one short transaction."""
    strategy = online_strategy(connection)
    run = OnlineRun(_engine(connection), plan, strategy, options or plan.migration_options)
    strategy.unprepare(run)
    _verify(run, strategy, swapped=True)

    def work(c: Connection) -> None:
        strategy.unswap(c, plan)
        state.forget(c, plan.table)

    run.transaction(work, "undo swap")
    logger.info("%s: online migration undone (old keys back)", plan.table)
    return plan


def abort_online(connection: Connection, plan: PkMigrationPlan) -> PkMigrationPlan:
    """Undo an online migration that has not been swapped yet, on ``connection``
    (in its transaction, as a downgrade runs): the tables as they were."""
    strategy = online_strategy(connection)
    strategy.abort(connection, plan)
    state.forget(connection, plan.table)
    logger.info("%s: online migration undone before its swap", plan.table)
    return plan
