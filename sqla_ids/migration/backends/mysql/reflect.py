"""MariaDB/MySQL: what the key migration reads from ``information_schema``.

SQLAlchemy's MySQL inspector parses ``SHOW CREATE TABLE`` and gets names
containing backticks wrong (doubled, or the foreign key skipped), so the
catalog is read directly. Each converted column's definition is recorded as
``SHOW CREATE TABLE`` prints it, with its position, to put it back byte for
byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect

# (re-exported: the planner asks for privileges with the rest of the catalog)
from sqla_ids.dialects.sql import query_sql, quote_name, text_sql
from sqla_ids.migration.backends.mysql.privileges import (
    missing_privileges as missing_privileges,
)
from sqla_ids.migration.core import analysis
from sqla_ids.migration.core.mapping import RawType, uuid_type
from sqla_ids.migration.core.model import (
    Blockers,
    ColumnDefinition,
    Dependent,
    NewKeyDefault,
    OldKeyDefault,
    ParkedTrigger,
    PkMigrationPlan,
    Reference,
    Routine,
    View,
    refuse,
)
from sqla_ids.migration.core.names import is_object_name
from sqla_ids.migration.core.reflected import Inspector

IDENTIFIER_QUOTE = "`"
#: Longest table/column/index name MariaDB and MySQL accept (characters).
MAX_IDENTIFIER_CHARS = 64

_INTEGER_TYPES = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}
_TEXT_TYPES = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}


class TableSkipped(Exception):
    """``information_schema`` left a table out: it could not get the table's
    metadata lock at once (see :func:`catalog_rows`). Carries MariaDB's own error
    number (1205, ER_LOCK_WAIT_TIMEOUT) and message, so the online runner retries
    the step as it does any lock wait."""


def catalog_rows(
    connection: Connection, sql: str, params: dict[str, Any] | None = None
) -> list[tuple[Any, ...]]:
    """The rows of an ``information_schema`` query -- or a lock timeout.

    The online mode's sessions never wait for a metadata lock
    (``lock_wait_timeout = 0``), and under that setting MariaDB answers an
    ``information_schema`` query about a table whose exclusive metadata lock
    someone holds (an ``ALTER`` ending, a ``TRUNCATE``, a ``RENAME``, an
    ``ALTER ... LOCK=EXCLUSIVE``) by leaving the table out, with only a warning
    1205 (measured on MariaDB 10.11): a table with no columns, indexes, foreign
    keys or triggers, from which a step would build the wrong statements (a
    child's swap skipped as done). Raised as the lock timeout it is instead.
    """
    rows = [
        tuple(row)
        for row in connection.execute(text_sql(connection.dialect, sql), params or {}).all()
    ]
    for _level, code, message in query_sql(connection, "SHOW WARNINGS").all():
        if int(code) == _LOCK_WAIT_TIMEOUT:
            raise sa.exc.OperationalError(sql, params, TableSkipped(int(code), str(message)))
    return rows


# ER_LOCK_WAIT_TIMEOUT: what information_schema warns when it leaves a table out.
_LOCK_WAIT_TIMEOUT = 1205


def _quote(connection: Connection, name: str) -> str:
    return quote_name(connection.dialect, name)


def qualified(connection: Connection, table: str) -> str:
    """```db`.`table``` of a table of the current database, each part quoted:
    messages name objects the way SQL would."""
    db = query_sql(connection, "SELECT DATABASE()").scalar_one()
    return f"{_quote(connection, str(db))}.{_quote(connection, table)}"


def primary_key(
    connection: Connection, inspector: Inspector, table: str
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


def columns(connection: Connection, inspector: Inspector, table: str) -> dict[str, Any]:
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


def foreign_keys(connection: Connection, inspector: Inspector) -> list[dict[str, Any]]:
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
    connection: Connection, inspector: Inspector, table: str, column: str
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
            db = query_sql(connection, "SELECT DATABASE()").scalar_one()
            q = f"{_quote(connection, str(db))}.{_quote(connection, t)}"
            blockers.add(
                f"table {q} is partitioned (not supported on MariaDB/MySQL); remove its"
                f" partitioning first (ALTER TABLE {q} REMOVE PARTITIONING) and partition it"
                " again after"
            )


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
    connection: Connection, inspector: Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """CHECK constraints and generated columns that use an affected column (views:
    :func:`find_views`; ``UPDATE`` triggers: :func:`update_triggers`)."""
    problems: list[str] = []
    db = _quote(connection, str(query_sql(connection, "SELECT DATABASE()").scalar_one()))
    q = partial(_quote, connection)
    checks = connection.execute(
        sa.text(
            "SELECT CONSTRAINT_NAME, TABLE_NAME, CHECK_CLAUSE"
            " FROM information_schema.CHECK_CONSTRAINTS"
            " WHERE CONSTRAINT_SCHEMA = DATABASE() ORDER BY 1"
        )
    ).all()
    for name, t, clause in checks:
        if t in affected and analysis.mentions(str(clause), sorted(affected[t]), IDENTIFIER_QUOTE):
            problems.append(
                f"check constraint {q(name)} on {db}.{q(t)} uses"
                f" {', '.join(map(q, sorted(affected[t])))}; drop it first (ALTER TABLE"
                f" {db}.{q(t)} DROP CONSTRAINT {q(name)}) and recreate it for the UUID column"
                " after"
            )
    generated = connection.execute(
        sa.text(
            "SELECT TABLE_NAME, COLUMN_NAME, GENERATION_EXPRESSION FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND GENERATION_EXPRESSION IS NOT NULL"
            " AND GENERATION_EXPRESSION <> ''"
        )
    ).all()
    for t, name, expression in generated:
        if t in affected and analysis.mentions(str(expression), sorted(affected[t]), "`"):
            problems.append(
                f"generated column {q(name)} on {db}.{q(t)} uses"
                f" {', '.join(map(q, sorted(affected[t])))}; drop it first (ALTER TABLE"
                f" {db}.{q(t)} DROP COLUMN {q(name)}) and add it again for the UUID column after"
            )
    return problems


def update_triggers(connection: Connection, affected: dict[str, set[str]]) -> list[ParkedTrigger]:
    """The application's ``UPDATE`` triggers on the affected tables, each with its
    exact definition, in the order they fire: the migration rewrites every row,
    MariaDB cannot disable a trigger, and a trigger setting ``last_update`` or
    writing an audit row would take the rewrite for an application update. The
    offline mode drops them while it writes and creates them again after; the
    online mode guards them (the application's updates need them meanwhile)."""
    rows = connection.execute(
        sa.text(
            "SELECT TRIGGER_NAME, EVENT_OBJECT_TABLE, ACTION_STATEMENT, SQL_MODE,"
            " ACTION_TIMING, DEFINER"
            " FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()"
            " AND EVENT_MANIPULATION = 'UPDATE'"
            " ORDER BY EVENT_OBJECT_TABLE, ACTION_TIMING DESC, ACTION_ORDER"
        )
    ).all()
    found = []
    for name, table, statement, sql_mode, timing, definer in rows:
        if table not in affected or _own_trigger(name, statement):
            continue
        # Its original statement: the body as written, definer, timing, event.
        create = (
            query_sql(connection, f"SHOW CREATE TRIGGER {_quote(connection, name)}")
            .mappings()
            .one()["SQL Original Statement"]
        )
        found.append(
            ParkedTrigger(
                name, table, str(create), str(sql_mode), str(timing), str(statement), str(definer)
            )
        )
    return found


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
    inspector: Inspector,
    affected: dict[str, set[str]],
    blockers: Blockers | None = None,
    *,
    refresh_populated: bool = False,
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
        create = str(query_sql(connection, f"SHOW CREATE VIEW {q}").one()[1])
        db = query_sql(connection, "SELECT DATABASE()").scalar_one()
        views.append(
            View(
                name=view,
                label=f"{_quote(connection, str(db))}.{q}",
                depends_on=depends_on,
                create_sql=re.sub(r"^CREATE ", "CREATE OR REPLACE ", create, count=1),
                drop_sql=f"DROP VIEW IF EXISTS {q}",
            )
        )
    return _bases_first(connection, views, {str(v): str(d or "") for v, d in rows})


def _bases_first(
    connection: Connection, views: list[View], definitions: dict[str, str]
) -> list[View]:
    """``views`` ordered so each comes after the views it reads (the plan creates
    them in this order and drops them in the reverse one): ``CREATE VIEW`` fails
    on a view it reads that does not exist yet (MySQL's ``employees`` sample:
    ``current_dept_emp`` reads ``dept_emp_latest_date``). MariaDB 10.x has no
    catalog of view dependencies; the stored definitions name every table and
    view qualified with the database, as `` `db`.`name` ``, which is looked for
    (a backtick after it would make it part of a longer quoted name)."""
    database = str(connection.execute(sa.text("SELECT DATABASE()")).scalar())
    prefix = "`" + database.replace("`", "``") + "`.`"
    names = [v.name for v in views]
    reads = {
        v.name: {
            other
            for other in names
            if other != v.name
            and re.search(
                re.escape(prefix + other.replace("`", "``") + "`") + "(?!`)",
                definitions.get(v.name, ""),
            )
        }
        for v in views
    }
    ordered: list[View] = []
    placed: set[str] = set()
    pending = list(views)  # by name: the order when nothing depends on anything
    while pending:
        ready = [v for v in pending if reads[v.name] <= placed] or pending[:1]  # no cycles
        for view in ready:
            ordered.append(view)
            placed.add(view.name)
        pending = [v for v in pending if v.name not in placed]
    return ordered


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
    inspector: Inspector,
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
        lines = create_lines(connection, t)
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
    """Per affected table, its index lines as ``SHOW CREATE TABLE`` prints them, in
    that order: the swaps drop and re-add indexes, which the server then lists
    after the others; re-adding every index that followed the first one rebuilt,
    in this order, keeps ``SHOW CREATE TABLE`` as it was (:func:`key_lines`)."""
    return {t: key_lines(connection, t) for t in plan.affected_tables}


# An index line of SHOW CREATE TABLE: ``PRIMARY KEY (...)`` or ``[UNIQUE |FULLTEXT
# |SPATIAL |VECTOR ]KEY `name` (...)``, the name quoted with backticks doubled inside.
_KEY_LINE = re.compile(
    r"(?:PRIMARY KEY |(?:UNIQUE |FULLTEXT |SPATIAL |VECTOR )?KEY `((?:[^`]|``)+)` )"
)


def comment_sql(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """None: an index's ``COMMENT`` is part of its ``SHOW CREATE TABLE`` line, which the
    migration puts back (:func:`table_sql`)."""
    return []


# One part of an index line's column list: `name`, a prefix length, an order, then
# the separator or the list's end.
_KEY_PART = re.compile(r"`((?:[^`]|``)+)`(\(\d+\))?( DESC| ASC)?([,)])")


def index_clause(line: str, name: str, column: Callable[[str], str]) -> str | None:
    """``ADD`` the index an index line of ``SHOW CREATE TABLE`` defines, named
    ``name``, over the columns ``column`` gives for its own -- with all the
    rest of the line: prefix lengths, orders, ``COMMENT``, ``USING``,
    ``IGNORED``. ``None`` for a line this does not read (a primary key, an
    expression), which the caller builds from the columns instead."""
    match = _KEY_LINE.match(line)
    if match is None or match.group(1) is None:
        return None
    kind = line[: match.start(1) - 1]  # "UNIQUE KEY ", "KEY "...
    rest = line[match.end() :]
    if not rest.startswith("("):
        return None
    parts, at = [], 1
    while True:
        part = _KEY_PART.match(rest, at)
        if part is None:
            return None
        own = part.group(1).replace("``", "`")
        quoted = "`" + column(own).replace("`", "``") + "`"
        parts.append(quoted + (part.group(2) or "") + (part.group(3) or ""))
        at = part.end()
        if part.group(4) == ")":
            break
    quoted_name = "`" + name.replace("`", "``") + "`"
    return f"ADD {kind}{quoted_name} ({','.join(parts)}){rest[at:]}"


def key_name(line: str) -> str | None:
    """The index an index line of ``SHOW CREATE TABLE`` defines (``PRIMARY`` for the
    primary key); ``None`` for another line (a column, a constraint)."""
    match = _KEY_LINE.match(line)
    if match is None:
        return None
    return "PRIMARY" if match.group(1) is None else match.group(1).replace("``", "`")


def key_lines(connection: Connection, table: str) -> list[str]:
    """``table``'s index lines of ``SHOW CREATE TABLE``, in the order it prints them
    (the order the server keeps: primary, unique, others, each as created)."""
    names = set(
        connection.execute(
            sa.text(
                "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
            ),
            {"t": table},
        ).scalars()
    )
    return [ln for ln in create_lines(connection, table) if key_name(ln) in names]


def create_lines(connection: Connection, table: str) -> list[str]:
    """The column and index lines of ``SHOW CREATE TABLE``."""
    create = str(query_sql(connection, f"SHOW CREATE TABLE {_quote(connection, table)}").one()[1])
    return [line.strip().rstrip(",") for line in create.split("\n")[1:-1]]


def column_definitions(connection: Connection, plan: PkMigrationPlan) -> list[ColumnDefinition]:
    """Each converted column exactly as ``SHOW CREATE TABLE`` prints it, the column
    before it and its comment, to put it back where and as it was."""
    result = []
    for table in plan.affected_tables:
        lines = create_lines(connection, table)
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


def uuid_type_sql(bind: Connection | Dialect) -> str:
    """The UUID column type, as the plugin's ``UUIDv7`` type stores it on this server."""
    dialect = bind if isinstance(bind, Dialect) else bind.dialect
    return str(uuid_type().compile(dialect=dialect))
