"""Online key migration: the phases, their transactions, retries and resumption.

The database's :class:`~sqla_ids.migration.backends.base.OnlineStrategy` holds the
SQL; this module runs it: every step in its own short transaction on its own
connection, under ``lock_timeout`` and retried with exponential backoff when a
lock is not granted in time, the phase reached recorded in the state table
(in the same transaction as the step), so a run killed at any point continues
where it stopped.

The phases are a table (:data:`UP`, and :data:`UNDO_SWAPPED` for the way
back): what each records, what it does, which check runs before and after it.
The runner loops over the table, and no phase runs while the check before it
is unresolved: a check that failed after the swap (rows the application
wrote meanwhile) stops every later run at the contract's check, before
anything is dropped. The user-facing goals: ``prepare`` (expand, backfill,
prepare, verify), ``swap`` (the short cut-over, then verify again) and
``contract`` (later, separately); ``"all"`` runs the three in a row.
"""

from __future__ import annotations

import contextlib
import enum
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Literal, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sqla_ids.errors import LockTimeoutError, MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration.backends.base import (
    Backfill,
    Ddl,
    MigrationBackend,
    Mode,
    OnlineStrategy,
    Probe,
    Task,
)
from sqla_ids.migration.core import state
from sqla_ids.migration.core.backfill import run_walk
from sqla_ids.migration.core.model import PkMigrationPlan, refuse
from sqla_ids.migration.core.names import child_old, rebuilt, references
from sqla_ids.migration.core.options import PkMigrationOptions
from sqla_ids.migration.core.phases import Check, Reached, Recorded
from sqla_ids.migration.core.progress import Batches, logger
from sqla_ids.migration.core.reflected import inspect
from sqla_ids.migration.core.sql import Statement, execute, view_error
from sqla_ids.migration.core.verify import verify
from sqla_ids.migration.plan import plan_and_blockers, resumed_options

T = TypeVar("T")

Phase = Literal["all", "prepare", "swap", "contract"]
PHASES: tuple[str, ...] = ("all", "prepare", "swap", "contract")


class Session:
    """The migration's connections: from the caller's engine, resolving names as
    the caller's connection did (its ``search_path`` / database), handed back
    to the pool with none of the migration's settings left on them."""

    def __init__(self, connection: Connection, strategy: OnlineStrategy) -> None:
        self.engine = _engine(connection)
        self.strategy = strategy
        began = not connection.in_transaction()
        self.scope = strategy.scope(connection)
        if began and connection.in_transaction():
            connection.rollback()  # only our read began it
        self._idle: Connection | None = None
        """A connection of ours between two transactions, its scope entered: the
        next one takes it. Each backfill batch is a transaction of its own; a
        connection from the pool for each cost four round trips more (the
        scope set and put back, each committed, and the pool's reset) -- a
        quarter of a small migration's time, measured."""

    @contextlib.contextmanager
    def connect(self, autocommit: bool = False) -> Iterator[Connection]:
        """A connection of the migration (``autocommit``: outside any transaction)."""
        connection = None
        if not autocommit:
            connection, self._idle = self._idle, None
        if connection is None:
            connection = self.engine.connect()
            if autocommit:
                connection = connection.execution_options(isolation_level="AUTOCOMMIT")
            try:
                self.strategy.enter_scope(connection, self.scope)
                if connection.in_transaction():
                    connection.commit()  # the scope's statements: a transaction of their own
            except BaseException:
                self._release(connection)
                raise
        clean = False
        try:
            yield connection
            clean = True
        finally:
            if clean and not autocommit and self._idle is None and self._rested(connection):
                self._idle = connection
            else:
                self._release(connection)

    def _rested(self, connection: Connection) -> bool:
        """Whether ``connection`` is back to where the next transaction may take it:
        nothing pending, the strategy's session settings undone."""
        if connection.invalidated:
            return False
        try:
            if connection.in_transaction():
                connection.rollback()
            self.strategy.release(connection)
            if connection.in_transaction():
                connection.commit()
        except sa.exc.DBAPIError:
            return False
        return True

    def close(self) -> None:
        """The connection kept between transactions back to the pool, clean."""
        connection, self._idle = self._idle, None
        if connection is not None:
            self._release(connection)

    def _release(self, connection: Connection) -> None:
        # The connection goes back to the application's pool: no setting of ours
        # may stay on it (a connection that broke is discarded by the pool anyway).
        try:
            if connection.invalidated:
                return
            try:
                if connection.in_transaction():
                    connection.rollback()
                self.strategy.release(connection)
                self.strategy.leave_scope(connection)
                if connection.in_transaction():
                    connection.commit()
            except sa.exc.DBAPIError:
                # Not known to be clean (a MariaDB session still marked as the
                # migration's would skip the application's guarded triggers):
                # discarded, never handed back.
                connection.invalidate()
        finally:
            connection.close()

    @contextlib.contextmanager
    def exclusive(self, table: str) -> Iterator[None]:
        """One run of ``table``'s migration at a time (in this schema/database):
        a second one is refused while the first holds the lock."""
        name = json.dumps([self.scope, table])
        with self.connect(autocommit=True) as connection:
            if not self.strategy.try_lock(connection, name):
                raise MigrationRefusedError(
                    f"another run of the migration of {table} is in progress (it holds the"
                    " migration's lock); wait for it to end, or stop it -- then run this one"
                    " again; nothing was changed"
                )
            try:
                yield
            finally:
                self.close()
                with contextlib.suppress(sa.exc.DBAPIError):
                    self.strategy.unlock_name(connection, name)


