"""What a key migration will do: the plan, reflected before anything changes.

``plan_pk_migration`` reflects the table, its primary key, every reference to
it (declared foreign keys, composite or self-referencing, and the plain
columns named in ``extra_references``), the indexes and constraints on the
referencing columns and the key's default, and refuses -- with one message
naming *every* object -- whatever the migration could not carry over safely.
The plan is plain data (JSON-serialisable), stored with the migration so that
a resumed run and ``alembic downgrade`` use exactly what was reflected.

The planner is a sequence of small steps over a :class:`_Planning` context:
reflect the key, collect the references, check the names the migration will
create, collect the blockers; then the plan is assembled.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects import for_dialect
from sqla_ids.migration import analysis
from sqla_ids.migration.dialect import MigrationDialect
from sqla_ids.migration.model import (
    DEFAULT_OLD_SUFFIX,
    MAPPING_SUFFIX,
    OLD_COLUMN_COMMENT,
    TEMP_PREFIX,
    Blockers,
    ColumnDefinition,
    Dependent,
    NewKeyDefault,
    OldKeyDefault,
    PkMigrationPlan,
    Reference,
    Routine,
    View,
    name_suffix,
    refuse,
)
from sqla_ids.migration.options import PkMigrationOptions, build_options
from sqla_ids.migration.strategies import count_orphans

# Re-exported: the plan's data lives in model.py.
__all__ = [
    "DEFAULT_OLD_SUFFIX",
    "MAPPING_SUFFIX",
    "OLD_COLUMN_COMMENT",
    "TEMP_PREFIX",
    "Blockers",
    "ColumnDefinition",
    "Dependent",
    "NewKeyDefault",
    "OldKeyDefault",
    "PkMigrationPlan",
    "Reference",
    "Routine",
    "View",
    "plan_pk_migration",
    "refuse",
]


@dataclass
class _Planning:
    """What the planning steps share."""

    connection: Connection
    dialect: MigrationDialect
    inspector: sa.Inspector
    options: PkMigrationOptions
    table: str
    tables: set[str]
    blockers: Blockers = field(default_factory=Blockers)
    column: str = ""
    pk_name: str | None = None
    key_kind: str = ""
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)
    references: list[Reference] = field(default_factory=list)
    old_column: str = ""
    mapping_table: str = ""
    affected: dict[str, set[str]] = field(default_factory=dict)
    views: list[View] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def plan_pk_migration(
    connection: Connection,
    table: str,
    options: PkMigrationOptions | None = None,
    **overrides: Any,
) -> PkMigrationPlan:
    """Reflect ``table`` and everything that references its key; refuse what can't be done.

    ``options`` is a :class:`~sqla_ids.migration.options.PkMigrationOptions`;
    its fields may also be given as keywords (``timestamp_column="created_at"``).

    Raises :class:`~sqla_ids.errors.MigrationRefusedError` naming every
    object it cannot carry over (view, trigger, rule, routine, composite key,
    unsupported type, name clash...) before any change is made.
    """
    opts = build_options(options, overrides)
    dialect = for_dialect(connection.dialect).migration()
    inspector = sa.inspect(connection)
    ctx = _Planning(
        connection=connection,
        dialect=dialect,
        inspector=inspector,
        options=opts,
        table=table,
        tables=set(inspector.get_table_names()),
    )
    _reflect_key(ctx)
    _collect_references(ctx)
    _check_names(ctx)
    _collect_blockers(ctx)
    ctx.blockers.raise_if_any(table)
    return _assemble(ctx)


def _reflect_key(ctx: _Planning) -> None:
    """The table, its single-column primary key and the key's kind (or refuse now:
    nothing else can be checked without them)."""
    table = ctx.table
    if table not in ctx.tables:
        raise refuse(f"table {table!r} does not exist")
    pk_name, pk_cols = ctx.dialect.primary_key(ctx.connection, ctx.inspector, table)
    if len(pk_cols) != 1:
        raise refuse(
            f"table {table!r} has a primary key of {len(pk_cols)} columns {pk_cols};"
            " only a single-column key can become a UUIDv7"
        )
    ctx.column, ctx.pk_name = pk_cols[0], pk_name
    ctx.columns = ctx.dialect.columns(ctx.connection, ctx.inspector, table)
    key_type = ctx.columns[ctx.column]["type"]
    if isinstance(key_type, sa.Uuid):
        raise refuse(f"{table}.{ctx.column} is already a UUID column")
    if isinstance(key_type, sa.Integer):
        ctx.key_kind = "integer"
    elif isinstance(key_type, sa.String):
        ctx.key_kind = "string"
    else:
        raise refuse(
            f"{table}.{ctx.column} has type {key_type}; only integer and char/text keys"
            " are supported"
        )
    ctx.old_column = ctx.options.old_column or f"{ctx.column}{DEFAULT_OLD_SUFFIX}"
    ctx.mapping_table = ctx.options.mapping_table or f"{table}{MAPPING_SUFFIX}"


def _collect_references(ctx: _Planning) -> None:
    """Declared foreign keys to the key, then the plain columns the user named."""
    ctx.references = ctx.dialect.find_references(
        ctx.connection, ctx.inspector, ctx.table, ctx.column
    )
    declared = {(r.table, r.column) for r in ctx.references}
    for ref_table, ref_column in ctx.options.extra_references:
        if ref_table not in ctx.tables:
            ctx.blockers.add(f"extra reference table {ref_table!r} does not exist")
            continue
        ref_cols = ctx.dialect.columns(ctx.connection, ctx.inspector, ref_table)
        if ref_column not in ref_cols:
            ctx.blockers.add(f"extra reference column {ref_table}.{ref_column} does not exist")
            continue
        if (ref_table, ref_column) in declared:
            ctx.blockers.add(f"{ref_table}.{ref_column} already has a foreign key to {ctx.table}")
            continue
        ctx.references.append(
            Reference(
                table=ref_table,
                column=ref_column,
                nullable=bool(ref_cols[ref_column]["nullable"]),
                type_sql=ctx.dialect.column_type_sql(ctx.connection, ref_table, ref_column),
            )
        )
    ctx.dialect.resolve_inheritance(ctx.connection, ctx.table, ctx.references, ctx.blockers)
    for t, c in [(ctx.table, ctx.column)] + [(r.table, r.column) for r in ctx.references]:
        ctx.affected.setdefault(t, set()).add(c)


def _check_names(ctx: _Planning) -> None:
    """The columns and tables the migration creates must not exist yet, and must
    fit the database's identifier length (PostgreSQL would silently truncate)."""
    opts = ctx.options
    if ctx.old_column in ctx.columns:
        ctx.blockers.add(f"column {ctx.table}.{ctx.old_column} already exists")
    if ctx.mapping_table in ctx.tables:
        ctx.blockers.add(f"mapping table {ctx.mapping_table!r} already exists")
    if opts.timestamp_column is not None and opts.timestamp_column not in ctx.columns:
        ctx.blockers.add(f"timestamp column {ctx.table}.{opts.timestamp_column} does not exist")
    created = [("column", ctx.old_column), ("table", ctx.mapping_table)]
    for t, cols in sorted(ctx.affected.items()):
        t_columns = set(ctx.dialect.columns(ctx.connection, ctx.inspector, t))
        # Another migration's temporary columns (a child shared with a table
        # being migrated online) carry another suffix and are left alone.
        ours = f"{TEMP_PREFIX}{name_suffix(ctx.table)}_"
        clashing = sorted(c for c in t_columns if c.startswith(ours))
        if clashing:
            ctx.blockers.add(
                f"column {t}.{clashing[0]} has a name sqla_ids reserves for this"
                " migration's temporary columns"
            )
        if opts.keep_child_old_columns and t != ctx.table:
            for c in sorted(cols):
                name = f"{c}{DEFAULT_OLD_SUFFIX}"
                created.append(("column", name))
                if name in t_columns:
                    ctx.blockers.add(f"column {t}.{name} already exists")
    for kind, name in created:
        limit = ctx.dialect.identifier_limit(name)
        if limit is not None:
            ctx.blockers.add(
                f"the {kind} name {name!r} the migration would create is longer than the"
                f" database allows ({limit}); choose a shorter one with"
                f" {'old_column' if kind == 'column' else 'mapping_table'}="
            )


