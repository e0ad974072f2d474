"""MariaDB/MySQL: swap statements that are safe to re-run after a crash.

DDL commits implicitly here, so the migration is resumable instead of
atomic: every step is recorded in the state table once done, and each table's
swap is a single ``ALTER TABLE`` (atomic on InnoDB) whose effect is detected
on a re-run by the disappearance of its temporary column. FK drops and adds
use MariaDB's ``IF [NOT] EXISTS``. The UUID columns of parent and children
get the same type, as InnoDB rejects FKs between differing types (errno 150).
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.dialects import _reflected
from sqla_ids.migration.plan import (
    NEW_SUFFIX,
    RESTORE_SUFFIX,
    Dependent,
    PkMigrationPlan,
    Reference,
    View,
    refuse,
)

STRATEGY = "swap"
TRANSACTIONAL = False


def _quote(connection: Connection, name: str) -> str:
    return str(connection.dialect.identifier_preparer.quote(name))


def column_type_sql(connection: Connection, table: str, column: str) -> str:
    """The full column type (``int(11) unsigned``) with its charset/collation for text."""
    row = connection.execute(
        sa.text(
            "SELECT COLUMN_TYPE, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t AND COLUMN_NAME = :c"
        ),
        {"t": table, "c": column},
    ).one()
    column_type, charset, collation = row
    if charset:
        return f"{column_type} CHARACTER SET {charset} COLLATE {collation}"
    return str(column_type)


def find_references(
    connection: Connection, inspector: sa.Inspector, table: str, column: str
) -> list[Reference]:
    """Every FK whose referred columns include the key (paired by ordinal position)."""
    return _reflected.find_references(connection, inspector, table, column)


def find_blockers(
    connection: Connection, inspector: sa.Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """Triggers on affected tables (views: :func:`find_views`)."""
    problems: list[str] = []
    from sqla_ids.types.server_functions import UUID7_FUNCTION

    # A trigger filling a UUIDv7 key (an earlier migration's, or the types
    # layer's) fires on INSERT only, and the swap only updates and alters.
    triggers = connection.execute(
        sa.text(
            "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE FROM information_schema.TRIGGERS"
            " WHERE TRIGGER_SCHEMA = DATABASE() AND NOT (EVENT_MANIPULATION = 'INSERT'"
            " AND ACTION_STATEMENT LIKE :own) ORDER BY 1"
        ),
        {"own": f"%{UUID7_FUNCTION}%()%"},  # sqla_ids_uuid7() or its _serial() twin
    ).all()
    problems += [
        f"trigger {name} on {t} would fire on every rewritten row"
        for name, t in triggers
        if t in affected
    ]
    return problems


def find_views(
    connection: Connection, inspector: sa.Inspector, affected: dict[str, set[str]]
) -> list[View]:
    """Views whose stored definition names an affected table and one of its columns.

    MariaDB keeps no column dependencies, but it stores each view's definition
    with every column fully qualified (`` `db`.`t`.`c` ``), so this finds them.
    A view over such a view needs no recreation: MariaDB resolves it at query
    time. ``SHOW CREATE VIEW`` gives the exact definition (algorithm, definer,
    security, check option); it is replayed as ``CREATE OR REPLACE`` so a
    resumed run can repeat it.
    """
    views: list[View] = []
    rows = connection.execute(
        sa.text(
            "SELECT TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS"
            " WHERE TABLE_SCHEMA = DATABASE() ORDER BY 1"
        )
    ).all()
    for view, definition in rows:
        text = (definition or "").lower()
        depends_on = next(
            (
                f"{t}.{c}"
                for t, cols in sorted(affected.items())
                for c in sorted(cols)
                if f"`{t.lower()}`" in text and f"`{c.lower()}`" in text
            ),
            None,
        )
        if depends_on is None:
            continue
        q = _quote(connection, view)
        create = str(connection.exec_driver_sql(f"SHOW CREATE VIEW {q}").one()[1])
        views.append(
            View(
                name=view,
                depends_on=depends_on,
                create_sql=re.sub(r"^CREATE ", "CREATE OR REPLACE ", create, count=1),
                drop_sql=f"DROP VIEW IF EXISTS {q}",
            )
        )
    return views


# The trigger is named by the types layer's DDL; it is read back from there so
# the downgrade drops exactly the trigger the upgrade created.
_TRIGGER_NAME = re.compile(r"CREATE TRIGGER (?:IF NOT EXISTS )?(\S+) ", re.I)


def uuid7_key_default(connection: Connection, plan: PkMigrationPlan) -> dict[str, Any]:
    """The new key's default: the function's nil placeholder plus a ``BEFORE INSERT``
    trigger that replaces it (MariaDB/MySQL allow no stored function in ``DEFAULT``)."""
    from sqla_ids.types.server_functions import (
        UUID7_FUNCTION,
        uuid7_column_default_sql,
        uuid7_column_trigger_sql,
    )

    name = connection.dialect.name
    trigger_sql = uuid7_column_trigger_sql(
        name, _quote(connection, plan.table), _quote(connection, plan.column)
    )
    triggers = []
    for sql in trigger_sql:
        match = _TRIGGER_NAME.match(sql)
        if match is None:  # pragma: no cover - the types layer's DDL changed shape
            raise refuse(f"cannot read the trigger name from {sql!r}")
        trigger = match.group(1)
        if len(trigger.strip("`")) > 64:
            raise refuse(
                f"trigger name {trigger} is longer than 64 characters; pass"
                " server_default=False (and fill the key from the client) or rename the table"
            )
        triggers.append(trigger)
    return {
        "kind": "uuid7_function",
        "function": UUID7_FUNCTION,
        "sql": uuid7_column_default_sql(name),
        "trigger_sql": trigger_sql,
        "triggers": triggers,
    }


def find_dependents(
    connection: Connection,
    inspector: sa.Inspector,
    table: str,
    column: str,
    affected: dict[str, set[str]],
) -> list[Dependent]:
    """Indexes, unique keys and child primary keys over affected columns."""
    return _reflected.find_dependents(inspector, table, column, affected)


def key_default(connection: Connection, plan: PkMigrationPlan) -> dict[str, Any]:
    """``AUTO_INCREMENT`` on the key and the table's next value, to restore them exactly."""
    extra, next_value = connection.execute(
        sa.text(
            "SELECT c.EXTRA, t.AUTO_INCREMENT FROM information_schema.COLUMNS c"
            " JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = c.TABLE_SCHEMA"
            " AND t.TABLE_NAME = c.TABLE_NAME WHERE c.TABLE_SCHEMA = DATABASE()"
            " AND c.TABLE_NAME = :t AND c.COLUMN_NAME = :c"
        ),
        {"t": plan.table, "c": plan.column},
    ).one()
    if "auto_increment" in (extra or "").lower():
        return {"kind": "auto_increment", "next": int(next_value or 1)}
    return {}