class OnlineRun:
    """Runs an online strategy's statements (the ``OnlineContext`` it is given)."""

    def __init__(self, session: Session, plan: PkMigrationPlan, backend: MigrationBackend) -> None:
        self.session = session
        self.plan = plan
        self.backend = backend
        self.strategy = online_strategy(backend)
        # The plan's options carry this run's knobs (a resumed run takes its own).
        options = plan.options
        self.lock_timeout = options.lock_timeout
        self.attempts = options.swap_attempts
        self.batch_pause = options.batch_pause
        self.batch_time = options.batch_time
        self.nice_ratio = options.nice_ratio
        self.metadata_lock_wait = options.metadata_lock_wait
        self.retries = 0
        """Lock timeouts met (and retried) so far."""
        self.outlast: list[str] = []
        """Tables (quoted) the next attempt first waits for past the server's
        deadlock check, holding nothing (a vacuum held them when the last one
        gave up: see ``OnlineStrategy.wait_out_vacuum``)."""

    def _retrying(self, attempt: Callable[[], T], what: str) -> T:
        delays = self.strategy.retry_delays(self.attempts)
        total = len(delays) + 1
        for number in range(1, total + 1):
            started = time.monotonic()
            outlasting = bool(self.outlast)
            try:
                result = attempt()
            except sa.exc.DBAPIError as error:
                if not self.strategy.is_lock_timeout(error):
                    raise
                self._took(f"{what} (no lock, retried)", started)
                vacuum = self._vacuum_holding()
                holder = (
                    f"{', '.join(vacuum)} being vacuumed by the server"
                    if vacuum
                    else "the application"
                )
                if number == total:
                    raise LockTimeoutError(
                        f"{self.plan.table}: {what} did not get its locks within"
                        f" {self.lock_timeout} s in {total} attempts ({holder} holds them);"
                        " this step changed nothing, run the migration again to continue"
                    ) from None
                self.retries += 1
                # A vacuum the server cancels for a wait past its deadlock check:
                # the next attempt waits that long, at once (an attempt that did
                # and still failed met one that is not cancelled -- a vacuum
                # against wraparound -- and backs off as for the application).
                self.outlast = vacuum
                delay = 0.0 if vacuum and not outlasting else delays[number - 1]
                logger.info(
                    "%s: %s could not get its locks in time (attempt %d/%d): %s holds them%s;"
                    " retrying in %.2f s",
                    self.plan.table,
                    what,
                    number,
                    total,
                    holder,
                    ": the next attempt first waits for them past the server's deadlock"
                    " check, which cancels the vacuum, holding nothing"
                    if vacuum
                    else "",
                    delay,
                )
                time.sleep(delay)
            else:
                self._took(what, started)
                return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _vacuum_holding(self) -> list[str]:
        """The affected tables the server's maintenance holds (after a lock timeout)."""
        tables = [*self.plan.affected_tables, self.plan.mapping_table]
        with self.session.connect() as connection, connection.begin():
            return self.strategy.vacuum_holding(connection, tables)

    def _took(self, what: str, started: float) -> None:
        # Every step's time at DEBUG: to tell which step an application's slow
        # statement waited for (benchmarks/online_migration.py names it).
        logger.debug("%s: %s took %.3f s", self.plan.table, what, time.monotonic() - started)

    def transaction(self, work: Callable[[Connection], T], what: str) -> T:
        """``work`` in one short transaction under ``lock_timeout``, retried."""

        def attempt() -> T:
            outlast, self.outlast = self.outlast, []
            with self.session.connect() as connection, connection.begin():
                self.strategy.set_lock_timeout(connection, self.lock_timeout, local=True)
                # The long wait first, holding nothing: never while holding what
                # the step's statements lock (an application transaction queued
                # for that would be in a cycle with the step, and the victim).
                self.strategy.wait_out_vacuum(connection, outlast)
                return work(connection)

        return self._retrying(attempt, what)

    def autocommit(self, statement: Statement, what: str) -> None:
        """One statement outside any transaction (``CREATE INDEX CONCURRENTLY``).

        No lock timeout: such a statement only takes locks that the
        application's reads and writes do not conflict with, and it waits for
        the transactions already running to end -- a wait that blocks nobody.
        """
        started = time.monotonic()
        with self.session.connect(autocommit=True) as connection:
            self.strategy.set_lock_timeout(connection, 0, local=False)
            execute(connection, [statement])
        self._took(what, started)

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

    def run_tasks(
        self, tasks: list[Task], then: Callable[[Connection], None] | None = None
    ) -> None:
        """Carry out ``tasks`` in order. ``then`` (the record of the phase) runs in
        the last task's transaction when that task is statements run in one
        (after the unlock of a locked task), else in a transaction of its own."""
        for number, task in enumerate(tasks, start=1):
            last = then if number == len(tasks) else None
            logger.debug("%s: %s begins", self.plan.table, _what(task))
            if isinstance(task, Ddl) and task.mode is not Mode.AUTOCOMMIT:
                self._ddl(task, last)
                continue
            if isinstance(task, Backfill):
                run_walk(self, task.walk, self.batches)
            elif isinstance(task, Probe):
                self.transaction(task.run, task.what)
            else:
                for statement in self.transaction(task.build, f"{task.what} (check)"):
                    self.autocommit(statement, task.what)
            if last is not None:
                self.transaction(last, "record")
        if not tasks and then is not None:
            self.transaction(then, "record")

    def _ddl(self, task: Ddl, then: Callable[[Connection], None] | None = None) -> None:
        def work(connection: Connection) -> None:
            if task.mode is Mode.LOCKED:
                self._locked(connection, task)
            else:
                execute(connection, task.build(connection))
            if then is not None:
                then(connection)

        try:
            self.transaction(work, task.what)
        except LockTimeoutError as error:
            if not task.hint:
                raise
            raise LockTimeoutError(f"{error}; {task.hint}") from None
        except sa.exc.DBAPIError as error:
            # A view the swap (or its undo) recreates that does not work over the
            # columns that have the names now: named, with the way out.
            # (The statement as the driver got it: execute_sql sends it as written.)
            ran = str(error.statement or "")
            view = next((v for v in self.plan.views if ran in (v.create_sql, *v.after_sql)), None)
            if view is None:
                raise
            raise view_error(view, error) from error

    def _locked(self, connection: Connection, task: Ddl) -> None:
        """The task's statements with the affected tables locked: built after the
        lock is taken, and built and run again under it when a statement meets
        a lock timeout (``locked_attempts`` times: the statements done are
        committed on MariaDB, and the catalog says what is left)."""
        # Built first: a step that could not read what it locks (a lock timeout
        # on the catalog) has taken nothing, and releases nothing.
        lock = self.strategy.lock(connection, self.plan)
        try:
            # Run in the try: a lock not taken is released too (MariaDB: what
            # the strategy readied for the step, e.g. the versions' sessions).
            execute(connection, lock)
            attempts = self.strategy.locked_attempts
            for attempt in range(1, attempts + 1):
                try:
                    execute(connection, task.build(connection))
                    return
                except sa.exc.DBAPIError as error:
                    if not self.strategy.is_lock_timeout(error) or attempt == attempts:
                        raise
                    logger.info(
                        "%s: a locked step waited for a metadata lock (attempt %d/%d)",
                        self.plan.table,
                        attempt,
                        attempts,
                    )
        finally:
            execute(connection, self.strategy.unlock(connection))


