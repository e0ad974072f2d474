"""SQLite: the affected tables are rebuilt, with foreign-key enforcement off.

SQLite cannot change a column's type or a primary key in place, so each
affected table is renamed away, recreated under its name and refilled through
the mapping table. Dropping a parent while ``PRAGMA foreign_keys`` is on would
run an implicit ``DELETE`` that fires ``ON DELETE CASCADE`` and empties the
children -- and that pragma cannot be changed inside a transaction -- so the
migration refuses to run with enforcement on in an open transaction, and
checks ``PRAGMA foreign_key_check`` at the end instead. ``legacy_alter_table``
keeps other tables' ``REFERENCES`` pointing at the name, not at the renamed
old table. Downgrade recreates each table from its original ``CREATE`` SQL.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.pool import ConnectionPoolEntry

from sqla_ids.dialects.sql import query_sql, quoter
from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration.backends.base import Proven, Strategy
from sqla_ids.migration.backends.sqlite import create_sql, writes
from sqla_ids.migration.core import sizing
from sqla_ids.migration.core.mapping import new_type_sql
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.phases import Recorded
from sqla_ids.migration.core.progress import Progress
from sqla_ids.migration.core.sql import drop_views, recreate_views

_OLD_PREFIX = "_sqla_ids_old_"


def check_foreign_keys_off(connection: Connection) -> None:
    """Turn FK enforcement off if possible; refuse when it is on inside a transaction."""
    if not query_sql(connection, "PRAGMA foreign_keys").scalar():
        return
    if _driver_in_transaction(connection):
        raise MigrationRefusedError(
            "cannot migrate: SQLite foreign keys are enforced (PRAGMA foreign_keys=ON) and a"
            " transaction is open, where PRAGMA foreign_keys=OFF has no effect; rebuilding"
            " the tables would fire ON DELETE CASCADE. Run PRAGMA foreign_keys=OFF before"
            " the migration's transaction begins (the sqla_ids env template does);"
            " nothing was changed"
        )
    query_sql(connection, "PRAGMA foreign_keys=OFF")
    # The pragma stays with the database connection, and the pool hands that to the
    # application next: enforcement comes back when the connection is returned (after
    # the migration's transaction has ended; inside one the pragma does nothing).
    connection.info[_ENFORCE_AGAIN] = True
    pool = connection.engine.pool
    if not sa.event.contains(pool, "checkin", _enforce_again):
        sa.event.listen(pool, "checkin", _enforce_again)


_ENFORCE_AGAIN = "sqla_ids: PRAGMA foreign_keys=ON at checkin"


def _enforce_again(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
    """Turn foreign-key enforcement back on for a connection the migration turned it
    off for (see :func:`check_foreign_keys_off`)."""
    if dbapi_connection is not None and record.info.pop(_ENFORCE_AGAIN, False):
        dbapi_connection.execute("PRAGMA foreign_keys=ON")


def _table_sql(connection: Connection, table: str) -> str:
    return str(
        connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).scalar_one()
    )


def _new_create_sql(connection: Connection, plan: PkMigrationPlan, table: str) -> str:
    """``CREATE TABLE`` of ``table`` with UUID key/reference columns (and the old-key
    columns): the table's own statement, edited (see :mod:`.create_sql`)."""
    q = quoter(connection.dialect)
    in_key = {
        str(row[1]).lower(): bool(row[5])
        for row in query_sql(connection, f"PRAGMA table_info({q(table)})")
    }
    added = []
    if table == plan.table:
        added.append(f"{q(plan.old_column)} {plan.key_type_sql}".rstrip())
    if plan.keep_child_old_columns:
        added += [
            f"{q(ref.column + '_old')} {ref.type_sql}".rstrip()
            for ref in plan.references
            if ref.table == table
        ]
    return create_sql.upgraded(
        _table_sql(connection, table),
        {c: in_key[c.lower()] for c in plan.columns_of(table)},
        new_type_sql(connection, plan),
        added,
        # AUTOINCREMENT needs an INTEGER key; the restore brings it back.
        drop_autoincrement=table == plan.table,
        default_sql=plan.new_default_sql if table == plan.table else None,
        key=plan.column if table == plan.table else None,
    )


def _restored_create_sql(connection: Connection, plan: PkMigrationPlan, table: str) -> str:
    """The original ``CREATE TABLE``, with the columns added since the upgrade (and
    without those dropped since), as if they had been added to the original table."""
    ours = {plan.old_column.lower()} if table == plan.table else set()
    if plan.keep_child_old_columns:
        ours |= {(r.column + "_old").lower() for r in plan.references if r.table == table}
    return create_sql.restored(
        plan.table_sql[table][0],
        _table_sql(connection, table),
        lambda column: column.lower() in ours,
    )


