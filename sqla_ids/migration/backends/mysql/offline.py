"""MariaDB/MySQL: reflection from ``information_schema``; swaps safe to re-run.

DDL commits implicitly here, so the migration is resumable instead of
atomic: every step is recorded in the state table once done, and each table's
swap is a single ``ALTER TABLE`` (atomic on InnoDB) whose effect is detected
on a re-run by the disappearance of its temporary column. FK drops and adds
use MariaDB's ``IF [NOT] EXISTS``. The UUID (or UUID192) columns of parent and
children get the same type, as InnoDB rejects FKs between differing types (errno 150).

The mapping is computed by the server (:func:`mapping_insert_sql`; with a
timestamp column, in Python: :meth:`Swap.fill_mapping`), a batch per
statement, each committed (a re-run continues after the last). The
temporary columns are filled by ``UPDATE ... JOIN`` batches walking each
table's primary key, each batch checked right after (see
:mod:`sqla_ids.migration.core.fill`). After the swap, the foreign keys come
back with ``foreign_key_checks = 0`` -- with checking on, InnoDB copies the
whole table to add one -- but only once the migration has proven every row
of them has its parent (:func:`_prove_references`), as the online mode does.

Reflection reads ``information_schema`` directly: SQLAlchemy's MySQL
inspector parses ``SHOW CREATE TABLE`` and gets names containing backticks
wrong (doubled, or the foreign key skipped). Every column is put back with
the definition ``SHOW CREATE TABLE`` printed for it and at its position
(``AFTER``/``FIRST``), so type, default, comment and order survive. Every
``UPDATE`` also assigns each ``ON UPDATE CURRENT_TIMESTAMP`` column to itself,
so the migration's writes do not touch those values.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import execute_sql, quoter
from sqla_ids.errors import MigrationVerificationError
from sqla_ids.migration.backends.base import Proven, Strategy
from sqla_ids.migration.backends.mysql.keys import key_sql, stored_key_sql
from sqla_ids.migration.backends.mysql.online import old_key_index
from sqla_ids.migration.backends.mysql.reflect import (
    _quote,
    columns,
    key_lines,
    key_name,
    preserved_columns,
    primary_key,
)
from sqla_ids.migration.core import mapping, sizing, state
from sqla_ids.migration.core.added_key import AddKeyPlan
from sqla_ids.migration.core.fill import Fill, fill
from sqla_ids.migration.core.mapping import fill_mapping_in_sql, new_type_sql, segment_sql
from sqla_ids.migration.core.model import (
    OLD_COLUMN_COMMENT,
    ColumnDefinition,
    ParkedTrigger,
    PkMigrationPlan,
    refuse,
)
from sqla_ids.migration.core.phases import Reached, Recorded
from sqla_ids.migration.core.reflected import inspect
from sqla_ids.migration.core.sql import examples, literal, view_error


class Step(NamedTuple):
    """One statement of the swap, recorded once run (a re-run continues after it)."""

    table: str
    """The table whose temporary column ``marker`` proves the step still to do."""
    marker: str | None
    sql: str
    proven_first: bool = False
    """A foreign key added unchecked: the references are proven to have no orphan
    before the first of them runs."""


class Swap(Strategy):
    """Fill temporary columns, then swap them in, one recorded step at a time."""

    transactional = False

    def fill_mapping(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """The mapping computed by the server (:func:`mapping_insert_sql`), each batch
        committed: a re-run continues after the last one. With a timestamp column,
        the keys are made by :func:`sqla_ids.migration.core.mapping.fill_mapping`
        (the same keys, as SQLite makes them): MariaDB's running ``MAX()`` window
        reads the whole frame again for every row, quadratic in the batch --
        measured 2,684 rows/s against 24,812 without a timestamp column (100,000
        rows, batches of 10,000)."""
        if plan.timestamp_column is not None:
            mapping.fill_mapping(connection, plan)
        else:
            fill_mapping_in_sql(connection, plan, partial(mapping_insert_sql, connection, plan))

    @contextmanager
    def quiet(self, connection: Connection, plan: PkMigrationPlan) -> Iterator[None]:
        """The application's ``UPDATE`` triggers set aside meanwhile (:func:`park_triggers`)."""
        park_triggers(connection, plan)
        try:
            yield
        except BaseException:
            # Back after a failure too (the application needs them until a re-run),
            # unless the connection is what failed: the re-run recreates them then.
            with suppress(sa.exc.DBAPIError):
                unpark_triggers(connection, plan)
            raise
        unpark_triggers(connection, plan)

    def upgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Temporary UUID columns filled through the mapping, then swapped in; the
        application's ``UPDATE`` triggers set aside from the first write to the last."""
        with self.quiet(connection, plan):
            return self._upgrade(connection, plan, resumed)

    def downgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Temporary old-type columns of the references filled, then swapped in; the
        key comes back from its old-key column. The application's ``UPDATE``
        triggers set aside meanwhile."""
        with self.quiet(connection, plan):
            return self._downgrade(connection, plan, resumed)

    def _upgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        if resumed.phase is not Reached.SWAPPING:
            uuid_sql = new_type_sql(connection, plan)
            fills = [self._add_temp(connection, plan, t, c, uuid_sql) for t, c in plan.targets()]
            fill(connection, plan, fills, "old_key", "new_key")
            resumed = Recorded(Reached.SWAPPING)
            state.save(connection, plan, resumed)
        return _run_steps(connection, plan, upgrade_steps(connection, plan), resumed)

    def _downgrade(
        self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded
    ) -> Proven:
        if resumed.phase is not Reached.DOWN_SWAPPING:
            fills = []
            for table, column in plan.targets()[1:]:
                ref = next(r for r in plan.references if (r.table, r.column) == (table, column))
                fills.append(self._add_temp(connection, plan, table, column, ref.type_sql))
            fill(connection, plan, fills, "new_key", "old_key")
            resumed = Recorded(Reached.DOWN_SWAPPING)
            state.save(connection, plan, resumed)
        return _run_steps(connection, plan, downgrade_steps(connection, plan), resumed)

    @staticmethod
    def _add_temp(
        connection: Connection, plan: PkMigrationPlan, table: str, column: str, type_sql: str
    ) -> Fill:
        q = quoter(connection.dialect)
        temp = plan.temp_column(table, column)
        execute_sql(
            connection, f"ALTER TABLE {q(table)} ADD COLUMN IF NOT EXISTS {q(temp)} {type_sql}"
        )
        _name, key = primary_key(connection, inspect(connection), table)
        return Fill(
            table,
            column,
            temp,
            keep=preserved_columns(connection, table),
            walk=key[0] if len(key) == 1 else None,
        )


def park_triggers(connection: Connection, plan: PkMigrationPlan | AddKeyPlan) -> None:
    """Drop the application's ``UPDATE`` triggers on the affected tables before the
    migration's writes: MariaDB/MySQL cannot disable a trigger, and every row is
    rewritten (a trigger setting ``last_update`` or writing an audit row would
    take that for an application update). Their definitions are in the plan,
    saved in the state table before this runs, so a run killed before
    :func:`unpark_triggers` recreates them when run again (``IF EXISTS``:
    repeatable). The offline mode runs with the application's writers paused:
    none misses a trigger meanwhile."""
    park(connection, plan.parked_triggers)


def park(connection: Connection, triggers: Sequence[ParkedTrigger]) -> None:
    """Drop ``triggers`` (``IF EXISTS``: repeatable)."""
    q = quoter(connection.dialect)
    for trigger in triggers:
        execute_sql(connection, f"DROP TRIGGER IF EXISTS {q(trigger.name)}")


def unpark_triggers(connection: Connection, plan: PkMigrationPlan | AddKeyPlan) -> None:
    """Create the parked triggers again, each from its original statement, parsed
    in the ``sql_mode`` it was created in (``ANSI_QUOTES``... change what the
    body means); the session's own mode is put back after. In their recorded
    order, so triggers of the same timing fire in the order they did."""
    unpark(connection, plan.parked_triggers)


def unpark(connection: Connection, triggers: Sequence[ParkedTrigger]) -> None:
    """Create those of ``triggers`` that are missing (see :func:`unpark_triggers`)."""
    existing = set(
        connection.execute(
            sa.text(
                "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
                " WHERE TRIGGER_SCHEMA = DATABASE()"
            )
        ).scalars()
    )
    missing = [t for t in triggers if t.name not in existing]
    if not missing:
        return
    session_mode = connection.execute(sa.text("SELECT @@SESSION.sql_mode")).scalar_one()
    try:
        for trigger in missing:
            connection.execute(sa.text("SET SESSION sql_mode = :mode"), {"mode": trigger.sql_mode})
            execute_sql(connection, trigger.create_sql)
    finally:
        connection.execute(sa.text("SET SESSION sql_mode = :mode"), {"mode": session_mode})


def _run_steps(
    connection: Connection, plan: PkMigrationPlan, steps: list[Step], resumed: Recorded
) -> Proven:
    """Run the swap statements, recording progress so a re-run skips what was done;
    the references proven before their foreign keys were added unchecked."""
    proven: Proven = frozenset()
    for index, step in enumerate(steps):
        if index < resumed.done:
            continue
        if step.proven_first and not proven:
            proven = _prove_references(connection, plan)
        if step.marker is None or step.marker in columns(
            connection, inspect(connection), step.table
        ):
            try:
                execute_sql(connection, step.sql)
            except sa.exc.DBAPIError as error:
                view = next((v for v in plan.views if v.create_sql == step.sql), None)
                if view is None:
                    raise
                raise view_error(view, error) from error
        # else: already applied by an interrupted run (its temporary column is gone)
        state.save(connection, plan, Recorded(resumed.phase, index + 1))
    return proven


def _prove_references(connection: Connection, plan: PkMigrationPlan) -> Proven:
    """Every row of every foreign key about to be added has its parent row (all of
    the key's columns, as InnoDB checks them): only then are the foreign keys added
    without InnoDB checking them again -- with checking on, adding one copies the
    whole table. The child's index on the reference answers it, with one probe of
    the parent's primary key per row. Returns the single-column references proven
    (the final check need not scan them again)."""
    for ref in plan.references:
        if not ref.constraint:
            continue
        parent = sa.table(plan.table, *map(sa.column, ref.referred_columns)).alias("p")
        child = sa.table(ref.table, *map(sa.column, ref.columns)).alias("c")
        orphans = connection.execute(
            sa.select(sa.func.count())
            .select_from(child)
            .where(
                *(child.c[c].is_not(None) for c in ref.columns),
                ~sa.exists().where(
                    *(
                        parent.c[p] == child.c[c]
                        for c, p in zip(ref.columns, ref.referred_columns, strict=True)
                    )
                ),
            )
        ).scalar_one()
        if orphans:
            unmatched = sa.select(*child.c).where(
                *(child.c[c].is_not(None) for c in ref.columns),
                ~sa.exists().where(
                    *(
                        parent.c[p] == child.c[c]
                        for c, p in zip(ref.columns, ref.referred_columns, strict=True)
                    )
                ),
            )
            raise MigrationVerificationError(
                f"{ref.table}: {orphans} rows of foreign key {ref.constraint} have no"
                f" {plan.table} row (first: {examples(connection, unmatched)}); stopped"
                " before adding it (run the migration again once they are fixed)"
            )
    return frozenset(
        (r.table, r.column) for r in plan.references if r.constraint and len(r.columns) == 1
    )


def _position(connection: Connection, definition: ColumnDefinition) -> str:
    if definition.after is None:
        return " FIRST"
    return f" AFTER {_quote(connection, definition.after)}"


def _definition(plan: PkMigrationPlan, table: str, column: str) -> ColumnDefinition:
    found = plan.column_definition(table, column)
    if found is None:  # pragma: no cover - every converted column is recorded
        raise refuse(f"no recorded definition of {table}.{column}", plan.table)
    return found


def _fk_statements(connection: Connection, plan: PkMigrationPlan) -> tuple[list[str], list[str]]:
    q = quoter(connection.dialect)
    drops, adds = [], []
    for ref in plan.references:
        if not ref.constraint:
            continue
        drops.append(f"ALTER TABLE {q(ref.table)} DROP FOREIGN KEY IF EXISTS {q(ref.constraint)}")
        options = ref.options
        # Unchecked (proven first, see _prove_references): no table copy.
        clause = (
            "SET STATEMENT foreign_key_checks = 0 FOR"
            f" ALTER TABLE {q(ref.table)} ADD CONSTRAINT {q(ref.constraint)} FOREIGN KEY"
            f" IF NOT EXISTS ({', '.join(q(c) for c in ref.columns)})"
            f" REFERENCES {q(plan.table)} ({', '.join(q(c) for c in ref.referred_columns)})"
        )
        # Rules come from information_schema's fixed vocabulary (CASCADE, SET NULL...).
        for key, words in (("ondelete", "ON DELETE"), ("onupdate", "ON UPDATE")):
            rule = str(options.get(key) or "")
            if rule in ("CASCADE", "SET NULL", "SET DEFAULT", "NO ACTION"):
                clause += f" {words} {rule}"
        adds.append(clause)
    return drops, adds


def _table_alter(
    connection: Connection, plan: PkMigrationPlan, table: str, columns_sql: list[str]
) -> str:
    """One ``ALTER TABLE``: drop the indexes over the changed columns, change them,
    add the indexes back as they were."""
    q = quoter(connection.dialect)
    deps = {d.name: str(d.definition) for d in plan.dependents if d.table == table}
    # The server lists re-added indexes after the others (it keeps them in the
    # order the ALTER leaves them): every index after the first one rebuilt is
    # dropped and re-added too, all in the planned order, so SHOW CREATE TABLE
    # lists them as before. The ALTER copies the table anyway (a column changes
    # type), so the extra indexes cost one more sort each, no extra pass.
    present = {key_name(line): line for line in key_lines(connection, table)}
    planned = [(key_name(line), line) for line in plan.table_sql.get(table, [])]
    if not planned:  # a plan recorded before the order was: the dependents alone
        planned = [(name, definition) for name, definition in deps.items()]
    first = next((i for i, (name, _line) in enumerate(planned) if name in deps), len(planned))
    rebuilt = [
        (name, deps.get(name or "") or "ADD " + line)
        for name, line in planned[first:]
        if name in deps or name in present
    ]
    listed = {name for name, _definition in rebuilt}
    rebuilt += [(name, definition) for name, definition in deps.items() if name not in listed]
    drops = [
        "DROP PRIMARY KEY" if name == "PRIMARY" else f"DROP INDEX {q(str(name))}"
        for name, _ in rebuilt
    ]
    adds = [definition for _name, definition in rebuilt]
    return f"ALTER TABLE {q(table)} " + ", ".join(drops + columns_sql + adds)


def upgrade_steps(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """Per-table swap statements, each paired with the temp column it removes."""
    q = quoter(connection.dialect)
    uuid_sql = new_type_sql(connection, plan)
    drops, adds = _fk_statements(connection, plan)
    steps = [Step("", None, v.drop_sql) for v in reversed(plan.views)]
    steps += [Step("", None, s) for s in drops]
    for table in plan.affected_tables:
        clauses = []
        marker = None
        for t, column in plan.targets():
            if t != table:
                continue
            definition = _definition(plan, table, column)
            temp = plan.temp_column(table, column)
            marker = marker or temp
            comment = (
                f" COMMENT {literal(connection, definition.comment)}" if definition.comment else ""
            )
            if (table, column) == (plan.table, plan.column):
                old_comment = OLD_COLUMN_COMMENT.format(table=plan.table, column=plan.column)
                default = f" DEFAULT {plan.new_default_sql}" if plan.new_default_sql else ""
                clauses += [
                    "DROP PRIMARY KEY",
                    f"CHANGE COLUMN {q(column)} {q(plan.old_column)} {plan.key_type_sql} NULL"
                    f" COMMENT {literal(connection, old_comment)}",
                    f"CHANGE COLUMN {q(temp)} {q(column)} {uuid_sql} NOT NULL{default}{comment}"
                    + _position(connection, definition),
                    f"ADD PRIMARY KEY ({q(column)})",
                ]
                continue
            ref = next(r for r in plan.references if (r.table, r.column) == (table, column))
            if plan.keep_child_old_columns:
                clauses.append(
                    f"CHANGE COLUMN {q(column)} {q(column + '_old')} {ref.type_sql} NULL"
                )
            else:
                clauses.append(f"DROP COLUMN {q(column)}")
            null = "NULL" if ref.nullable else "NOT NULL"
            clauses.append(
                f"CHANGE COLUMN {q(temp)} {q(column)} {uuid_sql} {null}{comment}"
                + _position(connection, definition)
            )
        steps.append(Step(table, marker, _table_alter(connection, plan, table, clauses)))
        if table == plan.table:  # idempotent (IF NOT EXISTS), so safe on a resumed run
            steps += [Step("", None, sql) for sql in plan.new_default.trigger_sql]
    steps += [Step("", None, s, proven_first=True) for s in adds]
    steps += [Step("", None, v.create_sql) for v in plan.views]
    return steps


def downgrade_steps(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """Per-table statements restoring the old keys, each paired with its marker column."""
    q = quoter(connection.dialect)
    drops, adds = _fk_statements(connection, plan)
    steps = [Step("", None, v.drop_sql) for v in reversed(plan.views)]
    steps += [Step("", None, s) for s in drops]
    # The trigger writes UUIDs into the key: it goes before the key is integer again.
    steps += [Step("", None, f"DROP TRIGGER IF EXISTS {t}") for t in plan.new_default.triggers]
    for table in plan.affected_tables:
        clauses = []
        marker = None
        for t, column in plan.targets():
            if t != table:
                continue
            definition = _definition(plan, table, column)
            position = _position(connection, definition)
            if (table, column) == (plan.table, plan.column):
                marker = marker or plan.old_column
                kept = old_key_index(connection, plan)
                if kept is not None:  # after an online migration's contract
                    clauses.append(f"DROP INDEX {q(kept)}")
                clauses += [
                    "DROP PRIMARY KEY",
                    f"DROP COLUMN {q(column)}",
                    f"CHANGE COLUMN {q(plan.old_column)} {definition.definition}{position}",
                    f"ADD PRIMARY KEY ({q(column)})",
                ]
                continue
            temp = plan.temp_column(table, column)
            marker = marker or temp
            clauses.append(f"DROP COLUMN {q(column)}")
            if plan.keep_child_old_columns:
                clauses.append(f"DROP COLUMN {q(column + '_old')}")
            clauses.append(f"CHANGE COLUMN {q(temp)} {definition.definition}{position}")
        steps.append(Step(table, marker, _table_alter(connection, plan, table, clauses)))
    steps += [Step("", None, s, proven_first=True) for s in adds]
    if plan.default.kind == "auto_increment":
        steps.append(
            Step(
                "",
                None,
                f"ALTER TABLE {q(plan.table)} AUTO_INCREMENT = {int(plan.default.counter or 1)}",
            )
        )
    steps += [Step("", None, v.create_sql) for v in plan.views]
    return steps


def mapping_insert_sql(connection: Connection, plan: PkMigrationPlan, bounded: bool) -> str:
    """The ``INSERT ... SELECT`` of one batch of mapping rows without a timestamp
    column (see :func:`sqla_ids.migration.core.mapping.fill_mapping_in_sql`; with
    one, :meth:`Swap.fill_mapping` makes them in Python): the keys' (millisecond,
    counter) number ``v = :start + ROW_NUMBER()`` and 56 bits of
    ``SHA2(seed:ordinal)``. Deterministic, so a binary log in ``MIXED`` format
    keeps the statement, not its rows."""
    q = quoter(connection.dialect)
    k = q(plan.column)
    low = f"{k} > :after AND " if bounded else ""
    key = key_sql("(v >> 18)", "(v & 262143)", ":ordinal + r - 1")
    segment = segment_sql(connection, plan.options)
    # UUID192 keys: the UUID's 16 bytes, then the segment's 8, big-endian.
    key = stored_key_sql(plan, key, None if segment is None else "s")
    s_col = ", s" if segment is not None else ""
    s_sql = f", {segment} AS s" if segment is not None else ""
    return (
        f"INSERT INTO {q(plan.mapping_table)} (old_key, new_key)"
        f" SELECT k, {key} FROM (SELECT k, r, CAST(:start AS SIGNED) + r AS v{s_col} FROM"
        f" (SELECT {k} AS k, ROW_NUMBER() OVER (ORDER BY {k}) AS r{s_sql}"
        f" FROM {q(plan.table)} WHERE {low}{k} <= :upto) b) w"
    )


# --- read-only, for a dry run: the statements Swap.upgrade will run ---------------------
# Added for the preflight (issue 31): it reads and builds, never executes. It follows
# Swap.upgrade (a fresh run); tests/test_migration_preflight.py runs both and compares
# the statements.


def planned_upgrade(connection: Connection, plan: PkMigrationPlan) -> list[sizing.Step]:
    """The statements (and data steps) :meth:`Swap.upgrade` will run, in order."""
    q = quoter(connection.dialect)
    uuid_sql = new_type_sql(connection, plan)
    steps: list[sizing.Step] = [
        sizing.Statement(f"DROP TRIGGER IF EXISTS {q(t.name)}") for t in plan.parked_triggers
    ]
    steps += [
        sizing.Statement(
            f"ALTER TABLE {q(table)} ADD COLUMN IF NOT EXISTS"
            f" {q(plan.temp_column(table, column))} {uuid_sql}"
        )
        for table, column in plan.targets()
    ]
    steps += sizing.fill_steps(plan, " (each batch commits)")
    steps += [sizing.Statement(step.sql) for step in upgrade_steps(connection, plan)]
    steps += [sizing.Statement(t.create_sql) for t in plan.parked_triggers]
    return steps