def _what(task: Task) -> str:
    return task.walk.label if isinstance(task, Backfill) else task.what


class Records(enum.Enum):
    """What a phase leaves in the state table, and where."""

    AFTER = "the phase reached, once its check passed"
    WITH_LAST = "the phase reached, in its last task's transaction"
    """A swap must never be recorded apart from it (nor an expand on PostgreSQL)."""
    FORGET = "the migration forgotten, in its last task's transaction"
    NOTHING = "nothing"


@dataclass(frozen=True)
class Guard:
    """Columns whose dependent objects must be the ones the plan recorded
    (:attr:`~sqla_ids.migration.core.model.PkMigrationPlan.attached`)."""

    columns: Callable[[PkMigrationPlan], dict[str, set[str]]]
    """Table -> the columns, by their names when the phase begins."""
    fate: str
    """What the migration does to them, for the refusal."""


@dataclass(frozen=True)
class OnlinePhase:
    """One row of a phase table: what it does, records and checks."""

    reaches: Reached | None
    """The phase the migration has reached once this one is done."""
    does: str
    """What it does, in a few words (logs)."""
    tasks: Callable[[OnlineStrategy, PkMigrationPlan], list[Task]]
    """The backend's tasks for it."""
    records: Records = Records.AFTER
    check_before: Check | None = None
    """Checked before the tasks (skipped when this run has just checked it)."""
    marks: Reached | None = None
    """Recorded once :attr:`check_before` passed, before the tasks: a phase whose
    statements commit one by one (MariaDB), which a run stopped half-way leaves
    to be finished, not begun again (nor checked, its columns half renamed)."""
    check_after: Check | None = None
    """Checked after the tasks, before the record: no later phase runs until it passes."""
    shows: Callable[[PkMigrationPlan], list[str]] | None = None
    """Columns of the migrated table of which at least one must exist when a run
    resumes after this phase (the table was not dropped and created again)."""
    guards: Guard | None = None
    """Columns this phase (or a later one) renames away or drops: an object on
    them the plan did not record was created since, and is refused by name
    before the phase runs, not dropped with its column."""
    repair: Callable[[OnlineStrategy, PkMigrationPlan], list[Task]] | None = None
    """Run once when :attr:`check_after` fails (then checked again): rows the
    application wrote in a way no trigger could follow are swept again."""


