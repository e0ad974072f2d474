"""SQLite: what the key migration reads from ``sqlite_master`` and the pragmas."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql, quote_name, quoter
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.core import analysis
from sqla_ids.migration.core import reflected as _reflected
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
    Work,
    refuse,
)
from sqla_ids.migration.core.reflected import Inspector

IDENTIFIER_QUOTE = '"'


def _quote(connection: Connection, name: str) -> str:
    return quote_name(connection.dialect, name)


#: Read through SQLAlchemy's inspector (see :mod:`._reflected`).
primary_key = _reflected.primary_key
columns = _reflected.columns


def foreign_keys(connection: Connection, inspector: Inspector) -> list[dict[str, Any]]:
    """Every foreign key of every table (``table`` added to SQLAlchemy's dicts)."""
    return [
        {**fk, "table": t}
        for t in sorted(inspector.get_table_names())
        for fk in inspector.get_foreign_keys(t)
    ]


def resolve_inheritance(
    connection: Connection, table: str, references: list[Reference], blockers: Blockers
) -> None:
    """SQLite has no table inheritance or partitioning."""


def identifier_limit(name: str) -> int | None:
    """SQLite has no identifier length limit."""
    return None


def column_type_sql(connection: Connection, table: str, column: str) -> str:
    """The declared type of the column, as written in its ``CREATE TABLE``."""
    for row in query_sql(connection, f"PRAGMA table_info({_quote(connection, table)})"):
        if row[1] == column:
            return str(row[2])
    raise MigrationRefusedError(f"cannot migrate: column {table}.{column} does not exist")


def find_references(
    connection: Connection, inspector: Inspector, table: str, column: str
) -> list[Reference]:
    """Every FK whose referred columns include the key (``PRAGMA foreign_key_list`` order).

    The inspector pairs composite FK columns by ordinal position, so the
    referencing column is the one at the key's position.
    """
    refs: list[Reference] = []
    for t in sorted(inspector.get_table_names()):
        cols = {c["name"]: c for c in inspector.get_columns(t)}
        for fk in inspector.get_foreign_keys(t):
            if fk["referred_table"] != table or column not in fk["referred_columns"]:
                continue
            local = fk["constrained_columns"][fk["referred_columns"].index(column)]
            # SQLite's foreign keys may have no name: they live in the CREATE TABLE.
            name = fk.get("name")
            refs.append(
                Reference(
                    table=t,
                    column=local,
                    nullable=bool(cols[local]["nullable"]),
                    type_sql=column_type_sql(connection, t, local),
                    constraint=name or "(unnamed)",
                    columns=list(fk["constrained_columns"]),
                    referred_columns=list(fk["referred_columns"]),
                    options=dict(fk.get("options") or {}),
                )
            )
    return refs


def missing_privileges(connection: Connection, tables: Sequence[str], work: Work) -> list[str]:
    """None to check: SQLite has no privileges (a database file's permissions are
    the operating system's)."""
    return []


def find_blockers(
    connection: Connection, inspector: Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """Rows whose key is ``NULL`` (SQLite accepts ``NULL`` in a primary key that is
    not ``INTEGER``): they have no old key to map, and the new key is ``NOT NULL``.
    Triggers are carried over by the rebuild (those using a migrated column are
    acknowledged like routines)."""
    pk = list(inspector.get_pk_constraint(table).get("constrained_columns") or [])
    if len(pk) != 1:
        return []
    q = quoter(connection.dialect)
    where = f"FROM {q(table)} WHERE {q(pk[0])} IS NULL"
    nulls = query_sql(connection, f"SELECT count(*) {where}").scalar_one()
    if not nulls:
        return []
    # Such a table has a rowid (WITHOUT ROWID refuses NULL keys): it names the rows.
    first = query_sql(connection, f"SELECT rowid {where} ORDER BY rowid LIMIT 5").scalars()
    return [
        f"{nulls} rows of {table} have no key ({pk[0]} IS NULL, rowid"
        f" {', '.join(map(str, first))}): give each a key or delete them first"
    ]


def find_routines(connection: Connection, affected: dict[str, set[str]]) -> list[Routine]:
    """Triggers whose body uses a migrated column (through ``NEW``/``OLD`` of the
    table they are on, or by naming the table and the column)."""
    found = []
    rows = query_sql(
        connection,
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY rowid",
    ).all()
    for name, on_table, sql in rows:
        body = str(sql or "")
        uses = analysis.routine_uses(
            body, on_table if on_table in affected else None, affected, IDENTIFIER_QUOTE
        ) or analysis.routine_uses(body, on_table if on_table in affected else None, affected, "`")
        if uses:
            found.append(Routine("trigger", name, uses, body))
    return found


def column_definitions(connection: Connection, plan: PkMigrationPlan) -> list[ColumnDefinition]:
    """Not needed: the rebuild recreates each table from its own ``CREATE`` SQL."""
    return []


def preserved_columns(connection: Connection, table: str) -> tuple[str, ...]:
    """SQLite has no column that changes by itself on update."""
    return ()


def _mentioning(
    connection: Connection, kind: str, affected: dict[str, set[str]]
) -> list[tuple[str, str, str, str]]:
    """``(name, tbl_name, sql, table)`` of each view/trigger whose SQL names an
    affected table, in creation order (a view can only use views made before it)."""
    found = []
    rows = connection.exec_driver_sql(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = ? ORDER BY rowid", (kind,)
    ).all()
    for name, on_table, sql in rows:
        for t in sorted(affected):
            text = sql or ""
            if (
                on_table == t
                or analysis.mentions(text, [t], '"')
                or analysis.mentions(text, [t], "`")
                or f"[{t}]".lower() in text.lower()
            ):
                found.append((name, on_table, sql, t))
                break
    return found


def find_views(
    connection: Connection,
    inspector: Inspector,
    affected: dict[str, set[str]],
    blockers: Blockers | None = None,
    *,
    refresh_populated: bool = False,
) -> list[View]:
    """Views naming an affected table: the rebuild drops the table under them, so they
    are dropped first and recreated from their ``CREATE VIEW`` text afterwards."""
    q = quoter(connection.dialect)
    return [
        View(name=name, depends_on=t, create_sql=sql, drop_sql=f"DROP VIEW IF EXISTS {q(name)}")
        for name, _on, sql, t in _mentioning(connection, "view", affected)
    ]


def uuid7_key_default(connection: Connection, plan: PkMigrationPlan) -> NewKeyDefault:
    """No server default: SQLite's ``sqla_ids_uuid7()`` lives in the client and exists
    only on connections that registered it, so any other client could not insert."""
    return NewKeyDefault(
        "none",
        reason="SQLite functions live in the client; rows need their key from the"
        " application, e.g. uuid7_pk() in the model",
    )


def find_dependents(
    connection: Connection,
    inspector: Inspector,
    table: str,
    column: str,
    affected: dict[str, set[str]],
) -> list[Dependent]:
    """Listed for the dry run; the rebuild recreates every index from its own SQL.

    Indexes, unique constraints and child primary keys over affected columns.
    """
    deps: list[Dependent] = []
    for t, cols in affected.items():
        pk = inspector.get_pk_constraint(t)
        pk_cols = list(pk.get("constrained_columns") or [])
        if t != table and cols & set(pk_cols):
            deps.append(Dependent(t, pk.get("name") or "PRIMARY", "primary", pk_cols))
        uniques = inspector.get_unique_constraints(t)
        unique_names = {u["name"] for u in uniques}
        for u in uniques:
            if cols & set(u["column_names"]) and u["name"]:
                deps.append(Dependent(t, u["name"], "unique", list(u["column_names"])))
        for ix in inspector.get_indexes(t):
            ix_cols = [c for c in ix["column_names"] if c is not None]
            if ix.get("duplicates_constraint") or ix["name"] in unique_names:
                continue
            if cols & set(ix_cols):
                if None in ix["column_names"]:
                    raise refuse(f"expression index {ix['name']} on {t} uses the key")
                kind = "unique" if ix["unique"] else "index"
                deps.append(Dependent(t, str(ix["name"]), kind, ix_cols))
    return deps


def key_default(connection: Connection, plan: PkMigrationPlan) -> OldKeyDefault:
    """``AUTOINCREMENT`` and its ``sqlite_sequence`` value, to restore them exactly."""
    sql = connection.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (plan.table,)
    ).scalar_one()
    if "autoincrement" not in sql.lower():
        return OldKeyDefault("rowid") if plan.key_kind == "integer" else OldKeyDefault()
    has_seq = query_sql(
        connection, "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'"
    ).scalar()
    seq = None
    if has_seq:
        seq = connection.exec_driver_sql(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (plan.table,)
        ).scalar()
    return OldKeyDefault("autoincrement", counter=seq)


def table_sql(connection: Connection, plan: PkMigrationPlan) -> dict[str, list[str]]:
    """Each affected table's original ``CREATE TABLE``, then its ``CREATE INDEX`` and
    ``CREATE TRIGGER`` statements (replayed after the copy, so no trigger fires on it)."""
    result = {}
    for t in plan.affected_tables:
        rows = connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL"
            " ORDER BY type <> 'table', type = 'trigger', rowid",
            (t,),
        ).scalars()
        result[t] = list(rows)
    return result


def comment_sql(connection: Connection, plan: PkMigrationPlan) -> list[str]:
    """None: SQLite has no comments."""
    return []


def next_old_key(connection: Connection, plan: PkMigrationPlan) -> Any:
    """No sequence: fresh old keys are numbered after the maximum."""
    return None


def update_triggers(connection: Connection, affected: dict[str, set[str]]) -> list[ParkedTrigger]:
    """None set aside: the rebuild carries the triggers over (the copy's ``INSERT`` fires none)."""
    return []
