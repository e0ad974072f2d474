"""Carry out a planned key migration (upgrade) or undo it (downgrade).

The runner does what every database shares -- the state row, the mapping
table (old key -> new UUIDv7), the new key's server function, the final
checks -- and hands the column changes to the database's
:class:`~sqla_ids.migration.strategies.Strategy`. Every run ends with checks
(row counts, no orphans) and stops with
:class:`~sqla_ids.errors.MigrationVerificationError` on any mismatch -- the
caller's transaction then rolls back (PostgreSQL, SQLite) or the recorded
state lets a re-run continue (MariaDB/MySQL).

Running an upgrade again is safe: a finished migration is skipped (so a
revision that migrated some tables before failing can simply be run again),
and an interrupted one continues from its recorded step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects import for_dialect
from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration import mapping, state, strategies
from sqla_ids.migration.online import (
    Phase,
    abort_online,
    check_recorded,
    migrate_online,
    unswap_online,
)
from sqla_ids.migration.options import PkMigrationOptions, build_options
from sqla_ids.migration.plan import PkMigrationPlan, plan_pk_migration, refuse
from sqla_ids.migration.progress import logger
from sqla_ids.migration.strategies import Fill, count, count_orphans


@contextmanager
def _bounded_transactions(connection: Connection, strategy: strategies.Strategy) -> Iterator[None]:
    """Transactional strategies: one transaction (the caller's, or ours).
    MariaDB/MySQL: autocommit, so every batch and step is durable on its own."""
    if strategy.transactional:
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


def _row_counts(connection: Connection, plan: PkMigrationPlan) -> dict[str, int]:
    return {t: count(connection, t) for t in plan.affected_tables}


def _migrated_tables(connection: Connection) -> list[str]:
    """Tables whose migration is recorded as finished."""
    return sorted(t for t, step in state.steps(connection).items() if step == "done")


def _refused(connection: Connection, error: MigrationRefusedError) -> MigrationRefusedError:
    """The refusal, saying truthfully which tables are migrated already (an earlier
    operation of the same revision on MariaDB, whose DDL is not rolled back)."""
    done = _migrated_tables(connection)
    if not done:
        return error
    return MigrationRefusedError(
        f"{error}. Already migrated to UUIDv7 and left so: {', '.join(done)}; running the"
        " migration again skips them, restore_pk_from_uuid7 undoes them"
    )


def migrate_pk_to_uuid7(
    connection: Connection,
    table: str,
    options: PkMigrationOptions | None = None,
    *,
    dry_run: bool = False,
    phase: Phase = "all",
    **overrides: Any,
) -> PkMigrationPlan:
    """Migrate ``table``'s primary key to UUIDv7.

    ``options`` (a :class:`~sqla_ids.migration.options.PkMigrationOptions`) or
    its fields as keywords say how. Returns the plan; with ``dry_run=True``
    nothing is changed. A finished migration is skipped (logged) and an
    interrupted one (MariaDB/MySQL) continues with its recorded plan.

    ``online=True`` migrates while the application keeps writing (see
    :mod:`sqla_ids.migration.online`); ``phase`` then runs ``"prepare"``,
    ``"swap"`` or ``"contract"`` alone, or ``"all"`` of them.
    """
    opts = build_options(options, overrides)
    if opts.online:
        return migrate_online(connection, table, opts, phase, dry_run=dry_run)
    if phase != "all":
        raise ValueError(f"phase={phase!r} needs online=True (the offline mode has one phase)")
    options, overrides = opts, {}
    strategy = for_dialect(connection.dialect).migration().strategy
    recorded = state.load(connection, table)
    if recorded is not None:
        step, plan = recorded
        if step.startswith("online:"):
            raise MigrationRefusedError(
                f"{table} has an online migration at {step}: pass online=True to continue it"
            )
        if step == "done":
            logger.info("%s.%s is already migrated to UUIDv7: skipped", table, plan.column)
            return plan
        if step.startswith("down"):
            raise MigrationRefusedError(
                f"the downgrade of {table}.{plan.column} was interrupted at step {step};"
                " run restore_pk_from_uuid7 again to finish it first"
            )
        logger.info("%s: continuing interrupted migration at step %s", table, step)
    else:
        step = ""
        strategy.prepare(connection)
        try:
            plan = plan_pk_migration(connection, table, options, **overrides)
        except MigrationRefusedError as error:
            raise _refused(connection, error) from None
    if dry_run:
        return plan
    logger.info("%s", plan.describe())
    with _bounded_transactions(connection, strategy):
        strategy.prepare(connection)
        _upgrade(connection, plan, strategy, step)
    return plan


def migrate_pks_to_uuid7(
    connection: Connection,
    tables: Sequence[str | tuple[str, PkMigrationOptions]],
    *,
    dry_run: bool = False,
    phase: Phase = "all",
) -> list[PkMigrationPlan]:
    """Migrate several tables' keys, in order, after planning all of them first.

    Each entry is a table name or ``(table, options)``. Every table is planned
    before the first change, and the problems of all of them are reported in
    one refusal; tables already migrated are skipped, and one with an
    unfinished (online) migration continues from its record. Each table is
    planned again just before its turn (the earlier ones change what it sees).
    ``phase`` (online entries only) runs that phase of each table's online
    migration: the deploy sequence of docs/migration.md for several tables.
    """
    entries = [(e, None) if isinstance(e, str) else e for e in tables]
    offline = [t for t, o in entries if o is None or not o.online]
    if phase != "all" and offline:
        raise ValueError(
            f"phase={phase!r} needs online=True for every table ({', '.join(offline)} offline)"
        )
    if offline and len(offline) < len(entries):
        raise ValueError(
            "online and offline tables need separate calls (an online migration runs outside"
            f" any transaction, an offline one inside one); offline here: {', '.join(offline)}"
        )
    ours = not connection.in_transaction()
    problems = []
    for table, options in entries:
        if state.load(connection, table) is not None:  # done, or continued from its record
            continue
        try:
            plan_pk_migration(connection, table, options)
        except MigrationRefusedError as error:
            problems.append(str(error))
    if problems:
        raise _refused(connection, MigrationRefusedError(" | ".join(problems)))
    if ours and not offline:  # the planning's reads began it; online steps wait for none
        connection.rollback()
    return [migrate_pk_to_uuid7(connection, t, o, dry_run=dry_run, phase=phase) for t, o in entries]


def _upgrade(
    connection: Connection, plan: PkMigrationPlan, strategy: strategies.Strategy, step: str
) -> None:
    if not step:
        state.save(connection, plan, "planned")
    before = _row_counts(connection, plan)
    if not step.startswith("swap"):
        mapping.fill_mapping(connection, plan, commit=False)
    mapped = count(connection, plan.mapping_table)
    if mapped != before[plan.table]:
        raise MigrationVerificationError(
            f"{plan.table}: mapping table has {mapped} rows for {before[plan.table]} rows"
        )
    _install_new_default(connection, plan)
    strategy.upgrade(connection, plan, step)
    _verify_final(connection, plan, before)
    state.save(connection, plan, "done")


def _install_new_default(connection: Connection, plan: PkMigrationPlan) -> None:
    """Create the shared ``sqla_ids_uuid7()`` the new default calls (idempotent, and
    never dropped: other tables may use it), or say why there is no default."""
    kind = plan.new_default.kind
    if kind == "uuid7_function":
        from sqla_ids.types.server_functions import install_uuid7_function

        install_uuid7_function(connection)
    elif kind == "none" and plan.new_default.reason != "server_default=False":
        logger.warning(
            "%s.%s gets no server default: %s",
            plan.table,
            plan.column,
            plan.new_default.reason,
        )


def _verify_final(
    connection: Connection, plan: PkMigrationPlan, before: dict[str, int] | None
) -> None:
    """Row counts unchanged, no orphaned reference."""
    if before is not None:
        after = _row_counts(connection, plan)
        lost = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
        if lost:
            raise MigrationVerificationError(f"row counts changed (before, after): {lost}")
    for ref in plan.references:
        orphans = count_orphans(connection, plan.table, plan.column, ref.table, ref.column)
        if orphans:
            raise MigrationVerificationError(
                f"{ref.table}.{ref.column}: {orphans} references have no {plan.table} row"
            )


def restore_pk_from_uuid7(connection: Connection, table: str) -> PkMigrationPlan:
    """Undo :func:`migrate_pk_to_uuid7`: the old keys, columns, constraints and default
    come back; rows created since get fresh old-style keys (integer keys only).

    The old keys come from ``<key>_old``, or from the mapping table when that
    column was dropped; with neither, nothing is changed and the error says so.
    """
    dialect = for_dialect(connection.dialect).migration()
    strategy = dialect.strategy
    ours = not connection.in_transaction()
    recorded = state.load(connection, table)
    if recorded is None:
        raise MigrationRefusedError(f"no recorded UUIDv7 migration of {table!r} to undo")
    step, plan = recorded
    if step.startswith("online:"):
        if step == "online:swapped":
            check_recorded(connection, plan, step)
            if ours:  # the state read began it: end it, the online steps wait for none
                connection.rollback()
            return unswap_online(connection, plan)
        return abort_online(connection, plan)
    if step != "done" and not step.startswith("down"):
        raise MigrationRefusedError(
            f"the migration of {table!r} is unfinished (step {step}); run migrate_pk_to_uuid7"
            " again to finish it, then undo it"
        )
    if step == "done":
        _check_old_keys(connection, plan)
        _replan_views(connection, plan, dialect)
    strategy.prepare(connection)
    with _bounded_transactions(connection, strategy):
        _downgrade(connection, plan, strategy, step)
    return plan


def _check_old_keys(connection: Connection, plan: PkMigrationPlan) -> None:
    """The old keys must still be somewhere: the old-key column or the mapping table."""
    inspector = sa.inspect(connection)
    has_column = plan.old_column in {c["name"] for c in inspector.get_columns(plan.table)}
    if not has_column and not inspector.has_table(plan.mapping_table):
        raise refuse(
            f"{plan.table}.{plan.old_column} and the mapping table {plan.mapping_table} are"
            " both gone, so the old keys cannot be restored",
            plan.table,
        )


def _replan_views(connection: Connection, plan: PkMigrationPlan, dialect: Any) -> None:
    """The views over the migrated columns as they are now (some may have been created
    or changed since the upgrade): recreated if the upgrade was asked to, else refused."""
    views = dialect.find_views(connection, sa.inspect(connection), plan.affected_columns())
    if views and not plan.recreate_views:
        raise refuse(
            "; ".join(
                f"view {v.name} depends on {v.depends_on}; drop it first and recreate it"
                " after (or migrate with recreate_views=True)"
                for v in views
            )
        )
    plan.views = views


def _restore_old_column(connection: Connection, plan: PkMigrationPlan, dialect: Any) -> None:
    """Put ``<key>_old`` back from the mapping table if it was dropped after the upgrade."""
    if plan.old_column in {c["name"] for c in sa.inspect(connection).get_columns(plan.table)}:
        return
    logger.info(
        "%s.%s is gone: the old keys come from %s", plan.table, plan.old_column, plan.mapping_table
    )
    q = connection.dialect.identifier_preparer.quote
    strategies.execute_sql(
        connection,
        f"ALTER TABLE {q(plan.table)} ADD COLUMN {q(plan.old_column)} {plan.key_type_sql}",
    )
    keep = dialect.preserved_columns(connection, plan.table)
    fills = [Fill(plan.table, plan.column, plan.old_column, keep=keep)]
    strategies.fill(connection, plan, fills, "new_key", "old_key")


def _number_new_rows(connection: Connection, plan: PkMigrationPlan, dialect: Any) -> None:
    """Give rows created after the migration an old-style key, and record it in the mapping."""
    keep = dialect.preserved_columns(connection, plan.table)
    parent = sa.table(
        plan.table, sa.column(plan.column), sa.column(plan.old_column), *map(sa.column, keep)
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
        old = dialect.next_old_key(connection, plan)
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
    connection: Connection, plan: PkMigrationPlan, strategy: strategies.Strategy, step: str
) -> None:
    dialect = for_dialect(connection.dialect).migration()
    before = _row_counts(connection, plan)
    if not step.startswith("down-swap"):
        state.save(connection, plan, "down")
        with strategy.quiet(connection, plan):
            _restore_old_column(connection, plan, dialect)
            _number_new_rows(connection, plan, dialect)
    strategy.downgrade(connection, plan, step)
    _verify_final(connection, plan, before)
    mapping.mapping_table(plan).drop(connection, checkfirst=True)
    state.forget(connection, plan.table)
