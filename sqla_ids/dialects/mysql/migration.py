"""MariaDB/MySQL: reflection from ``information_schema``; swaps safe to re-run.

DDL commits implicitly here, so the migration is resumable instead of
atomic: every step is recorded in the state table once done, and each table's
swap is a single ``ALTER TABLE`` (atomic on InnoDB) whose effect is detected
on a re-run by the disappearance of its temporary column. FK drops and adds
use MariaDB's ``IF [NOT] EXISTS``. The UUID columns of parent and children
get the same type, as InnoDB rejects FKs between differing types (errno 150).

Reflection reads ``information_schema`` directly: SQLAlchemy's MySQL
inspector parses ``SHOW CREATE TABLE`` and gets names containing backticks
wrong (doubled, or the foreign key skipped). Every column is put back with
the definition ``SHOW CREATE TABLE`` printed for it and at its position
(``AFTER``/``FIRST``), so type, default, comment and order survive. Every
``UPDATE`` also assigns each ``ON UPDATE CURRENT_TIMESTAMP`` column to itself,
so the migration's writes do not touch those values.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.mysql.online import MariaDBOnline, old_key_index
from sqla_ids.migration import analysis, state, strategies
from sqla_ids.migration.dialect import MigrationDialect
from sqla_ids.migration.mapping import RawType
from sqla_ids.migration.model import (
    OLD_COLUMN_COMMENT,
    Blockers,
    ColumnDefinition,
    Dependent,
    NewKeyDefault,
    OldKeyDefault,
    PkMigrationPlan,
    Reference,
    Routine,
    View,
    refuse,
)
from sqla_ids.migration.online_names import is_object_name
from sqla_ids.migration.strategies import Fill, execute_sql, literal

IDENTIFIER_QUOTE = "`"
#: Longest table/column/index name MariaDB and MySQL accept (characters).
MAX_IDENTIFIER_CHARS = 64

_INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}


def _quote(connection: Connection, name: str) -> str:
    return str(connection.dialect.identifier_preparer.quote(name))


def primary_key(
    connection: Connection, inspector: sa.Inspector, table: str
) -> tuple[str | None, list[str]]:
    """``PRIMARY`` and the key's columns in order."""
    cols = connection.execute(
        sa.text(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = :t AND INDEX_NAME = 'PRIMARY' ORDER BY SEQ_IN_INDEX"
        ),
        {"t": table},
    ).scalars()
    return "PRIMARY", list(cols)


def columns(connection: Connection, inspector: sa.Inspector, table: str) -> dict[str, Any]:
    """The table's columns by name, in order: ``type`` (a SQLAlchemy type for the
    kinds the migration tells apart) and ``nullable``."""
    rows = connection.execute(
        sa.text(
            "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE"
            " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = :t ORDER BY ORDINAL_POSITION"
        ),
        {"t": table},
    ).all()
    result: dict[str, Any] = {}
    for name, data_type, column_type, nullable in rows:
        kind = str(data_type).lower()
        type_: sa.types.TypeEngine[Any]
        if kind in _INTEGER_TYPES:
            type_ = sa.Integer()
        elif kind in _TEXT_TYPES:
            type_ = sa.String()
        elif kind == "uuid":
            type_ = sa.Uuid()
        else:
            type_ = RawType(str(column_type))
        result[name] = {"name": name, "type": type_, "nullable": nullable == "YES"}
    return result


def foreign_keys(connection: Connection, inspector: sa.Inspector) -> list[dict[str, Any]]:
    """Every foreign key of the database: name, table, columns paired in order with
    the referred table's columns, and the ``ON DELETE``/``ON UPDATE`` rules."""
    rows = connection.execute(
        sa.text(
            "SELECT k.CONSTRAINT_NAME, k.TABLE_NAME, k.COLUMN_NAME, k.REFERENCED_TABLE_NAME,"
            " k.REFERENCED_COLUMN_NAME, r.DELETE_RULE, r.UPDATE_RULE"
            " FROM information_schema.KEY_COLUMN_USAGE k"
            " JOIN information_schema.REFERENTIAL_CONSTRAINTS r"
            " ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA"
            " AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME"
            " AND r.TABLE_NAME = k.TABLE_NAME"
            " WHERE k.TABLE_SCHEMA = DATABASE() AND k.REFERENCED_TABLE_SCHEMA = DATABASE()"
            " ORDER BY k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION"
        )
    ).all()
    fks: dict[tuple[str, str], dict[str, Any]] = {}
    for name, table, column, ref_table, ref_column, on_delete, on_update in rows:
        fk = fks.setdefault(
            (table, name),
            {
                "name": name,
                "table": table,
                "constrained_columns": [],
                "referred_table": ref_table,
                "referred_columns": [],
                "options": {
                    k: v
                    for k, v in (("ondelete", on_delete), ("onupdate", on_update))
                    if v and v != "RESTRICT"
                },
            },
        )
        fk["constrained_columns"].append(column)
        fk["referred_columns"].append(ref_column)
    return list(fks.values())