def table_sql(connection: Connection, plan: PkMigrationPlan) -> dict[str, list[str]]:
    """Not needed: objects are recreated from the reflected plan."""
    return {}


def uuid_type_sql(connection: Connection) -> str:
    """The UUID column type, as the plugin's ``UUIDv7`` type stores it on this server."""
    from sqla_ids.migration.keys import uuid_type

    return str(uuid_type().compile(dialect=connection.dialect))


def _add_dependents(q: Any, plan: PkMigrationPlan, table: str) -> list[str]:
    clauses = []
    for dep in plan.dependents:
        if dep.table != table:
            continue
        cols = ", ".join(q(c) for c in dep.columns)
        if dep.kind == "primary":
            clauses.append(f"ADD PRIMARY KEY ({cols})")
        elif dep.kind == "unique":
            clauses.append(f"ADD UNIQUE INDEX {q(dep.name)} ({cols})")
        else:
            clauses.append(f"ADD INDEX {q(dep.name)} ({cols})")
    return clauses


def _drop_dependents(q: Any, plan: PkMigrationPlan, table: str) -> list[str]:
    clauses = []
    for dep in plan.dependents:
        if dep.table == table:
            clauses.append(
                "DROP PRIMARY KEY" if dep.kind == "primary" else f"DROP INDEX {q(dep.name)}"
            )
    return clauses


def _fk_statements(q: Any, plan: PkMigrationPlan) -> tuple[list[str], list[str]]:
    drops, adds = [], []
    for ref in plan.references:
        if not ref.constraint:
            continue
        drops.append(f"ALTER TABLE {q(ref.table)} DROP FOREIGN KEY IF EXISTS {q(ref.constraint)}")
        options = ref.options
        clause = (
            f"ALTER TABLE {q(ref.table)} ADD CONSTRAINT {q(ref.constraint)} FOREIGN KEY"
            f" IF NOT EXISTS ({', '.join(q(c) for c in ref.columns)})"
            f" REFERENCES {q(plan.table)} ({', '.join(q(c) for c in ref.referred_columns)})"
        )
        if options.get("ondelete"):
            clause += f" ON DELETE {options['ondelete']}"
        if options.get("onupdate"):
            clause += f" ON UPDATE {options['onupdate']}"
        adds.append(clause)
    return drops, adds