def _key_tmp(plan: PkMigrationPlan) -> list[str]:
    return [plan.temp_column(plan.table, plan.column)]


def _named(plan: PkMigrationPlan) -> dict[str, set[str]]:
    """The converted columns under their own names: the old values before the
    swap (which parks them), the new ones after (which an undo drops)."""
    columns: dict[str, set[str]] = {}
    for table, column in plan.targets():
        columns.setdefault(table, set()).add(column)
    return columns


def _parked(plan: PkMigrationPlan) -> dict[str, set[str]]:
    """Where the swap parks the children's old values, which the contract drops
    (unless kept; the parent's old key stays in ``<key>_old`` either way)."""
    columns: dict[str, set[str]] = {}
    if not plan.keep_child_old_columns:
        for n, ref in references(plan):
            columns.setdefault(ref.table, set()).add(child_old(plan, n, ref))
    return columns


#: Before the swap: the columns it parks, which the contract drops.
_BEFORE_SWAP = Guard(
    _named,
    "the swap parks those columns and the contract drops them with what depends on them",
)


#: The online migration, in order. The plan is recorded before the expand
#: begins: on MariaDB each of its statements commits on its own, and a run
#: killed half-way must find the plan to continue (a new plan would be refused
#: over the columns it added). On MariaDB a swap (or its undo) killed half-way
#: leaves either name of the key in place until it runs again: both are
#: accepted from the prepare on.
UP: tuple[OnlinePhase, ...] = (
    OnlinePhase(Reached.ONLINE_PLANNED, "plan", lambda strategy, plan: []),
    OnlinePhase(
        Reached.EXPANDED,
        "expand: mapping table, new columns, sync triggers",
        lambda strategy, plan: strategy.expand(plan),
        Records.WITH_LAST,
        shows=_key_tmp,
        guards=_BEFORE_SWAP,
    ),
    OnlinePhase(
        Reached.BACKFILLED,
        "backfill",
        lambda strategy, plan: strategy.backfill(plan),
        shows=_key_tmp,
        guards=_BEFORE_SWAP,
    ),
    OnlinePhase(
        Reached.PREPARED,
        "prepare: indexes, NOT NULL and foreign keys on the new columns",
        lambda strategy, plan: strategy.prepare(plan),
        check_after=Check.FORWARD,
        repair=lambda strategy, plan: [
            task for task in strategy.backfill(plan) if isinstance(task, Backfill)
        ],
        shows=lambda plan: [*_key_tmp(plan), plan.old_column],
        guards=_BEFORE_SWAP,
    ),
    OnlinePhase(
        Reached.SWAPPED,
        "swap",
        lambda strategy, plan: strategy.swap(plan),
        Records.WITH_LAST,
        check_after=Check.SWAPPED,
        shows=lambda plan: [plan.old_column, *_key_tmp(plan)],
        guards=_BEFORE_SWAP,
    ),
    OnlinePhase(
        Reached.DONE,
        "contract",
        lambda strategy, plan: strategy.contract(plan),
        Records.WITH_LAST,
        check_before=Check.SWAPPED,
        guards=Guard(_parked, "the contract drops those columns with what depends on them"),
    ),
)