def find_references(
    connection: Connection, inspector: sa.Inspector, table: str, column: str
) -> list[Reference]:
    """Every FK whose referred columns include the key (paired by ordinal position)."""
    refs = []
    for fk in foreign_keys(connection, inspector):
        if fk["referred_table"] != table or column not in fk["referred_columns"]:
            continue
        local = fk["constrained_columns"][fk["referred_columns"].index(column)]
        cols = columns(connection, inspector, fk["table"])
        refs.append(
            Reference(
                table=fk["table"],
                column=local,
                nullable=bool(cols[local]["nullable"]),
                type_sql=column_type_sql(connection, fk["table"], local),
                constraint=fk["name"],
                columns=list(fk["constrained_columns"]),
                referred_columns=list(fk["referred_columns"]),
                options=dict(fk["options"]),
            )
        )
    return refs


def resolve_inheritance(
    connection: Connection, table: str, references: list[Reference], blockers: Blockers
) -> None:
    """Partitioned tables are refused (InnoDB partitioned tables have no foreign
    keys, and their partition expressions may use the key)."""
    for t in sorted({table, *(r.table for r in references)}):
        partitioned = connection.execute(
            sa.text(
                "SELECT count(*) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA ="
                " DATABASE() AND TABLE_NAME = :t AND PARTITION_NAME IS NOT NULL"
            ),
            {"t": t},
        ).scalar()
        if partitioned:
            blockers.add(f"table {t} is partitioned (not supported on MariaDB/MySQL)")


def identifier_limit(name: str) -> int | None:
    """The character limit ``name`` exceeds, if it does."""
    return MAX_IDENTIFIER_CHARS if len(name) > MAX_IDENTIFIER_CHARS else None


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


def _own_trigger(name: str, statement: str) -> bool:
    """A trigger of sqla_ids: the ``BEFORE INSERT`` trigger filling a UUIDv7 key,
    or one keeping an online migration's columns in step. The latter fire on
    this migration's ``UPDATE`` too, harmlessly (they copy a column this
    migration does not touch): so a table can be migrated online while a
    table it references is swapped but not yet contracted."""
    from sqla_ids.types.server_functions import UUID7_FUNCTION

    return f"{UUID7_FUNCTION}" in statement or is_object_name(name)


