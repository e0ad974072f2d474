"""The offline key migration: writers paused, one run (upgrade) or its undo (downgrade).

The runner does what every database shares -- the state row, the mapping
table (old key -> new UUIDv7), the new key's server function, the final
checks -- and hands the column changes to the backend's
:class:`~sqla_ids.migration.backends.base.Strategy`. Every run ends with
checks (row counts, no orphans) and stops with
:class:`~sqla_ids.errors.MigrationVerificationError` on any mismatch -- the
caller's transaction then rolls back (PostgreSQL, SQLite) or the recorded
state lets a re-run continue (MariaDB/MySQL, whose DDL commits on its own).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import execute_sql, quoter
from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration.backends.base import MigrationBackend, Proven, Strategy
from sqla_ids.migration.core import mapping, state
from sqla_ids.migration.core.fill import Fill, fill
from sqla_ids.migration.core.model import Blockers, PkMigrationPlan
from sqla_ids.migration.core.options import PkMigrationOptions
from sqla_ids.migration.core.phases import Reached, Recorded
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.core.reflected import drop_table, inspect
from sqla_ids.migration.core.sql import count, examples, orphans
from sqla_ids.migration.plan import make_plan, resumed_options
from sqla_ids.types.server_functions import install_uuid7_function


@contextmanager
def bounded_transactions(connection: Connection, transactional: bool) -> Iterator[None]:
    """``transactional`` runs (PostgreSQL and SQLite offline): one transaction (the
    caller's, or ours). The others (MariaDB/MySQL, online steps): autocommit, so
    every batch and step is durable on its own."""
    if transactional:
        if connection.in_transaction():
            yield
        else:
            with connection.begin():
                yield
        return
    if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        yield  # e.g. inside Alembic's autocommit_block()
        return
    level = connection.get_isolation_level()
    if connection.in_transaction():
        connection.commit()
    connection.execution_options(isolation_level="AUTOCOMMIT")
    try:
        yield
    finally:
        if connection.in_transaction():
            connection.commit()  # nothing pending: every statement autocommitted
        connection.execution_options(isolation_level=level)


def refuse_transaction_block(
    connection: Connection, transactional: bool, table: str, action: str
) -> None:
    """Refuse a non-transactional run (MariaDB/MySQL) inside the caller's ``with
    engine.begin()`` / ``with connection.begin()`` block, before anything changes.

    The server commits the caller's transaction at the first ``ALTER TABLE``, and
    the run must commit each step to record it; SQLAlchemy then fails the next
    statement with "Can't operate on closed transaction inside context manager",
    half-way. SQLAlchemy has no public flag for "inside a ``begin()`` block": the
    connection's ``_trans_context_manager`` is what its own check reads (typed in
    its source, set only by such a block: not by autobegin, nor by Alembic's
    transaction, which it does not enter). In an autocommit block there is no
    transaction to commit, so that passes."""
    if transactional:
        return
    if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        return
    if connection._trans_context_manager is None:
        return
    raise MigrationRefusedError(
        f"cannot run {action} of {table!r} inside a transaction block (engine.begin() or"
        f" connection.begin()): MariaDB/MySQL commits the transaction at the first"
        " ALTER TABLE, and SQLAlchemy then fails every later statement of the block with"
        ' "closed transaction"; pass a connection from engine.connect() instead (each step'
        " commits and is recorded, so an interrupted run continues where it stopped), or in"
        " Alembic use op.migrate_pk_to_uuid7 / op.restore_pk_from_uuid7, which run in an"
        " autocommit block; nothing was changed"
    )


def migrated_tables(connection: Connection) -> list[str]:
    """Tables whose migration is recorded as finished."""
    return sorted(t for t, step in state.recorded(connection).items() if step.phase is Reached.DONE)


def refused(connection: Connection, error: MigrationRefusedError) -> MigrationRefusedError:
    """The refusal, saying truthfully which tables are migrated already (an earlier
    operation of the same revision on MariaDB, whose DDL is not rolled back)."""
    done = migrated_tables(connection)
    if not done:
        return error
    return MigrationRefusedError(
        f"{error}. Already migrated to UUIDv7 and left so: {', '.join(done)}; running the"
        " migration again skips them, restore_pk_from_uuid7 undoes them"
    )


def migrate(
    connection: Connection,
    backend: MigrationBackend,
    table: str,
    options: PkMigrationOptions,
    *,
    dry_run: bool = False,
) -> PkMigrationPlan:
    """Migrate ``table``'s key offline (see :func:`sqla_ids.migration.migrate_pk_to_uuid7`)."""
    strategy = backend.strategy
    refuse_transaction_block(connection, strategy.transactional, table, "the key migration")
    # Before anything reads: SQLite's foreign-key pragma has no effect in a transaction.
    strategy.prepare(connection)
    recorded = state.load(connection, table)
    if recorded is None:
        resumed = Recorded(Reached.PLANNED)
        try:
            plan = make_plan(connection, backend, table, options)
        except MigrationRefusedError as error:
            raise refused(connection, error) from None
        fresh = True
    else:
        resumed, plan = recorded
        if resumed.phase.online:
            raise MigrationRefusedError(
                f"{table} has an online migration at {resumed}: pass online=True to continue it"
            )
        if resumed.phase is Reached.DONE:
            logger.info("%s.%s is already migrated to UUIDv7: skipped", table, plan.column)
            return plan
        if resumed.phase.downgrading:
            raise MigrationRefusedError(
                f"the downgrade of {table}.{plan.column} was interrupted at step {resumed};"
                " run restore_pk_from_uuid7 again to finish it first"
            )
        resumed_options(plan, options)
        logger.info("%s: continuing interrupted migration at step %s", table, resumed)
        fresh = False
    if dry_run:
        return plan
    logger.info("%s", plan.describe())
    with bounded_transactions(connection, strategy.transactional):
        if fresh:
            state.save(connection, plan, resumed)
        _upgrade(connection, plan, strategy, resumed)
    return plan