def _attached_sql(connection: Connection, table: str) -> list[str]:
    """The table's ``CREATE INDEX``/``CREATE TRIGGER`` statements as they are now
    (indexes and triggers created since the upgrade included), indexes first."""
    return list(
        connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger')"
            " AND sql IS NOT NULL ORDER BY type = 'trigger', rowid",
            (table,),
        ).scalars()
    )


def begin(connection: Connection) -> None:
    """Open the database's own transaction if the driver has none yet.

    Python's ``sqlite3`` (in its default, legacy transaction handling) only
    begins a transaction before ``INSERT``/``UPDATE``/``DELETE``: a ``CREATE
    TABLE`` or ``ALTER TABLE`` before the first of those commits at once, and
    a failure later could not take it back (an empty state table, a renamed
    ``_sqla_ids_old_`` table were left behind). ``BEGIN`` here makes the run
    one transaction whatever comes first; the caller's commit or rollback
    (SQLAlchemy's, Alembic's) ends it.
    """
    if not _driver_in_transaction(connection):
        query_sql(connection, "BEGIN")


def _driver_in_transaction(connection: Connection) -> bool:
    driver = connection.connection.driver_connection
    return bool(getattr(driver, "in_transaction", False))


def rebuild(connection: Connection, plan: PkMigrationPlan, direction: str) -> None:
    """Rebuild every affected table in ``direction`` ("upgrade" or "downgrade")."""
    q = quoter(connection.dialect)
    legacy = query_sql(connection, "PRAGMA legacy_alter_table").scalar()
    query_sql(connection, "PRAGMA legacy_alter_table=ON")
    # Rows that referenced nothing already (enforcement was off when they were
    # written) are not the rebuild's doing: only new ones stop it.
    dangling = _dangling(connection)
    try:
        # Every statement is built before the first change.
        creates = {
            t: (
                _new_create_sql(connection, plan, t)
                if direction == "upgrade"
                else _restored_create_sql(connection, plan, t)
            )
            for t in plan.affected_tables
        }
        attached = {
            t: (plan.table_sql[t][1:] if direction == "upgrade" else _attached_sql(connection, t))
            for t in plan.affected_tables
        }
        for t in plan.affected_tables:
            old = _OLD_PREFIX + t
            columns = [r[1] for r in query_sql(connection, f"PRAGMA table_info({q(t)})")]
            query_sql(connection, f"ALTER TABLE {q(t)} RENAME TO {q(old)}")
            query_sql(connection, creates[t])
            targets, sources = _copy_columns(plan, t, columns, direction, q)
            progress = Progress(f"{t}: rebuild", 0)
            copied = query_sql(
                connection,
                f"INSERT INTO {q(t)} ({', '.join(targets)}) SELECT {', '.join(sources)}"
                f" FROM {q(old)} AS o",
            ).rowcount
            progress.total = copied
            progress.advance(copied)
            query_sql(connection, f"DROP TABLE {q(old)}")
            for index_sql in attached[t]:
                query_sql(connection, index_sql)
        if direction == "downgrade" and plan.default.kind == "autoincrement":
            seq = plan.default.counter
            top = query_sql(
                connection, f"SELECT max({q(plan.column)}) FROM {q(plan.table)}"
            ).scalar()
            connection.exec_driver_sql(
                "UPDATE sqlite_sequence SET seq = ? WHERE name = ?",
                (max(seq or 0, top or 0), plan.table),
            )
        _check_foreign_keys(connection, dangling, direction)
    finally:
        query_sql(connection, f"PRAGMA legacy_alter_table={'ON' if legacy else 'OFF'}")


def _dangling(connection: Connection) -> Counter[tuple[str, str]]:
    """``PRAGMA foreign_key_check``'s rows, counted per (table, parent table)."""
    rows = query_sql(connection, "PRAGMA foreign_key_check").all()
    return Counter((str(table), str(parent)) for table, _rowid, parent, _fk in rows)


def _check_foreign_keys(
    connection: Connection, before: Counter[tuple[str, str]], direction: str
) -> None:
    """Every reference the rebuild left has its parent row, apart from those that
    had none before; the error names the new ones (table, rowid) and the way out."""
    rows = query_sql(connection, "PRAGMA foreign_key_check").all()
    new = _dangling(connection) - before
    if not new:
        return
    first = "; ".join(
        f"{table} rowid {rowid} -> {parent}"
        for table, rowid, parent, _fk in rows
        if (table, parent) in new
    )
    lost = sum(new.values())
    raise MigrationVerificationError(
        f"foreign key check failed after the {direction}'s rebuild: {lost} more rows reference"
        f" no parent row than before (among: {first[:500]}); stopped before anything was kept:"
        " the transaction rolls back (yours, or Alembic's), so nothing has changed. Report"
        " it with the tables' CREATE statements; PRAGMA foreign_key_check lists the rows"
    )