def find_blockers(
    connection: Connection, inspector: sa.Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """``UPDATE`` triggers on affected tables (the migration rewrites every row, and
    MariaDB cannot disable a trigger), CHECK constraints and generated columns
    that use an affected column (views: :func:`find_views`)."""
    problems: list[str] = []
    triggers = connection.execute(
        sa.text(
            "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_STATEMENT"
            " FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()"
            " AND EVENT_MANIPULATION = 'UPDATE' ORDER BY 1"
        )
    ).all()
    problems += [
        f"trigger {name} on {t} fires on UPDATE and the migration rewrites every row of {t};"
        " drop it first and recreate it after"
        for name, t, statement in triggers
        if t in affected and not _own_trigger(name, statement)
    ]
    checks = connection.execute(
        sa.text(
            "SELECT CONSTRAINT_NAME, TABLE_NAME, CHECK_CLAUSE"
            " FROM information_schema.CHECK_CONSTRAINTS"
            " WHERE CONSTRAINT_SCHEMA = DATABASE() ORDER BY 1"
        )
    ).all()
    for name, t, clause in checks:
        if t in affected and analysis.mentions(str(clause), sorted(affected[t]), IDENTIFIER_QUOTE):
            problems.append(f"check constraint {name} on {t} uses {', '.join(sorted(affected[t]))}")
    generated = connection.execute(
        sa.text(
            "SELECT TABLE_NAME, COLUMN_NAME, GENERATION_EXPRESSION FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND GENERATION_EXPRESSION IS NOT NULL"
            " AND GENERATION_EXPRESSION <> ''"
        )
    ).all()
    for t, name, expression in generated:
        if t in affected and analysis.mentions(str(expression), sorted(affected[t]), "`"):
            problems.append(f"generated column {t}.{name} uses {', '.join(sorted(affected[t]))}")
    return problems


def find_routines(connection: Connection, affected: dict[str, set[str]]) -> list[Routine]:
    """Stored functions, procedures and triggers whose body uses a migrated column."""
    found = []
    routines = connection.execute(
        sa.text(
            "SELECT ROUTINE_TYPE, ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES"
            " WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME NOT LIKE 'sqla\\_ids\\_%'"
            " ORDER BY 2"
        )
    ).all()
    for kind, name, body in routines:
        uses = analysis.routine_uses(str(body or ""), None, affected, IDENTIFIER_QUOTE)
        if uses:
            found.append(Routine(str(kind).lower(), name, uses, str(body)))
    triggers = connection.execute(
        sa.text(
            "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_STATEMENT"
            " FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() ORDER BY 1"
        )
    ).all()
    for name, on_table, body in triggers:
        if _own_trigger(name, str(body)):
            continue
        attached = on_table if on_table in affected else None
        uses = analysis.routine_uses(str(body or ""), attached, affected, IDENTIFIER_QUOTE)
        if uses:
            found.append(Routine("trigger", name, uses, str(body)))
    return found


def find_views(
    connection: Connection,
    inspector: sa.Inspector,
    affected: dict[str, set[str]],
    blockers: Blockers | None = None,
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
        text = definition or ""
        depends_on = next(
            (
                f"{t}.{c}"
                for t, cols in sorted(affected.items())
                for c in sorted(cols)
                if analysis.mentions(text, [t], IDENTIFIER_QUOTE)
                and analysis.mentions(text, [c], IDENTIFIER_QUOTE)
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
_TRIGGER_NAME = re.compile(r"CREATE TRIGGER (?:IF NOT EXISTS )?(`(?:[^`]|``)+`|\S+) ", re.I)


def uuid7_key_default(connection: Connection, plan: PkMigrationPlan) -> NewKeyDefault:
    """The new key's default: the function's nil placeholder plus a ``BEFORE INSERT``
    trigger that replaces it (MariaDB/MySQL allow no stored function in ``DEFAULT``)."""
    from sqla_ids.types.server_functions import (
        UUID7_FUNCTION,
        uuid7_column_default_sql,
        uuid7_column_trigger_sql,
    )

    trigger_sql = uuid7_column_trigger_sql(
        connection.dialect, _quote(connection, plan.table), _quote(connection, plan.column)
    )
    triggers = []
    for sql in trigger_sql:
        match = _TRIGGER_NAME.match(sql)
        if match is None:  # pragma: no cover - the types layer's DDL changed shape
            raise refuse(f"cannot read the trigger name from {sql!r}")
        trigger = match.group(1)
        if len(trigger.strip("`")) > MAX_IDENTIFIER_CHARS:
            raise refuse(
                f"trigger name {trigger} is longer than 64 characters; pass"
                " server_default=False (and fill the key from the client) or rename the table"
            )
        triggers.append(trigger)
    return NewKeyDefault(
        "uuid7_function",
        function=UUID7_FUNCTION,
        sql=uuid7_column_default_sql(connection.dialect),
        trigger_sql=trigger_sql,
        triggers=triggers,
    )


def find_dependents(
    connection: Connection,
    inspector: sa.Inspector,
    table: str,
    column: str,
    affected: dict[str, set[str]],
) -> list[Dependent]:
    """Indexes, unique keys and child primary keys over affected columns, each with
    the clause that recreates it exactly: ``ADD`` and the line ``SHOW CREATE
    TABLE`` prints for it (prefix lengths, order, type, comment as they were)."""
    deps: list[Dependent] = []
    for t, cols in sorted(affected.items()):
        rows = connection.execute(
            sa.text(
                "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
                " ORDER BY INDEX_NAME = 'PRIMARY' DESC, INDEX_NAME, SEQ_IN_INDEX"
            ),
            {"t": t},
        ).all()
        indexes: dict[str, list[Any]] = {}
        for row in rows:
            indexes.setdefault(row[0], []).append(row)
        lines = _create_lines(connection, t)
        for name, parts in indexes.items():
            ix_cols = [p[2] for p in parts]
            if not cols & set(ix_cols) or (t == table and name == "PRIMARY"):
                continue
            kind = "primary" if name == "PRIMARY" else ("index" if parts[0][1] else "unique")
            deps.append(Dependent(t, name, kind, ix_cols, "ADD " + _index_line(lines, name)))
    return deps


def _index_line(lines: list[str], name: str) -> str:
    """The ``SHOW CREATE TABLE`` line of index ``name``."""
    if name == "PRIMARY":
        wanted: tuple[str, ...] = ("PRIMARY KEY ",)
    else:
        quoted = "`" + name.replace("`", "``") + "` "
        wanted = tuple(f"{kind}KEY {quoted}" for kind in ("", "UNIQUE ", "FULLTEXT ", "SPATIAL "))
    for line in lines:
        if line.startswith(wanted):
            return line
    raise refuse(f"cannot find index {name} in SHOW CREATE TABLE")


def key_default(connection: Connection, plan: PkMigrationPlan) -> OldKeyDefault:
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
        return OldKeyDefault("auto_increment", counter=int(next_value or 1))
    return OldKeyDefault()


def table_sql(connection: Connection, plan: PkMigrationPlan) -> dict[str, list[str]]:
    """Not needed: objects are recreated from the reflected plan."""
    return {}


def _create_lines(connection: Connection, table: str) -> list[str]:
    """The column and index lines of ``SHOW CREATE TABLE``."""
    create = str(
        connection.exec_driver_sql(f"SHOW CREATE TABLE {_quote(connection, table)}").one()[1]
    )
    return [line.strip().rstrip(",") for line in create.split("\n")[1:-1]]


def column_definitions(connection: Connection, plan: PkMigrationPlan) -> list[ColumnDefinition]:
    """Each converted column exactly as ``SHOW CREATE TABLE`` prints it, the column
    before it and its comment, to put it back where and as it was."""
    result = []
    for table in plan.affected_tables:
        lines = _create_lines(connection, table)
        rows = connection.execute(
            sa.text(
                "SELECT COLUMN_NAME, COLUMN_COMMENT FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t ORDER BY ORDINAL_POSITION"
            ),
            {"t": table},
        ).all()
        names = [r[0] for r in rows]
        comments: dict[str, str] = {r[0]: r[1] for r in rows}
        for column in plan.columns_of(table):
            # SHOW CREATE TABLE quotes every name, doubling backticks inside.
            head = "`" + column.replace("`", "``") + "` "
            line = next((ln for ln in lines if ln.startswith(head)), None)
            if line is None:
                raise refuse(f"cannot find {table}.{column} in SHOW CREATE TABLE", plan.table)
            index = names.index(column)
            after = names[index - 1] if index else None
            result.append(ColumnDefinition(table, column, line, after, comments[column] or ""))
    return result


def preserved_columns(connection: Connection, table: str) -> tuple[str, ...]:
    """Columns with ``ON UPDATE CURRENT_TIMESTAMP``: each ``UPDATE`` of the migration
    assigns them to themselves, so they keep their values."""
    rows = connection.execute(
        sa.text(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = :t AND LOWER(EXTRA) LIKE '%on update%' ORDER BY ORDINAL_POSITION"
        ),
        {"t": table},
    ).scalars()
    return tuple(rows)


def next_old_key(connection: Connection, plan: PkMigrationPlan) -> Any:
    """No sequence object: fresh old keys are numbered after the maximum."""
    return None


def uuid_type_sql(connection: Connection) -> str:
    """The UUID column type, as the plugin's ``UUIDv7`` type stores it on this server."""
    from sqla_ids.migration.mapping import uuid_type

    return str(uuid_type().compile(dialect=connection.dialect))


Step = tuple[str, str | None, str]  # (table whose temp column proves it's pending, column, sql)


class Swap(strategies.Strategy):
    """Fill temporary columns, then swap them in, one recorded step at a time."""

    transactional = False

    def upgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Temporary UUID columns filled through the mapping, then swapped in."""
        if not step.startswith("swap"):
            uuid_sql = uuid_type_sql(connection)
            fills = [self._add_temp(connection, plan, t, c, uuid_sql) for t, c in plan.targets()]
            strategies.fill(connection, plan, fills, "old_key", "new_key")
            strategies.verify_filled(connection, plan, fills, "old_key", "new_key")
            step = "swap:0"
            state.save(connection, plan, step)
        _run_steps(connection, plan, upgrade_steps(connection, plan), step)

    def downgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Temporary old-type columns of the references filled, then swapped in; the
        key comes back from its old-key column."""
        if not step.startswith("down-swap"):
            fills = []
            for table, column in plan.targets()[1:]:
                ref = next(r for r in plan.references if (r.table, r.column) == (table, column))
                fills.append(self._add_temp(connection, plan, table, column, ref.type_sql))
            strategies.fill(connection, plan, fills, "new_key", "old_key")
            strategies.verify_filled(connection, plan, fills, "new_key", "old_key")
            step = "down-swap:0"
            state.save(connection, plan, step)
        _run_steps(connection, plan, downgrade_steps(connection, plan), step)

    @staticmethod
    def _add_temp(
        connection: Connection, plan: PkMigrationPlan, table: str, column: str, type_sql: str
    ) -> Fill:
        q = connection.dialect.identifier_preparer.quote
        temp = plan.temp_column(table, column)
        execute_sql(
            connection, f"ALTER TABLE {q(table)} ADD COLUMN IF NOT EXISTS {q(temp)} {type_sql}"
        )
        return Fill(table, column, temp, keep=preserved_columns(connection, table))


def _run_steps(connection: Connection, plan: PkMigrationPlan, steps: list[Step], step: str) -> None:
    """Run the swap statements, recording progress so a re-run skips what was done."""
    start = int(step.split(":")[1]) if ":" in step else 0
    prefix = step.split(":")[0]
    for index, (table, marker, sql) in enumerate(steps):
        if index < start:
            continue
        if marker is None or marker in columns(connection, sa.inspect(connection), table):
            try:
                execute_sql(connection, sql)
            except sa.exc.DBAPIError as error:
                view = next((v for v in plan.views if v.create_sql == sql), None)
                if view is None:
                    raise
                raise strategies.view_error(view, error) from error
        # else: already applied by an interrupted run (its temporary column is gone)
        state.save(connection, plan, f"{prefix}:{index + 1}")


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
    q = connection.dialect.identifier_preparer.quote
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
    q = connection.dialect.identifier_preparer.quote
    deps = [d for d in plan.dependents if d.table == table]
    drops = ["DROP PRIMARY KEY" if d.kind == "primary" else f"DROP INDEX {q(d.name)}" for d in deps]
    adds = [str(d.definition) for d in deps]
    return f"ALTER TABLE {q(table)} " + ", ".join(drops + columns_sql + adds)


def upgrade_steps(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """Per-table swap statements, each paired with the temp column it removes."""
    q = connection.dialect.identifier_preparer.quote
    uuid_sql = uuid_type_sql(connection)
    drops, adds = _fk_statements(connection, plan)
    steps: list[Step] = [("", None, v.drop_sql) for v in reversed(plan.views)]
    steps += [("", None, s) for s in drops]
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
        steps.append((table, marker, _table_alter(connection, plan, table, clauses)))
        if table == plan.table:  # idempotent (IF NOT EXISTS), so safe on a resumed run
            steps += [("", None, sql) for sql in plan.new_default.trigger_sql]
    steps += [("", None, s) for s in adds]
    steps += [("", None, v.create_sql) for v in plan.views]
    return steps


def downgrade_steps(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """Per-table statements restoring the old keys, each paired with its marker column."""
    q = connection.dialect.identifier_preparer.quote
    drops, adds = _fk_statements(connection, plan)
    steps: list[Step] = [("", None, v.drop_sql) for v in reversed(plan.views)]
    steps += [("", None, s) for s in drops]
    # The trigger writes UUIDs into the key: it goes before the key is integer again.
    steps += [("", None, f"DROP TRIGGER IF EXISTS {t}") for t in plan.new_default.triggers]
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
        steps.append((table, marker, _table_alter(connection, plan, table, clauses)))
    steps += [("", None, s) for s in adds]
    if plan.default.kind == "auto_increment":
        steps.append(
            (
                "",
                None,
                f"ALTER TABLE {q(plan.table)} AUTO_INCREMENT = {int(plan.default.counter or 1)}",
            )
        )
    steps += [("", None, v.create_sql) for v in plan.views]
    return steps


class MySQLMigration(MigrationDialect):
    """MySQL and MariaDB: filled temporary columns swapped in, step by step."""

    identifier_quote: ClassVar[str] = IDENTIFIER_QUOTE
    strategy: ClassVar[strategies.Strategy] = Swap()
    primary_key = staticmethod(primary_key)
    columns = staticmethod(columns)
    foreign_keys = staticmethod(foreign_keys)
    find_references = staticmethod(find_references)
    resolve_inheritance = staticmethod(resolve_inheritance)
    identifier_limit = staticmethod(identifier_limit)
    column_type_sql = staticmethod(column_type_sql)
    find_blockers = staticmethod(find_blockers)
    find_views = staticmethod(find_views)
    find_routines = staticmethod(find_routines)
    find_dependents = staticmethod(find_dependents)
    key_default = staticmethod(key_default)
    uuid7_key_default = staticmethod(uuid7_key_default)
    table_sql = staticmethod(table_sql)
    column_definitions = staticmethod(column_definitions)
    preserved_columns = staticmethod(preserved_columns)
    next_old_key = staticmethod(next_old_key)


class MariaDBMigration(MySQLMigration):
    """MariaDB: MySQL's migration plus the online mode (:mod:`.online`)."""

    online: ClassVar[strategies.OnlineStrategy | None] = MariaDBOnline()