#: Per affected table: its rows, and the values (not ``NULL``) in each of its
#: converted columns.
Census = dict[str, tuple[int, dict[str, int]]]


def _census(connection: Connection, plan: PkMigrationPlan) -> Census:
    """Rows and values of every affected table, one ``count()`` query each (MariaDB
    answers it from the smallest index holding the columns)."""
    found: Census = {}
    for table in plan.affected_tables:
        columns = plan.columns_of(table)
        t = sa.table(table, *map(sa.column, columns))
        counts = connection.execute(
            sa.select(sa.func.count(), *(sa.func.count(t.c[c]) for c in columns)).select_from(t)
        ).one()
        found[table] = (int(counts[0]), dict(zip(columns, map(int, counts[1:]), strict=True)))
    return found


def stopped(strategy: Strategy, direction: str) -> str:
    """What a failed check left, and what to do next (ends every
    :class:`MigrationVerificationError` of the offline mode)."""
    run = "restore_pk_from_uuid7" if direction == "downgrade" else "migrate_pk_to_uuid7"
    if strategy.transactional:
        return (
            "stopped before anything was kept: the transaction rolls back (yours, or"
            f" Alembic's), so nothing has changed. Fix those rows, stop the application's"
            f" writers (the offline mode needs them stopped) and run {run} again"
        )
    return (
        "stopped; MariaDB/MySQL DDL cannot be rolled back, so the step reached is recorded"
        f" in {state.STATE_TABLE}. Fix those rows, stop the application's writers (the"
        f" offline mode needs them stopped) and run {run} again: it continues from there"
    )


def _upgrade(
    connection: Connection, plan: PkMigrationPlan, strategy: Strategy, resumed: Recorded
) -> None:
    before = _census(connection, plan)
    if resumed.phase is not Reached.SWAPPING:
        strategy.fill_mapping(connection, plan)
    mapped, rows = count(connection, plan.mapping_table), before[plan.table][0]
    if mapped != rows:
        raise MigrationVerificationError(
            f"{plan.table}: the mapping table {plan.mapping_table} has {mapped} rows for"
            f" {rows} rows of {plan.table}{_unmapped(connection, plan)};"
            f" {stopped(strategy, 'upgrade')}"
        )
    _install_new_default(connection, plan)
    proven = strategy.upgrade(connection, plan, resumed)
    _verify_final(connection, plan, before, proven, strategy, "upgrade")
    state.save(connection, plan, Recorded(Reached.DONE))