def _copy_columns(
    plan: PkMigrationPlan, table: str, columns: list[str], direction: str, q: Any
) -> tuple[list[str], list[str]]:
    """Target and source expressions copying ``table`` through the mapping table."""
    m = q(plan.mapping_table)
    refs = {r.column for r in plan.references if r.table == table}
    targets, sources = [], []
    for c in columns:
        if direction == "upgrade":
            if table == plan.table and c == plan.column:
                targets += [q(c), q(plan.old_column)]
                sources += [f"(SELECT new_key FROM {m} WHERE old_key = o.{q(c)})", f"o.{q(c)}"]
                continue
            if c in refs:
                targets.append(q(c))
                sources.append(f"(SELECT new_key FROM {m} WHERE old_key = o.{q(c)})")
                if plan.keep_child_old_columns:
                    targets.append(q(c + "_old"))
                    sources.append(f"o.{q(c)}")
                continue
        else:
            if table == plan.table and c == plan.old_column:
                continue
            if plan.keep_child_old_columns and c.endswith("_old") and c[:-4] in refs:
                continue
            if table == plan.table and c == plan.column:
                targets.append(q(c))
                sources.append(f"o.{q(plan.old_column)}")
                continue
            if c in refs:
                targets.append(q(c))
                sources.append(f"(SELECT old_key FROM {m} WHERE new_key = o.{q(c)})")
                continue
        targets.append(q(c))
        sources.append(f"o.{q(c)}")
    return targets, sources


class Rebuild(Strategy):
    """Recreate every affected table (see the module docstring)."""

    transactional = True

    @contextmanager
    def quiet(self, connection: Connection, plan: PkMigrationPlan) -> Iterator[None]:
        """The migrated table's triggers dropped while the undo writes its rows
        (old keys back, rows created since numbered: no application update),
        replayed after, in the run's transaction (:func:`.writes.quiet`)."""
        with writes.quiet(connection, plan.table):
            yield

    def prepare(self, connection: Connection) -> None:
        """Foreign-key enforcement off (see :func:`check_foreign_keys_off`), then the
        database's own transaction open (see :func:`begin`)."""
        check_foreign_keys_off(connection)
        begin(connection)

    def upgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Rebuild the tables with UUID columns, the views dropped meanwhile."""
        drop_views(connection, plan)
        rebuild(connection, plan, "upgrade")
        recreate_views(connection, plan)
        return frozenset()  # the final checks prove the references

    def downgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Rebuild the tables from their original SQL, the views dropped meanwhile."""
        drop_views(connection, plan)
        rebuild(connection, plan, "downgrade")
        recreate_views(connection, plan)
        return frozenset()


# --- read-only, for a dry run: the statements Rebuild.upgrade will run ------------------
# Added for the preflight (issue 31): it reads and builds, never executes. It follows
# Rebuild.upgrade and rebuild(); tests/test_migration_preflight.py runs both and
# compares the statements.


def planned_upgrade(connection: Connection, plan: PkMigrationPlan) -> list[sizing.Step]:
    """The statements (and the copies) :meth:`Rebuild.upgrade` will run, in order."""
    q = quoter(connection.dialect)
    steps: list[sizing.Step] = [sizing.Statement(view.drop_sql) for view in reversed(plan.views)]
    creates = {t: _new_create_sql(connection, plan, t) for t in plan.affected_tables}
    for t in plan.affected_tables:
        old = _OLD_PREFIX + t
        columns = [r[1] for r in query_sql(connection, f"PRAGMA table_info({q(t)})")]
        targets, sources = _copy_columns(plan, t, columns, "upgrade", q)
        steps += [
            sizing.Statement(f"ALTER TABLE {q(t)} RENAME TO {q(old)}"),
            sizing.Statement(creates[t]),
            sizing.DataStep(
                f"copy {t} through the mapping",
                sql=f"INSERT INTO {q(t)} ({', '.join(targets)}) SELECT {', '.join(sources)}"
                f" FROM {q(old)} AS o",
            ),
            sizing.Statement(f"DROP TABLE {q(old)}"),
            *(sizing.Statement(index_sql) for index_sql in plan.table_sql[t][1:]),
        ]
    steps += [
        sizing.Statement(sql) for view in plan.views for sql in [view.create_sql, *view.after_sql]
    ]
    return steps