_GOALS: dict[str, Reached] = {
    "prepare": Reached.PREPARED,
    "swap": Reached.SWAPPED,
    "contract": Reached.DONE,
    "all": Reached.DONE,
}

#: Undoing a migration not swapped yet, online: what the expand, backfill and
#: prepare added goes, in short transactions under lock_timeout, retried.
UNDO_BEFORE_SWAP: tuple[OnlinePhase, ...] = (
    OnlinePhase(
        None,
        "undo: what the migration added goes",
        lambda strategy, plan: strategy.abort(plan),
        Records.FORGET,
    ),
)

#: Undoing a swapped (not yet contracted) migration, online: the old columns get
#: their indexes and foreign keys back without blocking writes, then take their
#: names again with the tables locked briefly (and the migration is forgotten).
#: After the swap, undoing it: the UUID columns (under the original names) go.
_AFTER_SWAP = Guard(_named, "undoing the swap drops those columns (the UUID ones)")

UNSWAP = OnlinePhase(
    None,
    "undo: swap back",
    lambda strategy, plan: strategy.unswap(plan),
    Records.FORGET,
    check_before=Check.RESTORABLE,
    marks=Reached.UNSWAPPING,
    guards=_AFTER_SWAP,
)
UNDO_SWAPPED: tuple[OnlinePhase, ...] = (
    OnlinePhase(
        Reached.SWAPPED,
        "undo: indexes and foreign keys back on the old columns",
        lambda strategy, plan: strategy.unprepare(plan),
        Records.NOTHING,
        check_after=Check.RESTORABLE,
        guards=_AFTER_SWAP,
    ),
    UNSWAP,
)