def _unmapped(connection: Connection, plan: PkMigrationPlan) -> str:
    """The first rows whose key has no mapping row (written during the run, or a
    ``NULL`` key), for the error."""
    pairs = mapping.mapping_table(plan)
    parent = sa.table(plan.table, sa.column(plan.column))
    query = sa.select(parent.c[plan.column]).where(
        ~sa.exists().where(pairs.c.old_key == parent.c[plan.column])
    )
    found = examples(connection, query)
    return f"; rows without a mapping row: {found}" if found else ""


def _install_new_default(connection: Connection, plan: PkMigrationPlan) -> None:
    """Create the shared ``sqla_ids_uuid7()`` the new default calls (idempotent, and
    never dropped: other tables may use it), or say why there is no default."""
    kind = plan.new_default.kind
    if kind == "uuid7_function":
        install_uuid7_function(connection)
    elif kind == "none" and plan.new_default.reason != "server_default=False":
        logger.warning(
            "%s.%s gets no server default: %s",
            plan.table,
            plan.column,
            plan.new_default.reason,
        )


def _verify_final(
    connection: Connection,
    plan: PkMigrationPlan,
    before: Census,
    proven: Proven,
    strategy: Strategy,
    direction: str,
) -> None:
    """Row counts unchanged; every converted column holds as many values as before
    (a value with no row in the mapping would have become ``NULL``); no orphaned
    reference (those in ``proven`` were checked by the strategy while it ran).
    Each error names the rows (the first few, and how many) and the way out."""
    after = _census(connection, plan)
    lost = {t: (before[t][0], after[t][0]) for t in before if before[t][0] != after[t][0]}
    if lost:
        counts = ", ".join(f"{t}: {b} rows before, {a} after" for t, (b, a) in lost.items())
        raise MigrationVerificationError(
            f"row counts changed during the run ({counts}): something wrote to the tables"
            f" meanwhile; {stopped(strategy, direction)}"
        )
    for table, (_rows, values) in before.items():
        for column, n in values.items():
            if after[table][1][column] != n:
                raise MigrationVerificationError(
                    f"{table}.{column}: {n} values before, {after[table][1][column]} after"
                    f" (values without a row in {plan.mapping_table} became NULL); rows where"
                    f" it is NULL now: {_null_rows(connection, plan, table, column, direction)};"
                    f" {stopped(strategy, direction)}"
                )
    for ref in plan.references:
        if (ref.table, ref.column) in proven:
            continue
        named = [c for c in _row_key(connection, ref.table) if c != ref.column]
        found, first = orphans(connection, plan.table, plan.column, ref.table, ref.column, *named)
        if found:
            raise MigrationVerificationError(
                f"{ref.table}.{ref.column}: {found} references have no {plan.table} row"
                f" (first: {first}); {stopped(strategy, direction)}"
            )


def _row_key(connection: Connection, table: str) -> list[str]:
    """The columns naming a row of ``table`` in an error: its primary key."""
    return list(inspect(connection).get_pk_constraint(table).get("constrained_columns") or [])


def _null_rows(
    connection: Connection, plan: PkMigrationPlan, table: str, column: str, direction: str
) -> str:
    """How many rows have ``NULL`` in ``column``, and the first few by their key (the
    migrated table's rows by their old key)."""
    key = [c for c in _row_key(connection, table) if c != column]
    if not key and table == plan.table and direction == "upgrade":
        key = [plan.old_column]
    if not key:
        return "(no primary key to name them by)"
    t = sa.table(table, *map(sa.column, [*key, column]))
    query = sa.select(*(t.c[c] for c in key)).where(t.c[column].is_(None))
    total = count(connection, t, t.c[column].is_(None))
    return f"{total}, first {examples(connection, query)}"