def _collect_blockers(ctx: _Planning) -> None:
    """Everything the migration could not carry over, from every check at once."""
    _other_foreign_keys(ctx)
    ctx.views = ctx.dialect.find_views(ctx.connection, ctx.inspector, ctx.affected, ctx.blockers)
    for view in ctx.views:
        if not ctx.options.recreate_views:
            ctx.blockers.add(
                f"view {view.name} depends on {view.depends_on}; drop it first and recreate it"
                " after (or pass recreate_views=True)"
            )
        _unmigrated_comparisons(ctx, f"view {view.name}", view.create_sql)
    ctx.blockers.extend(
        ctx.dialect.find_blockers(ctx.connection, ctx.inspector, ctx.table, ctx.affected)
    )
    _routines(ctx)
    _dangling(ctx)


def _unmigrated_comparisons(ctx: _Planning, what: str, sql: str) -> None:
    """A comparison of a migrated column with a column that stays as it is would
    compare a UUID with the old type: name the column and the way out."""
    for (t, c), (other_t, other_c) in analysis.unmigrated_comparisons(
        sql, ctx.affected, ctx.dialect.identifier_quote
    ):
        if other_t not in ctx.tables:
            continue  # e.g. a column of a subquery alias we could not resolve
        ctx.blockers.add(
            f"{what} compares {t}.{c} with {other_t}.{other_c}, which would stay"
            f" {'a text' if ctx.key_kind == 'string' else 'an integer'} column while {t}.{c}"
            f" becomes a UUID; if {other_t}.{other_c} refers to {ctx.table}, pass"
            f" extra_references=[({other_t!r}, {other_c!r})]"
        )