Step = tuple[str, str | None, str]  # (table whose temp column proves it's pending, column, sql)


def upgrade_swap(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """Per-table swap statements, each paired with the temp column it removes."""

    def q(name: str) -> str:
        return _quote(connection, name)

    uuid_sql = uuid_type_sql(connection)
    drops, adds = _fk_statements(q, plan)
    steps: list[Step] = [("", None, s) for s in drops]
    for table in plan.affected_tables:
        clauses = _drop_dependents(q, plan, table)
        marker = None
        if table == plan.table:
            c = q(plan.column)
            marker = plan.column + NEW_SUFFIX
            default = f" DEFAULT {plan.new_default_sql}" if plan.new_default_sql else ""
            clauses += [
                "DROP PRIMARY KEY",
                f"CHANGE COLUMN {c} {q(plan.old_column)} {plan.key_type_sql} NULL",
                f"CHANGE COLUMN {q(marker)} {c} {uuid_sql} NOT NULL{default}",
                f"ADD PRIMARY KEY ({c})",
            ]
        for ref in plan.references:
            if ref.table != table:
                continue
            rc = q(ref.column)
            marker = ref.column + NEW_SUFFIX
            if plan.keep_child_old_columns:
                clauses.append(f"CHANGE COLUMN {rc} {q(ref.column + '_old')} {ref.type_sql} NULL")
            else:
                clauses.append(f"DROP COLUMN {rc}")
            null = "NULL" if ref.nullable else "NOT NULL"
            clauses.append(f"CHANGE COLUMN {q(marker)} {rc} {uuid_sql} {null}")
        clauses += _add_dependents(q, plan, table)
        steps.append((table, marker, f"ALTER TABLE {q(table)} " + ", ".join(clauses)))
        if table == plan.table:  # idempotent (IF NOT EXISTS), so safe on a resumed run
            steps += [("", None, sql) for sql in plan.new_default.get("trigger_sql", [])]
    steps += [("", None, s) for s in adds]
    return steps


def downgrade_swap(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """Per-table statements restoring the old keys, each paired with its marker column."""

    def q(name: str) -> str:
        return _quote(connection, name)

    drops, adds = _fk_statements(q, plan)
    steps: list[Step] = [("", None, s) for s in drops]
    # The trigger writes UUIDs into the key: it goes before the key is integer again.
    steps += [
        ("", None, f"DROP TRIGGER IF EXISTS {t}") for t in plan.new_default.get("triggers", [])
    ]
    for table in plan.affected_tables:
        clauses = _drop_dependents(q, plan, table)
        marker = None
        if table == plan.table:
            c = q(plan.column)
            marker = plan.old_column
            auto = " AUTO_INCREMENT" if plan.default.get("kind") == "auto_increment" else ""
            clauses += [
                "DROP PRIMARY KEY",
                f"DROP COLUMN {c}",
                f"CHANGE COLUMN {q(marker)} {c} {plan.key_type_sql} NOT NULL{auto}",
                f"ADD PRIMARY KEY ({c})",
            ]
        for ref in plan.references:
            if ref.table != table:
                continue
            rc = q(ref.column)
            marker = ref.column + RESTORE_SUFFIX
            clauses.append(f"DROP COLUMN {rc}")
            if plan.keep_child_old_columns:
                clauses.append(f"DROP COLUMN {q(ref.column + '_old')}")
            null = "NULL" if ref.nullable else "NOT NULL"
            clauses.append(f"CHANGE COLUMN {q(marker)} {rc} {ref.type_sql} {null}")
        clauses += _add_dependents(q, plan, table)
        steps.append((table, marker, f"ALTER TABLE {q(table)} " + ", ".join(clauses)))
    steps += [("", None, s) for s in adds]
    if plan.default.get("kind") == "auto_increment":
        steps.append(
            ("", None, f"ALTER TABLE {q(plan.table)} AUTO_INCREMENT = {plan.default['next']}")
        )
    return steps


def next_old_keys_sql(plan: PkMigrationPlan) -> str | None:
    """No sequence object: fresh old keys are numbered after the maximum."""
    return None