def restore(
    connection: Connection, backend: MigrationBackend, plan: PkMigrationPlan, resumed: Recorded
) -> PkMigrationPlan:
    """Undo a finished (or half-undone) offline-mode migration: see
    :func:`sqla_ids.migration.restore_pk_from_uuid7`."""
    if resumed.phase is not Reached.DONE and not resumed.phase.downgrading:
        raise MigrationRefusedError(
            f"the migration of {plan.table!r} is unfinished (step {resumed}); run"
            " migrate_pk_to_uuid7 again to finish it, then undo it"
        )
    strategy = backend.strategy
    refuse_transaction_block(connection, strategy.transactional, plan.table, "the key restore")
    strategy.prepare(connection)
    if resumed.phase is Reached.DONE:  # every problem of the undo in one refusal
        blockers = Blockers()
        _check_old_keys(connection, plan, backend, blockers)
        _replan_views(connection, plan, backend, blockers)
        blockers.raise_if_any(plan.table)
        # As they are now (created or changed since the upgrade perhaps): set
        # aside while the restore writes, recorded with the plan at its first step.
        plan.parked_triggers = backend.reflect.update_triggers(connection, plan.affected_columns())
    with bounded_transactions(connection, strategy.transactional):
        _downgrade(connection, plan, backend, resumed)
    return plan


def _has_old_column(
    connection: Connection, plan: PkMigrationPlan, backend: MigrationBackend
) -> bool:
    """Whether ``<key>_old`` is there, read through the backend's reflection (SQLAlchemy's
    MySQL inspector misreads names holding a backtick: it doubles it)."""
    return plan.old_column in backend.reflect.columns(connection, inspect(connection), plan.table)


def _check_old_keys(
    connection: Connection, plan: PkMigrationPlan, backend: MigrationBackend, blockers: Blockers
) -> None:
    """The old keys must still be somewhere: the old-key column or the mapping table."""
    inspector = inspect(connection)
    has_column = _has_old_column(connection, plan, backend)
    if not has_column and not inspector.has_table(plan.mapping_table):
        blockers.add(
            f"{plan.table}.{plan.old_column} and the mapping table {plan.mapping_table} are"
            " both gone, so the old keys cannot be restored"
        )


def _replan_views(
    connection: Connection, plan: PkMigrationPlan, backend: MigrationBackend, blockers: Blockers
) -> None:
    """The views over the migrated columns as they are now (some may have been created
    or changed since the upgrade): recreated if the upgrade was asked to, else refused."""
    affected = plan.affected_columns()
    views = backend.reflect.find_views(connection, inspect(connection), affected, blockers)
    if not plan.recreate_views:
        # (The undo follows the recorded migration's options: the way out is by hand.)
        blockers.extend(
            [
                f"view {v.shown} depends on {v.depends_on}, and the migration was made"
                f" without recreate_views=True; drop it first ({v.drop_sql}) and create it"
                " again after the undo"
                for v in views
            ]
        )
    plan.views = views


def _restore_old_column(
    connection: Connection, plan: PkMigrationPlan, backend: MigrationBackend
) -> None:
    """Put ``<key>_old`` back from the mapping table if it was dropped after the upgrade."""
    if _has_old_column(connection, plan, backend):
        return
    logger.info(
        "%s.%s is gone: the old keys come from %s", plan.table, plan.old_column, plan.mapping_table
    )
    q = quoter(connection.dialect)
    execute_sql(
        connection,
        f"ALTER TABLE {q(plan.table)} ADD COLUMN {q(plan.old_column)} {plan.key_type_sql}",
    )
    keep = backend.reflect.preserved_columns(connection, plan.table)
    fills = [Fill(plan.table, plan.column, plan.old_column, keep=keep)]
    fill(connection, plan, fills, "new_key", "old_key")


# Keys per DELETE ... IN (...) of stale mapping rows.
_DELETE_BATCH = 1000


