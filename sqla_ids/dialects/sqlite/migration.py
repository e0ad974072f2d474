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

from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateTable

from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration import analysis, strategies
from sqla_ids.migration import reflected as _reflected
from sqla_ids.migration.dialect import MigrationDialect
from sqla_ids.migration.mapping import RawType, uuid_type
from sqla_ids.migration.model import (
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
from sqla_ids.migration.progress import Progress

IDENTIFIER_QUOTE = '"'
_OLD_PREFIX = "_sqla_ids_old_"


def _quote(connection: Connection, name: str) -> str:
    return str(connection.dialect.identifier_preparer.quote(name))


def check_foreign_keys_off(connection: Connection) -> None:
    """Turn FK enforcement off if possible; refuse when it is on inside a transaction."""
    if not connection.exec_driver_sql("PRAGMA foreign_keys").scalar():
        return
    driver = connection.connection.driver_connection
    if getattr(driver, "in_transaction", False):
        raise MigrationRefusedError(
            "cannot migrate: SQLite foreign keys are enforced (PRAGMA foreign_keys=ON) and a"
            " transaction is open, where PRAGMA foreign_keys=OFF has no effect; rebuilding"
            " the tables would fire ON DELETE CASCADE. Run PRAGMA foreign_keys=OFF before"
            " the migration's transaction begins (the sqla_ids env template does);"
            " nothing was changed"
        )
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")


#: Read through SQLAlchemy's inspector (see :mod:`._reflected`).
primary_key = _reflected.primary_key
columns = _reflected.columns


def foreign_keys(connection: Connection, inspector: sa.Inspector) -> list[dict[str, Any]]:
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
    for row in connection.exec_driver_sql(f"PRAGMA table_info({_quote(connection, table)})"):
        if row[1] == column:
            return str(row[2])
    raise MigrationRefusedError(f"cannot migrate: column {table}.{column} does not exist")


def find_references(
    connection: Connection, inspector: sa.Inspector, table: str, column: str
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


def find_blockers(
    connection: Connection, inspector: sa.Inspector, table: str, affected: dict[str, set[str]]
) -> list[str]:
    """Nothing beyond the shared checks: triggers are carried over by the rebuild
    (those using a migrated column are acknowledged like routines)."""
    return []


def find_routines(connection: Connection, affected: dict[str, set[str]]) -> list[Routine]:
    """Triggers whose body uses a migrated column (through ``NEW``/``OLD`` of the
    table they are on, or by naming the table and the column)."""
    found = []
    rows = connection.exec_driver_sql(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY rowid"
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
    inspector: sa.Inspector,
    affected: dict[str, set[str]],
    blockers: Blockers | None = None,
) -> list[View]:
    """Views naming an affected table: the rebuild drops the table under them, so they
    are dropped first and recreated from their ``CREATE VIEW`` text afterwards."""
    q = connection.dialect.identifier_preparer.quote
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
    inspector: sa.Inspector,
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
    has_seq = connection.exec_driver_sql(
        "SELECT count(*) FROM sqlite_master WHERE name = 'sqlite_sequence'"
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


def _new_create_sql(connection: Connection, plan: PkMigrationPlan, table: str) -> str:
    """``CREATE TABLE`` of ``table`` with UUID key/reference columns (and the old-key column)."""
    metadata = sa.MetaData()
    metadata.reflect(connection)
    t = metadata.tables[table]
    for c in plan.columns_of(table):
        t.c[c].type = uuid_type()
        t.c[c].autoincrement = False
    if table == plan.table and plan.new_default_sql:
        # SQLite wants an expression default in parentheses.
        t.c[plan.column].server_default = sa.DefaultClause(sa.text(f"({plan.new_default_sql})"))
    t.dialect_options["sqlite"]["autoincrement"] = False
    if table == plan.table:
        t.append_column(sa.Column(plan.old_column, RawType(plan.key_type_sql), nullable=True))
    if plan.keep_child_old_columns:
        for ref in plan.references:
            if ref.table == table:
                t.append_column(sa.Column(ref.column + "_old", RawType(ref.type_sql)))
    return str(CreateTable(t).compile(dialect=connection.dialect))


def rebuild(connection: Connection, plan: PkMigrationPlan, direction: str) -> None:
    """Rebuild every affected table in ``direction`` ("upgrade" or "downgrade")."""
    q = connection.dialect.identifier_preparer.quote
    legacy = connection.exec_driver_sql("PRAGMA legacy_alter_table").scalar()
    connection.exec_driver_sql("PRAGMA legacy_alter_table=ON")
    try:
        creates = {
            t: (
                _new_create_sql(connection, plan, t)
                if direction == "upgrade"
                else plan.table_sql[t][0]
            )
            for t in plan.affected_tables
        }
        for t in plan.affected_tables:
            old = _OLD_PREFIX + t
            columns = [r[1] for r in connection.exec_driver_sql(f"PRAGMA table_info({q(t)})")]
            connection.exec_driver_sql(f"ALTER TABLE {q(t)} RENAME TO {q(old)}")
            connection.exec_driver_sql(creates[t])
            targets, sources = _copy_columns(plan, t, columns, direction, q)
            progress = Progress(f"{t}: rebuild", 0)
            copied = connection.exec_driver_sql(
                f"INSERT INTO {q(t)} ({', '.join(targets)}) SELECT {', '.join(sources)}"
                f" FROM {q(old)} AS o"
            ).rowcount
            progress.total = copied
            progress.advance(copied)
            connection.exec_driver_sql(f"DROP TABLE {q(old)}")
            for index_sql in plan.table_sql[t][1:]:
                connection.exec_driver_sql(index_sql)
        if direction == "downgrade" and plan.default.kind == "autoincrement":
            seq = plan.default.counter
            top = connection.exec_driver_sql(
                f"SELECT max({q(plan.column)}) FROM {q(plan.table)}"
            ).scalar()
            connection.exec_driver_sql(
                "UPDATE sqlite_sequence SET seq = ? WHERE name = ?",
                (max(seq or 0, top or 0), plan.table),
            )
        problems = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
        if problems:
            raise MigrationVerificationError(
                f"foreign key check failed after the rebuild: {problems[:5]}"
            )
    finally:
        connection.exec_driver_sql(f"PRAGMA legacy_alter_table={'ON' if legacy else 'OFF'}")


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


def next_old_key(connection: Connection, plan: PkMigrationPlan) -> Any:
    """No sequence: fresh old keys are numbered after the maximum."""
    return None


class Rebuild(strategies.Strategy):
    """Recreate every affected table (see the module docstring)."""

    transactional = True

    def prepare(self, connection: Connection) -> None:
        """Foreign-key enforcement off (see :func:`check_foreign_keys_off`)."""
        check_foreign_keys_off(connection)

    def upgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Rebuild the tables with UUID columns, the views dropped meanwhile."""
        strategies.drop_views(connection, plan)
        rebuild(connection, plan, "upgrade")
        strategies.recreate_views(connection, plan)

    def downgrade(self, connection: Connection, plan: PkMigrationPlan, step: str) -> None:
        """Rebuild the tables from their original SQL, the views dropped meanwhile."""
        strategies.drop_views(connection, plan)
        rebuild(connection, plan, "downgrade")
        strategies.recreate_views(connection, plan)


class SQLiteMigration(MigrationDialect):
    """SQLite: the affected tables rebuilt, in one transaction."""

    identifier_quote: ClassVar[str] = IDENTIFIER_QUOTE
    strategy: ClassVar[strategies.Strategy] = Rebuild()
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
