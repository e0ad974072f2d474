"""Carry out a planned key migration (upgrade) or undo it (downgrade).

PostgreSQL and MariaDB/MySQL: the mapping table is filled, new columns are
added and filled through it in batches, the result is checked, then the
columns are swapped in and constraints recreated. SQLite: the affected tables
are rebuilt from the mapping table. Every run ends with checks (row counts,
no orphans, every relationship present under the new keys) and stops with
:class:`~sqla_ids.errors.MigrationVerificationError` on any mismatch -- the
caller's transaction then rolls back (PostgreSQL, SQLite) or the recorded
state lets a re-run continue (MariaDB/MySQL).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration import keys, state
from sqla_ids.migration.dialects import for_dialect
from sqla_ids.migration.plan import (
    NEW_SUFFIX,
    RESTORE_SUFFIX,
    PkMigrationPlan,
    plan_pk_migration,
    refuse,
)
from sqla_ids.migration.progress import Progress, logger


@contextmanager
def _bounded_transactions(connection: Connection, dialect: ModuleType) -> Iterator[None]:
    """Transactional dialects: one transaction (the caller's, or ours).
    MariaDB/MySQL: autocommit, so every batch and step is durable on its own."""
    if dialect.TRANSACTIONAL:
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


def _count(connection: Connection, table: str | sa.TableClause, *where: Any) -> int:
    source = sa.table(table) if isinstance(table, str) else table
    query = sa.select(sa.func.count()).select_from(source)
    if where:
        query = query.where(*where)
    return int(connection.execute(query).scalar_one())


def _row_counts(connection: Connection, plan: PkMigrationPlan) -> dict[str, int]:
    return {t: _count(connection, t) for t in plan.affected_tables}


def migrate_pk_to_uuid7(
    connection: Connection, table: str, *, dry_run: bool = False, **options: Any
) -> PkMigrationPlan:
    """Migrate ``table``'s primary key to UUIDv7 (see :func:`plan_pk_migration` for options).

    Returns the plan; with ``dry_run=True`` nothing is changed. A MariaDB/MySQL
    migration interrupted earlier is continued with its recorded plan.
    """
    dialect = for_dialect(connection.dialect.name)
    recorded = state.load(connection, table)
    if recorded is not None:
        step, plan = recorded
        if step == "done":
            raise MigrationRefusedError(f"{table}.{plan.column} was already migrated to UUIDv7")
        if step.startswith("down"):
            raise MigrationRefusedError(
                f"the downgrade of {table}.{plan.column} was interrupted; run it again first"
            )
        logger.info("%s: continuing interrupted migration at step %s", table, step)
    else:
        step = ""
        if dialect.STRATEGY == "rebuild":
            dialect.check_foreign_keys_off(connection)
        plan = plan_pk_migration(connection, table, **options)
    if dry_run:
        return plan
    logger.info("%s", plan.describe())
    with _bounded_transactions(connection, dialect):
        if dialect.STRATEGY == "rebuild":
            dialect.check_foreign_keys_off(connection)
        _upgrade(connection, plan, dialect, step)
    return plan


def _upgrade(connection: Connection, plan: PkMigrationPlan, dialect: ModuleType, step: str) -> None:
    if not step:
        state.save(connection, plan, "planned")
    before = _row_counts(connection, plan)
    if not step.startswith("swap"):
        keys.fill_mapping(connection, plan, commit=False)
    if _count(connection, plan.mapping_table) != before[plan.table]:
        raise MigrationVerificationError(
            f"{plan.table}: mapping table has {_count(connection, plan.mapping_table)} rows"
            f" for {before[plan.table]} rows"
        )
    _install_new_default(connection, plan)
    if dialect.STRATEGY == "rebuild":
        _with_views(connection, plan, lambda: dialect.rebuild(connection, plan, "upgrade"))
    else:
        if not step.startswith("swap"):
            _fill_new_columns(connection, plan, dialect)
            _verify_filled(connection, plan, NEW_SUFFIX, "new_key", "old_key")
            state.save(connection, plan, "swap:0")
            step = "swap:0"
        _run_swap(connection, plan, _view_steps(plan, dialect.upgrade_swap(connection, plan)), step)
    _verify_final(connection, plan, before)
    state.save(connection, plan, "done")


def _install_new_default(connection: Connection, plan: PkMigrationPlan) -> None:
    """Create the shared ``sqla_ids_uuid7()`` the new default calls (idempotent, and
    never dropped: other tables may use it), or say why there is no default."""
    kind = plan.new_default.get("kind")
    if kind == "uuid7_function":
        from sqla_ids.types.server_functions import install_uuid7_function

        install_uuid7_function(connection)
    elif kind == "none" and plan.new_default.get("reason") != "server_default=False":
        logger.warning(
            "%s.%s gets no server default: %s",
            plan.table,
            plan.column,
            plan.new_default.get("reason"),
        )


def _view_steps(plan: PkMigrationPlan, steps: list[Any]) -> list[Any]:
    """The swap steps between dropping the dependent views (those built on others
    first) and recreating them from their recorded definitions."""
    drops = [("", None, v.drop_sql) for v in reversed(plan.views)]
    creates = [("", None, sql) for v in plan.views for sql in [v.create_sql, *v.after_sql]]
    return drops + list(steps) + creates


def _with_views(connection: Connection, plan: PkMigrationPlan, work: Any) -> None:
    """Run ``work()`` (a table rebuild) with the dependent views dropped meanwhile."""
    for view in reversed(plan.views):
        execute_sql(connection, view.drop_sql)
    work()
    for view in plan.views:
        for sql in [view.create_sql, *view.after_sql]:
            execute_sql(connection, sql)


def _add_column(connection: Connection, table: str, column: str, type_sql: str) -> None:
    q = connection.dialect.identifier_preparer.quote
    connection.exec_driver_sql(
        f"ALTER TABLE {q(table)} ADD COLUMN IF NOT EXISTS {q(column)} {type_sql}"
    )


def _targets(plan: PkMigrationPlan, suffix: str) -> list[tuple[str, str, str]]:
    """(table, source column, target column) for every column to fill."""
    first = [(plan.table, plan.column, plan.column + NEW_SUFFIX)] if suffix == NEW_SUFFIX else []
    return first + [(r.table, r.column, r.column + suffix) for r in plan.references]


def _fill(
    connection: Connection,
    plan: PkMigrationPlan,
    suffix: str,
    source_key: str,
    target_key: str,
) -> None:
    """Set every target column through the mapping table, one key range at a time."""
    mapping = keys.mapping_table(plan)
    for table, source, target in _targets(plan, suffix):
        t = sa.table(table, sa.column(source), sa.column(target))
        progress = Progress(f"{table}.{target}", _count(connection, table))
        for after, up_to in keys.key_ranges(connection, plan, source_key):
            key = mapping.c[source_key]
            where = [key == t.c[source], t.c[source] <= up_to]
            if after is not None:
                where.append(t.c[source] > after)
            done = connection.execute(
                sa.update(t).values({target: mapping.c[target_key]}).where(*where)
            ).rowcount
            progress.advance(done)


def _fill_new_columns(connection: Connection, plan: PkMigrationPlan, dialect: ModuleType) -> None:
    uuid_sql = str(keys.uuid_type().compile(dialect=connection.dialect))
    for table, _source, target in _targets(plan, NEW_SUFFIX):
        _add_column(connection, table, target, uuid_sql)
    _fill(connection, plan, NEW_SUFFIX, "old_key", "new_key")


def _verify_filled(
    connection: Connection, plan: PkMigrationPlan, suffix: str, target_key: str, source_key: str
) -> None:
    """Every non-null source has its target, equal to the mapping's value for it."""
    mapping = keys.mapping_table(plan)
    for table, source, target in _targets(plan, suffix):
        t = sa.table(table, sa.column(source), sa.column(target))
        expected = _count(connection, t, t.c[source].is_not(None))
        matched = connection.execute(
            sa.select(sa.func.count())
            .select_from(t)
            .join(
                mapping,
                sa.and_(mapping.c[source_key] == t.c[source], mapping.c[target_key] == t.c[target]),
            )
        ).scalar_one()
        if matched != expected:
            raise MigrationVerificationError(
                f"{table}.{source}: {expected - matched} of {expected} values have no"
                f" matching {target}; stopped before changing any key"
            )


def _run_swap(connection: Connection, plan: PkMigrationPlan, steps: list[Any], step: str) -> None:
    """Run the swap statements, recording progress so a re-run skips what was done."""
    start = int(step.split(":")[1]) if ":" in step else 0
    prefix = step.split(":")[0] if ":" in step else "swap"
    for index, item in enumerate(steps):
        table, marker, sql = item if isinstance(item, tuple) else ("", None, item)
        if index < start:
            continue
        if marker is not None and marker not in {
            c["name"] for c in sa.inspect(connection).get_columns(table)
        }:
            pass  # already applied by an interrupted run (its temporary column is gone)
        else:
            execute_sql(connection, sql)
        if not dialect_is_transactional(connection):
            state.save(connection, plan, f"{prefix}:{index + 1}")


def execute_sql(connection: Connection, sql: str) -> None:
    """Run a complete SQL statement (no parameters); ``%`` in it (``LIKE 'a%'`` in a
    recreated index definition) is escaped for drivers with ``format`` paramstyle."""
    if connection.dialect.paramstyle in ("format", "pyformat"):
        sql = sql.replace("%", "%%")
    connection.exec_driver_sql(sql)


def dialect_is_transactional(connection: Connection) -> bool:
    """True where DDL is transactional, so no per-step state is needed."""
    return bool(for_dialect(connection.dialect.name).TRANSACTIONAL)


def _verify_final(
    connection: Connection, plan: PkMigrationPlan, before: dict[str, int] | None
) -> None:
    """Row counts unchanged, no orphaned reference, each key unique and not null."""
    if before is not None:
        after = _row_counts(connection, plan)
        lost = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
        if lost:
            raise MigrationVerificationError(f"row counts changed (before, after): {lost}")
    parent = sa.table(plan.table, sa.column(plan.column))
    for ref in plan.references:
        child = sa.table(ref.table, sa.column(ref.column))
        alias = parent.alias("p")
        orphans = connection.execute(
            sa.select(sa.func.count())
            .select_from(child)
            .where(
                child.c[ref.column].is_not(None),
                ~sa.exists().where(alias.c[plan.column] == child.c[ref.column]),
            )
        ).scalar_one()
        if orphans:
            raise MigrationVerificationError(
                f"{ref.table}.{ref.column}: {orphans} references have no {plan.table} row"
            )


def restore_pk_from_uuid7(connection: Connection, table: str) -> PkMigrationPlan:
    """Undo :func:`migrate_pk_to_uuid7`: the old keys, columns, constraints and default
    come back; rows created since get fresh old-style keys (integer keys only)."""
    dialect = for_dialect(connection.dialect.name)
    recorded = state.load(connection, table)
    if recorded is None:
        raise MigrationRefusedError(f"no recorded UUIDv7 migration of {table!r} to undo")
    step, plan = recorded
    if step != "done" and not step.startswith("down"):
        raise MigrationRefusedError(
            f"the migration of {table!r} is unfinished (step {step}); run it again first"
        )
    if step == "done":
        _replan_views(connection, plan, dialect)
    if dialect.STRATEGY == "rebuild":
        dialect.check_foreign_keys_off(connection)
    with _bounded_transactions(connection, dialect):
        _downgrade(connection, plan, dialect, step)
    return plan


def _replan_views(connection: Connection, plan: PkMigrationPlan, dialect: ModuleType) -> None:
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


def _number_new_rows(connection: Connection, plan: PkMigrationPlan, dialect: ModuleType) -> None:
    """Give rows created after the migration an old-style key, and record it in the mapping."""
    parent = sa.table(plan.table, sa.column(plan.column), sa.column(plan.old_column))
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
    mapping = keys.mapping_table(plan)
    next_sql = dialect.next_old_keys_sql(plan)
    top = connection.execute(sa.select(sa.func.max(parent.c[plan.old_column]))).scalar() or 0
    for offset, new_key in enumerate(missing, start=1):
        if next_sql:
            old = connection.execute(sa.text(f"SELECT {next_sql}")).scalar_one()
        else:
            old = top + offset
        connection.execute(
            sa.update(parent).where(parent.c[plan.column] == new_key).values({plan.old_column: old})
        )
        connection.execute(sa.insert(mapping).values(old_key=old, new_key=new_key))


def _downgrade(
    connection: Connection, plan: PkMigrationPlan, dialect: ModuleType, step: str
) -> None:
    before = _row_counts(connection, plan)
    if not step.startswith("down-swap"):
        state.save(connection, plan, "down")
        _number_new_rows(connection, plan, dialect)
        if dialect.STRATEGY == "rebuild":
            _with_views(connection, plan, lambda: dialect.rebuild(connection, plan, "downgrade"))
        else:
            for table, _source, target in _targets(plan, RESTORE_SUFFIX):
                ref = next(
                    r
                    for r in plan.references
                    if r.table == table and r.column + RESTORE_SUFFIX == target
                )
                _add_column(connection, table, target, ref.type_sql)
            _fill(connection, plan, RESTORE_SUFFIX, "new_key", "old_key")
            _verify_filled(connection, plan, RESTORE_SUFFIX, "old_key", "new_key")
            step = "down-swap:0"
            state.save(connection, plan, step)
    if dialect.STRATEGY != "rebuild":
        _run_swap(
            connection, plan, _view_steps(plan, dialect.downgrade_swap(connection, plan)), step
        )
    _verify_final(connection, plan, before)
    keys.mapping_table(plan).drop(connection, checkfirst=True)
    state.forget(connection, plan.table)