def run_phases(run: OnlineRun, phases: tuple[OnlinePhase, ...], goal: Reached | None) -> None:
    """Run ``phases`` in order up to ``goal`` (``None``: all of them), each check
    resolved before the next phase begins."""
    plan = run.plan
    verified: Check | None = None  # checked by this run, nothing run since

    def record(reached: Reached) -> Callable[[Connection], None]:
        return lambda connection: state.save(connection, plan, Recorded(reached))

    for phase in phases:
        if phase.guards is not None and plan.attached is not None:
            run.transaction(partial(_created_since, run=run, guard=phase.guards), "compare")
        if phase.check_before is not None and phase.check_before is not verified:
            _verify(run, phase.check_before)
        if phase.marks is not None:
            run.transaction(record(phase.marks), "record")
        started = time.monotonic()
        tasks = phase.tasks(run.strategy, plan)
        then: Callable[[Connection], None] | None = None
        if phase.records is Records.WITH_LAST and phase.reaches is not None:
            then = record(phase.reaches)
        elif phase.records is Records.FORGET:
            then = lambda connection: state.forget(connection, plan.table)  # noqa: E731
        run.run_tasks(tasks, then)
        verified = None
        if phase.check_after is not None:
            try:
                _verify(run, phase.check_after)
            except MigrationVerificationError as error:
                if phase.repair is None:
                    raise
                logger.warning("%s: %s; sweeping the tables again", plan.table, error)
                run.run_tasks(phase.repair(run.strategy, plan))
                _verify(run, phase.check_after)
            verified = phase.check_after
        if phase.records is Records.AFTER and phase.reaches is not None:
            run.transaction(record(phase.reaches), "record")
        logger.info("%s: %s done (%.1f s)", plan.table, phase.does, time.monotonic() - started)
        if goal is not None and phase.reaches is goal:
            return


def _created_since(connection: Connection, *, run: OnlineRun, guard: Guard) -> None:
    """Refuse what the application created on ``guard``'s columns since the plan
    (an index on a child's reference between the prepare and the swap, a view,
    a generated column, a new child table's foreign key...)."""
    plan = run.plan
    columns = guard.columns(plan)
    if not columns:
        return
    known = set(plan.attached or ())
    new: list[str] = []
    for table, names in sorted(columns.items()):
        on = " or ".join(f"{table}.{c}" for c in sorted(names))
        found = run.strategy.attached(connection, plan, {table: names})
        new += [f"{described} (on {on})" for described in sorted(found - known)]
    if new:
        them = "it" if len(new) == 1 else "them"
        raise MigrationRefusedError(
            f"cannot continue the online migration of {plan.table}: {'; '.join(new)}"
            f" {'was' if len(new) == 1 else 'were'} created after it was planned, and"
            f" {guard.fate}; drop {them} and create {them} again after the contract (on the"
            " UUID columns), or undo the migration (restore_pk_from_uuid7) and run it again"
            f" (its new plan carries {them}); nothing was changed"
        )