def _map_new_rows(connection: Connection, plan: PkMigrationPlan) -> None:
    """Rows created after an online migration's contract got an old key from the
    identity or ``AUTO_INCREMENT`` left on ``<key>_old``, and nothing told the
    mapping (its triggers were gone): map them, replacing what the mapping may
    still say of those old keys (a deleted row's)."""
    pairs = mapping.mapping_table(plan)
    # The key typed as the migration made it: its values go into the mapping.
    key = sa.column(plan.column, mapping.new_key_type(plan))
    parent = sa.table(plan.table, key, sa.column(plan.old_column)).alias("p")
    new, old = parent.c[plan.column], parent.c[plan.old_column]
    # Found by a join (the table scanned once, the mapping probed by its key), then
    # deleted by key: MariaDB 10.11 runs a single-table DELETE ... WHERE EXISTS as
    # a scan of the unindexed <key>_old per mapping row -- over 400 s for 100,000
    # rows, where the join takes well under a second.
    stale = (
        connection.execute(
            sa.select(pairs.c.old_key)
            .select_from(pairs.join(parent, old == pairs.c.old_key))
            .where(new != pairs.c.new_key)
        )
        .scalars()
        .all()
    )
    for start in range(0, len(stale), _DELETE_BATCH):
        chunk = stale[start : start + _DELETE_BATCH]
        connection.execute(sa.delete(pairs).where(pairs.c.old_key.in_(chunk)))
    known = pairs.alias("known")
    connection.execute(
        sa.insert(pairs).from_select(
            ["old_key", "new_key"],
            sa.select(old, new).where(old.is_not(None), ~sa.exists().where(known.c.new_key == new)),
        )
    )


def _number_new_rows(
    connection: Connection, plan: PkMigrationPlan, backend: MigrationBackend
) -> None:
    """Give rows created after the migration an old-style key, and record it in the mapping."""
    _map_new_rows(connection, plan)
    keep = backend.reflect.preserved_columns(connection, plan.table)
    parent = sa.table(
        plan.table,
        sa.column(plan.column, mapping.new_key_type(plan)),
        sa.column(plan.old_column),
        *map(sa.column, keep),
    )
    missing = (
        connection.execute(
            sa.select(parent.c[plan.column])
            .where(parent.c[plan.old_column].is_(None))
            .order_by(parent.c[plan.column])
        )
        .scalars()
        .all()
    )
    if not missing:
        return
    if plan.key_kind != "integer":
        raise MigrationRefusedError(
            f"{len(missing)} rows of {plan.table} were created after the migration and have no"
            f" old {plan.key_kind} key; give them one in {plan.old_column} first"
        )
    pairs = mapping.mapping_table(plan)
    top = connection.execute(sa.select(sa.func.max(parent.c[plan.old_column]))).scalar() or 0
    for offset, new_key in enumerate(missing, start=1):
        old = backend.reflect.next_old_key(connection, plan)
        if old is None:
            old = top + offset
        connection.execute(
            sa.update(parent)
            .where(parent.c[plan.column] == new_key)
            .values({plan.old_column: old, **{k: parent.c[k] for k in keep}})
        )
        connection.execute(sa.insert(pairs).values(old_key=old, new_key=new_key))
        plan.default.numbered_up_to = old  # a recreated sequence continues after it


def _downgrade(
    connection: Connection, plan: PkMigrationPlan, backend: MigrationBackend, resumed: Recorded
) -> None:
    strategy = backend.strategy
    before = _census(connection, plan)
    if resumed.phase is not Reached.DOWN_SWAPPING:
        resumed = Recorded(Reached.DOWN)
        state.save(connection, plan, resumed)
        with strategy.quiet(connection, plan):
            _restore_old_column(connection, plan, backend)
            _number_new_rows(connection, plan, backend)
    proven = strategy.downgrade(connection, plan, resumed)
    _verify_final(connection, plan, before, proven, strategy, "downgrade")
    drop_table(connection, mapping.mapping_table(plan))
    state.forget(connection, plan.table)
