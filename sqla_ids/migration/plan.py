"""What a key migration will do: the plan, reflected before anything changes.

``plan_pk_migration`` reflects the table, its primary key, every reference to
it (declared foreign keys, composite or self-referencing, and the plain
columns named in ``extra_references``), the indexes and constraints on the
referencing columns and the key's default, and refuses -- with a message
naming the object -- whatever the migration could not carry over safely.
The plan is plain data (JSON-serialisable), stored with the migration so that
a resumed run and ``alembic downgrade`` use exactly what was reflected.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationRefusedError

#: Suffix of the column that keeps the old key values (``id`` -> ``id_old``).
DEFAULT_OLD_SUFFIX = "_old"
#: Suffix of the mapping table (``orders`` -> ``orders_uuid7_map``).
MAPPING_SUFFIX = "_uuid7_map"
#: Suffix of the temporary columns that receive the new values before the swap.
NEW_SUFFIX = "__uuid7_new"
#: Suffix of the temporary columns that receive restored values on downgrade.
RESTORE_SUFFIX = "__uuid7_restore"


@dataclass
class Reference:
    """A column that points at the migrated key (declared FK or a plain column)."""

    table: str
    column: str
    nullable: bool
    type_sql: str
    constraint: str | None = None
    columns: list[str] = field(default_factory=list)
    referred_columns: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    definition: str | None = None


@dataclass
class Dependent:
    """An index or constraint on an affected column, dropped and recreated as it was."""

    table: str
    name: str
    kind: str  # "primary", "unique" or "index"
    columns: list[str]
    definition: str | None = None


@dataclass
class View:
    """A view over an affected column, dropped before the change and recreated after.

    ``create_sql`` is the view's own definition as the database reports it
    (``pg_get_viewdef``, ``SHOW CREATE VIEW``, ``sqlite_master.sql``); the
    column names are the same after the swap, so it works on the new keys.
    ``after_sql`` restores what the ``CREATE`` does not carry (PostgreSQL:
    owner, grants, comment).
    """

    name: str
    depends_on: str
    create_sql: str
    drop_sql: str
    after_sql: list[str] = field(default_factory=list)


@dataclass
class PkMigrationPlan:
    """Everything the migration of one primary key will touch, reflected up front."""

    dialect: str
    table: str
    column: str
    pk_name: str | None
    key_kind: str  # "integer" or "string"
    key_type_sql: str
    old_column: str
    mapping_table: str
    row_count: int
    references: list[Reference] = field(default_factory=list)
    dependents: list[Dependent] = field(default_factory=list)
    default: dict[str, Any] = field(default_factory=dict)
    table_sql: dict[str, list[str]] = field(default_factory=dict)
    timestamp_column: str | None = None
    seed: str = ""
    batch_size: int = 10_000
    keep_child_old_columns: bool = False
    drop_sequence: bool = False
    server_default: str | None = None
    base_time_ms: int = 0
    new_default: dict[str, Any] = field(default_factory=dict)
    recreate_views: bool = False
    views: list[View] = field(default_factory=list)

    @property
    def new_default_sql(self) -> str | None:
        """The ``DEFAULT`` SQL the new key column gets (``None``: no server default)."""
        sql = self.new_default.get("sql", self.server_default)
        return str(sql) if sql else None

    @property
    def affected_tables(self) -> list[str]:
        """The migrated table first, then every referencing table once."""
        tables = [self.table]
        for ref in self.references:
            if ref.table not in tables:
                tables.append(ref.table)
        return tables

    def columns_of(self, table: str) -> list[str]:
        """The affected columns of ``table`` (the key itself and/or references)."""
        cols = [self.column] if table == self.table else []
        return cols + [r.column for r in self.references if r.table == table]

    def affected_columns(self) -> dict[str, set[str]]:
        """Every column the migration changes or drops, per table (views over them
        must go during the change); includes the old-key columns for the downgrade."""
        affected: dict[str, set[str]] = {self.table: {self.column, self.old_column}}
        for ref in self.references:
            cols = affected.setdefault(ref.table, set())
            cols.add(ref.column)
            if self.keep_child_old_columns:
                cols.add(ref.column + DEFAULT_OLD_SUFFIX)
        return affected

    def to_json(self) -> str:
        """Serialise the plan (stored with the migration's state)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> PkMigrationPlan:
        """Rebuild a plan stored by :meth:`to_json`."""
        data = json.loads(text)
        data["references"] = [Reference(**r) for r in data["references"]]
        data["dependents"] = [Dependent(**d) for d in data["dependents"]]
        data["views"] = [View(**v) for v in data.get("views", [])]
        return cls(**data)

    def describe(self) -> str:
        """A human-readable dry run: every object the migration will change."""
        lines = [
            f"migrate {self.table}.{self.column} ({self.key_type_sql}, {self.row_count} rows)"
            f" to UUIDv7 on {self.dialect}",
            f"  old keys kept in {self.table}.{self.old_column}"
            f" and mapping table {self.mapping_table} (old -> new)",
            "  new keys ordered like the old ones; timestamps "
            + (
                f"from {self.timestamp_column} (running maximum)"
                if self.timestamp_column
                else "synthesised from key order"
            ),
            f"  batches of {self.batch_size} rows",
        ]
        if self.default:
            lines.append(f"  key default replaced: {self.default}")
        lines.append(f"  new key default: {describe_new_default(self.new_default)}")
        for ref in self.references:
            what = f"FK {ref.constraint}" if ref.constraint else "plain reference (no FK)"
            lines.append(
                f"  rewrite {ref.table}.{ref.column} ({what}"
                + (f" {ref.definition}" if ref.definition else "")
                + ")"
            )
        for dep in self.dependents:
            lines.append(
                f"  recreate {dep.kind} {dep.name} on {dep.table}({', '.join(dep.columns)})"
            )
        for view in self.views:
            lines.append(f"  drop view {view.name} (depends on {view.depends_on}) and recreate it")
        return "\n".join(lines)


def describe_new_default(new_default: dict[str, Any]) -> str:
    """One line saying how the new key column is filled by the server, if at all."""
    kind = new_default.get("kind")
    if kind == "uuid7_function":
        how = f"DEFAULT {new_default['sql']}"
        if new_default.get("triggers"):
            how += " + BEFORE INSERT trigger " + ", ".join(new_default["triggers"])
        return f"UUIDv7 from {new_default['function']}() ({how})"
    if kind == "expression":
        return f"DEFAULT {new_default['sql']}"
    if kind == "none":
        return f"none ({new_default.get('reason', 'not asked for')})"
    return "none"


def refuse(message: str) -> MigrationRefusedError:
    """The error raised when the plan cannot be carried out safely."""
    return MigrationRefusedError(f"cannot migrate: {message}; nothing was changed")


def plan_pk_migration(
    connection: Connection,
    table: str,
    *,
    timestamp_column: str | None = None,
    old_column: str | None = None,
    mapping_table: str | None = None,
    extra_references: list[tuple[str, str]] | tuple[tuple[str, str], ...] = (),
    batch_size: int = 10_000,
    seed: str | int | None = None,
    keep_child_old_columns: bool = False,
    drop_sequence: bool = False,
    server_default: str | bool = True,
    recreate_views: bool = False,
) -> PkMigrationPlan:
    """Reflect ``table`` and everything that references its key; refuse what can't be done.

    ``server_default``: ``True`` (the default) fills the new key on the server
    with ``sqla_ids_uuid7()`` where the database can (PostgreSQL: column
    default; MariaDB/MySQL: placeholder default plus a ``BEFORE INSERT``
    trigger; SQLite: nothing, the client must supply keys); a string is used
    as the ``DEFAULT`` SQL expression instead; ``False`` sets no default.
    ``recreate_views``: drop the views over affected columns before the change
    and recreate them from their definitions after (default: refuse).

    Raises :class:`~sqla_ids.errors.MigrationRefusedError` naming the object
    (view, trigger, composite key, unsupported type, name clash…) before any
    change is made.
    """
    from sqla_ids.migration.dialects import for_dialect

    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if server_default is None or server_default == "" or not isinstance(server_default, str | bool):
        raise ValueError(
            f"server_default must be True (UUIDv7 from the server where possible), an SQL"
            f" expression, or False (no default); got {server_default!r}"
        )
    dialect = for_dialect(connection.dialect.name)
    inspector = sa.inspect(connection)
    tables = set(inspector.get_table_names())
    if table not in tables:
        raise refuse(f"table {table!r} does not exist")
    pk = inspector.get_pk_constraint(table)
    pk_cols = pk.get("constrained_columns") or []
    if len(pk_cols) != 1:
        raise refuse(
            f"table {table!r} has a primary key of {len(pk_cols)} columns {pk_cols};"
            " only a single-column key can become a UUIDv7"
        )
    column = pk_cols[0]
    columns = {c["name"]: c for c in inspector.get_columns(table)}
    key_type = columns[column]["type"]
    if isinstance(key_type, sa.Uuid):
        raise refuse(f"{table}.{column} is already a UUID column")
    if isinstance(key_type, sa.Integer):
        key_kind = "integer"
    elif isinstance(key_type, sa.String):
        key_kind = "string"
    else:
        raise refuse(
            f"{table}.{column} has type {key_type}; only integer and char/text keys are supported"
        )
    old_column = old_column or f"{column}{DEFAULT_OLD_SUFFIX}"
    mapping_table = mapping_table or f"{table}{MAPPING_SUFFIX}"
    for name in (old_column, f"{column}{NEW_SUFFIX}"):
        if name in columns:
            raise refuse(f"column {table}.{name} already exists")
    if mapping_table in tables:
        raise refuse(f"mapping table {mapping_table!r} already exists")
    if timestamp_column is not None and timestamp_column not in columns:
        raise refuse(f"timestamp column {table}.{timestamp_column} does not exist")

    references = dialect.find_references(connection, inspector, table, column)
    declared = {(r.table, r.column) for r in references}
    for ref_table, ref_column in extra_references:
        if ref_table not in tables:
            raise refuse(f"extra reference table {ref_table!r} does not exist")
        ref_cols = {c["name"]: c for c in inspector.get_columns(ref_table)}
        if ref_column not in ref_cols:
            raise refuse(f"extra reference column {ref_table}.{ref_column} does not exist")
        if (ref_table, ref_column) in declared:
            raise refuse(f"{ref_table}.{ref_column} already has a foreign key to {table}")
        references.append(
            Reference(
                table=ref_table,
                column=ref_column,
                nullable=bool(ref_cols[ref_column]["nullable"]),
                type_sql=dialect.column_type_sql(connection, ref_table, ref_column),
            )
        )
    affected: dict[str, set[str]] = {}
    for t, c in [(table, column)] + [(r.table, r.column) for r in references]:
        affected.setdefault(t, set()).add(c)
    for t, cols in affected.items():
        t_columns = {c["name"] for c in inspector.get_columns(t)}
        for c in cols:
            for suffix in (NEW_SUFFIX, RESTORE_SUFFIX):
                if f"{c}{suffix}" in t_columns:
                    raise refuse(f"column {t}.{c}{suffix} already exists")
            if keep_child_old_columns and t != table and f"{c}{DEFAULT_OLD_SUFFIX}" in t_columns:
                raise refuse(f"column {t}.{c}{DEFAULT_OLD_SUFFIX} already exists")
    _refuse_other_foreign_keys(inspector, table, column, affected)
    views = dialect.find_views(connection, inspector, affected)
    blockers = [
        f"view {v.name} depends on {v.depends_on}; drop it first and recreate it after"
        " (or pass recreate_views=True)"
        for v in views
        if not recreate_views
    ]
    blockers += dialect.find_blockers(connection, inspector, table, affected)
    if blockers:
        raise refuse("; ".join(blockers))
    dependents = dialect.find_dependents(connection, inspector, table, column, affected)
    _refuse_dangling(connection, table, column, references)

    row_count = connection.execute(
        sa.select(sa.func.count()).select_from(sa.table(table))
    ).scalar_one()
    plan = PkMigrationPlan(
        dialect=connection.dialect.name,
        table=table,
        column=column,
        pk_name=pk.get("name"),
        key_kind=key_kind,
        key_type_sql=dialect.column_type_sql(connection, table, column),
        old_column=old_column,
        mapping_table=mapping_table,
        row_count=int(row_count),
        references=references,
        dependents=dependents,
        timestamp_column=timestamp_column,
        seed=str(seed) if seed is not None else secrets.token_hex(16),
        batch_size=batch_size,
        keep_child_old_columns=keep_child_old_columns,
        drop_sequence=drop_sequence,
        server_default=server_default if isinstance(server_default, str) else None,
        base_time_ms=int(time.time() * 1000),
        recreate_views=recreate_views,
        views=views,
    )
    plan.default = dialect.key_default(connection, plan)
    if isinstance(server_default, str):
        plan.new_default = {"kind": "expression", "sql": server_default}
    elif server_default:
        plan.new_default = dialect.uuid7_key_default(connection, plan)
    else:
        plan.new_default = {"kind": "none", "reason": "server_default=False"}
    plan.table_sql = dialect.table_sql(connection, plan)
    return plan


def _refuse_other_foreign_keys(
    inspector: sa.Inspector, table: str, column: str, affected: dict[str, set[str]]
) -> None:
    """Refuse references we would break: an affected column that is also part of
    an FK to another table, or that another table's FK points at."""
    for t in inspector.get_table_names():
        for fk in inspector.get_foreign_keys(t):
            referred = fk["referred_table"]
            if referred == table and column in fk["referred_columns"]:
                continue
            name = fk.get("name") or "(unnamed)"
            for c in fk["constrained_columns"]:
                if c in affected.get(t, set()):
                    raise refuse(
                        f"{t}.{c} is also part of foreign key {name} to {referred};"
                        " a column cannot hold both keys"
                    )
            for c in fk["referred_columns"]:
                if c in affected.get(referred, set()):
                    raise refuse(
                        f"foreign key {name} on {t} references {referred}.{c}, which would"
                        f" change type; migrate {referred}'s key on its own first"
                    )


def _refuse_dangling(
    connection: Connection, table: str, column: str, references: list[Reference]
) -> None:
    """A value with no parent row has no new key: refuse rather than lose it. Plain
    references can hold such values, and so can declared FKs where enforcement was
    off (SQLite's default, ``FOREIGN_KEY_CHECKS=0``, ``NOT VALID``)."""
    parent = sa.table(table, sa.column(column)).alias("parent")  # may be the child itself
    for ref in references:
        child = sa.table(ref.table, sa.column(ref.column))
        dangling = connection.execute(
            sa.select(sa.func.count())
            .select_from(child)
            .where(
                child.c[ref.column].is_not(None),
                ~sa.exists().where(parent.c[column] == child.c[ref.column]),
            )
        ).scalar_one()
        if dangling:
            raise refuse(
                f"{ref.table}.{ref.column} holds {dangling} value(s) with no matching"
                f" {table}.{column}"
            )