def online_strategy(backend: MigrationBackend) -> OnlineStrategy:
    """The backend's online strategy, or a refusal naming the database."""
    strategy = backend.online
    if strategy is None:
        label = backend.database.label if backend.database is not None else "this database"
        raise MigrationRefusedError(
            f"cannot migrate online on {label}: the online mode needs PostgreSQL or MariaDB"
            + (
                " (SQLite lets one writer in at a time: use the offline mode)"
                if label == "SQLite"
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


def migrate(
    connection: Connection,
    backend: MigrationBackend,
    table: str,
    options: PkMigrationOptions,
    phase: Phase = "all",
    *,
    dry_run: bool = False,
) -> PkMigrationPlan:
    """Run ``phase`` of the online migration of ``table`` (see the module docstring)."""
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
    strategy = online_strategy(backend)
    session = Session(connection, strategy)
    with session.exclusive(table):
        return _migrate(session, backend, table, options, phase, dry_run=dry_run)


def _migrate(
    session: Session,
    backend: MigrationBackend,
    table: str,
    options: PkMigrationOptions,
    phase: Phase,
    *,
    dry_run: bool,
) -> PkMigrationPlan:
    strategy = online_strategy(backend)
    with session.connect() as conn:
        recorded = state.load(conn, table)
        if recorded is None:
            if phase == "contract":
                raise refuse(f"{table} has no online migration to contract", table)
            plan = make_online_plan(conn, backend, table, options)
            plan.attached = sorted(strategy.attached(conn, plan, _named(plan)))
            reached = None
        else:
            step, plan = recorded
            if step.phase is Reached.DONE:
                logger.info("%s.%s is already migrated to UUIDv7: skipped", table, plan.column)
                return plan
            if not step.phase.online:
                raise refuse(f"{table} has an offline migration in progress ({step})", table)
            if step.phase is Reached.UNSWAPPING:
                raise refuse(
                    f"the undo of {table}'s swap was stopped half-way: run"
                    " restore_pk_from_uuid7 again to finish it, then migrate",
                    table,
                )
            check_recorded(conn, backend, plan, step.phase)
            resumed_options(plan, options)
            reached = step.phase
            logger.info("%s: continuing the online migration after %s", table, step)
    if dry_run:
        return plan
    if phase == "contract" and (reached is None or not Recorded(reached).after(Reached.SWAPPED)):
        raise refuse(
            f"{table} is not swapped yet (at {reached.value if reached else 'start'}):"
            " run the swap first"
        )
    todo = UP if reached is None else UP[1 + [p.reaches for p in UP].index(reached) :]
    run_phases(OnlineRun(session, plan, backend), todo, _GOALS[phase])
    return plan


def make_online_plan(
    connection: Connection, backend: MigrationBackend, table: str, options: PkMigrationOptions
) -> PkMigrationPlan:
    """The plan of an online migration of ``table``: the planner's blockers and the
    online mode's own are refused together, in one message naming them all."""
    strategy = online_strategy(backend)
    plan, blockers = plan_and_blockers(connection, backend, table, options)
    if plan is not None:
        blockers.extend(strategy.refusals(connection, plan) + _shared_indexes(connection, plan))
    blockers.raise_if_any(table)
    assert plan is not None  # (no blockers: assembled)
    return plan


def _shared_indexes(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """An index spanning a reference of this migration and a column another online
    migration in progress converts: each migration rebuilds its own copy over the
    other's column as it is named then, and after both swaps one of them would
    sit on the other's parked old column (and go with it at its contract)."""
    problems = []
    for other, (step, other_plan) in state.recorded_plans(connection).items():
        if other == plan.table or not step.phase.online:
            continue
        converted = {(t, c) for t, c in other_plan.targets()}
        for _, dep in rebuilt(plan):
            shared = [c for c in dep.columns if (dep.table, c) in converted]
            if shared:
                problems.append(
                    f"index {dep.name} on {dep.table} spans {', '.join(shared)}, which the"
                    f" online migration of {other} (at {step}) converts too: two online"
                    " migrations cannot each rebuild it; contract that one first"
                    f" (phase='contract'), or migrate {plan.table} offline"
                )
    return problems


def check_recorded(
    connection: Connection,
    backend: MigrationBackend,
    plan: PkMigrationPlan,
    reached: Reached,
    undoing: bool = False,
) -> None:
    """The migrated table must still show the phase the state table records: a
    table dropped and created again (a test database reset without the state
    table) would otherwise be taken for the migrated one -- "continued" by
    doing nothing, or swapped back by renaming columns it never had.

    ``undoing``: an undo before the swap asks only for the table and its key.
    It removes what the expand added one statement at a time where DDL commits
    on its own (MariaDB), and is recorded as undone only at its end: stopped
    after the parent's new column or the mapping went, it must still run again
    (every one of its statements is built from what is left)."""
    phase = next((p for p in UP if p.reaches is reached), None)
    if phase is None or phase.shows is None:
        return
    before_swap = undoing and reached is not Reached.SWAPPED
    either = phase.shows(plan)
    inspector = inspect(connection)
    key_there = False
    if not inspector.has_table(plan.table):
        missing = [f"the table {plan.table}"]
    else:
        columns = backend.reflect.columns(connection, inspector, plan.table)
        key_there = plan.column in columns
        missing = [] if key_there else [f"{plan.table}.{plan.column}"]
        if not before_swap and not any(c in columns for c in either):
            missing.append(" or ".join(f"{plan.table}.{c}" for c in either))
    # (An undo of the swap drops the mapping before it ends: not asked for then.)
    if (
        reached is not Reached.SWAPPED
        and not before_swap
        and not inspector.has_table(plan.mapping_table)
    ):
        missing.append(f"the mapping table {plan.mapping_table}")
    if missing:
        stopped_undo = (
            "; or an undo (restore_pk_from_uuid7) was stopped half-way: run it again to finish"
            if reached is not Reached.SWAPPED and key_there
            else ""
        )
        raise refuse(
            f"the state table records its online migration at {reached.value}, but"
            f" {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing: the"
            " tables were changed outside the migration (dropped and created again?); if so,"
            f" delete the row of {plan.table!r} from {state.STATE_TABLE} to start over"
            + stopped_undo,
            plan.table,
        )


#: What to do about rows a failed check names.
_WAY_OUT = {
    Check.FORWARD: "run the migration again (it sweeps the tables again before the check),"
    " or undo it with restore_pk_from_uuid7",
    Check.SWAPPED: "nothing was contracted: correct those rows' new values (their old"
    " columns still hold the references) and run the contract again, or undo the"
    " migration with restore_pk_from_uuid7",
    Check.RESTORABLE: "the swap was not undone: give those rows their old values, or"
    " contract the migration and restore it offline",
}


def _verify(run: OnlineRun, check: Check) -> None:
    def problems(connection: Connection) -> list[str]:
        keys = {}
        inspector = inspect(connection)
        # (A partition's or an inheriting table's own reference is checked
        # through its tree's topmost table, whose column it is.)
        for _, ref in references(run.plan):
            _, pk = run.backend.reflect.primary_key(connection, inspector, ref.table)
            keys[ref.table] = pk[0]
        return verify(connection, run.plan, check, keys)

    found = run.transaction(problems, "verify")
    if found:
        raise MigrationVerificationError(
            f"{run.plan.table}: online migration check failed ({check.value}):"
            f" {'; '.join(found)}; nothing after the check ran -- {_WAY_OUT[check]}"
        )


def undo(
    connection: Connection,
    backend: MigrationBackend,
    plan: PkMigrationPlan,
    reached: Reached,
    *,
    ours: bool,
) -> PkMigrationPlan:
    """Undo an online migration not contracted yet: after the swap online
    (:data:`UNDO_SWAPPED`), before it in the caller's transaction. ``ours``:
    the transaction open on ``connection`` is only the state's read (ended
    before the online steps, which wait for no transaction)."""
    strategy = online_strategy(backend)
    check_recorded(connection, backend, plan, reached, undoing=True)
    half_swapped = reached is Reached.PREPARED and strategy.swap_began(connection, plan)
    if ours:
        connection.rollback()
    session = Session(connection, strategy)
    with session.exclusive(plan.table):
        run = OnlineRun(session, plan, backend)
        if half_swapped:
            # A swap killed half-way (MariaDB commits each statement): its
            # statements are built from what is done, so it is finished first,
            # then undone like any swap.
            logger.info("%s: the swap was stopped half-way; finishing it to undo it", plan.table)
            run_phases(run, tuple(p for p in UP if p.reaches is Reached.SWAPPED), None)
            reached = Reached.SWAPPED
        if reached is Reached.UNSWAPPING:
            # Its statements too are built from what is done; the steps and
            # the check before it were passed when it began.
            logger.info("%s: the undo was stopped half-way; finishing it", plan.table)
            undo: tuple[OnlinePhase, ...] = (replace(UNSWAP, check_before=None, marks=None),)
        elif reached is Reached.SWAPPED:
            undo = UNDO_SWAPPED
        else:
            undo = UNDO_BEFORE_SWAP
        run_phases(run, undo, None)
    return plan