def _routines(ctx: _Planning) -> None:
    """Stored functions, procedures and triggers that use a migrated column must be
    acknowledged by name (their parameters or bodies may assume the old type)."""
    acknowledged = {r.lower() for r in ctx.options.acknowledged_routines}
    for routine in ctx.dialect.find_routines(ctx.connection, ctx.affected):
        _unmigrated_comparisons(ctx, f"{routine.kind} {routine.name}", routine.body)
        if routine.name.lower() in acknowledged:
            ctx.warnings.append(
                f"{routine.kind} {routine.name} uses {routine.uses} (acknowledged): check it"
                " works with UUID keys"
            )
            continue
        ctx.blockers.add(
            f"{routine.kind} {routine.name} uses {routine.uses}, whose type becomes UUID;"
            f" check or change it, then pass acknowledged_routines=[{routine.name!r}]"
        )


def _other_foreign_keys(ctx: _Planning) -> None:
    """References we would break: an affected column that is also part of an FK to
    another table, or that another table's FK points at."""
    for fk in ctx.dialect.foreign_keys(ctx.connection, ctx.inspector):
        referred = fk["referred_table"]
        if referred == ctx.table and ctx.column in fk["referred_columns"]:
            continue
        name = fk.get("name") or "(unnamed)"
        for c in fk["constrained_columns"]:
            if c in ctx.affected.get(fk["table"], set()):
                ctx.blockers.add(
                    f"{fk['table']}.{c} is also part of foreign key {name} to {referred};"
                    " a column cannot hold both keys"
                )
        for c in fk["referred_columns"]:
            if c in ctx.affected.get(referred, set()):
                ctx.blockers.add(
                    f"foreign key {name} on {fk['table']} references {referred}.{c}, which"
                    f" would change type; migrate {referred}'s key on its own first"
                )


def _dangling(ctx: _Planning) -> None:
    """A value with no parent row has no new key: refuse rather than lose it. Plain
    references can hold such values, and so can declared FKs where enforcement was
    off (SQLite's default, ``FOREIGN_KEY_CHECKS=0``, ``NOT VALID``)."""
    for ref in ctx.references:
        if ref.table not in ctx.tables:
            continue
        dangling = count_orphans(ctx.connection, ctx.table, ctx.column, ref.table, ref.column)
        if dangling:
            ctx.blockers.add(
                f"{ref.table}.{ref.column} holds {dangling} value(s) with no matching"
                f" {ctx.table}.{ctx.column}"
            )


def _assemble(ctx: _Planning) -> PkMigrationPlan:
    """The plan, once nothing blocks it."""
    connection, dialect, opts = ctx.connection, ctx.dialect, ctx.options
    row_count = connection.execute(
        sa.select(sa.func.count()).select_from(sa.table(ctx.table))
    ).scalar_one()
    plan = PkMigrationPlan(
        dialect=connection.dialect.name,
        table=ctx.table,
        column=ctx.column,
        pk_name=ctx.pk_name,
        key_kind=ctx.key_kind,
        key_type_sql=dialect.column_type_sql(connection, ctx.table, ctx.column),
        old_column=ctx.old_column,
        mapping_table=ctx.mapping_table,
        row_count=int(row_count),
        references=ctx.references,
        dependents=dialect.find_dependents(
            connection, ctx.inspector, ctx.table, ctx.column, ctx.affected
        ),
        timestamp_column=opts.timestamp_column,
        seed=opts.seed if opts.seed is not None else secrets.token_hex(16),
        batch_size=opts.batch_size,
        keep_child_old_columns=opts.keep_child_old_columns,
        drop_sequence=opts.drop_sequence,
        server_default=opts.server_default if isinstance(opts.server_default, str) else None,
        base_time_ms=int(time.time() * 1000),
        recreate_views=opts.recreate_views,
        views=ctx.views,
        options=opts.to_dict(),
        warnings=ctx.warnings,
    )
    plan.default = dialect.key_default(connection, plan)
    if isinstance(opts.server_default, str):
        plan.new_default = NewKeyDefault("expression", sql=opts.server_default)
    elif opts.server_default:
        plan.new_default = dialect.uuid7_key_default(connection, plan)
    else:
        plan.new_default = NewKeyDefault("none", reason="server_default=False")
    plan.table_sql = dialect.table_sql(connection, plan)
    plan.columns = dialect.column_definitions(connection, plan)
    return plan
