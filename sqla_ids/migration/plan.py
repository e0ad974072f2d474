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
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import ddl_sql
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration.backends import backend_for
from sqla_ids.migration.backends.base import MigrationBackend
from sqla_ids.migration.core import analysis
from sqla_ids.migration.core.mapping import segment_sql
from sqla_ids.migration.core.model import (
    DEFAULT_OLD_SUFFIX,
    MAPPING_SUFFIX,
    OLD_COLUMN_COMMENT,
    TEMP_PREFIX,
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
    name_suffix,
    refuse,
)
from sqla_ids.migration.core.options import PkMigrationOptions, build_options
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.core.reflected import Inspector, inspect
from sqla_ids.migration.core.sql import count_orphans

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
    backend: MigrationBackend
    inspector: Inspector
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
    parked_triggers: list[ParkedTrigger] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def plan_pk_migration(
    connection: Connection,
    table: str,
    options: PkMigrationOptions | None = None,
    **overrides: Any,
) -> PkMigrationPlan:
    """Reflect ``table`` and everything that references its key; refuse what can't be done.

    ``options`` is a :class:`~sqla_ids.migration.core.options.PkMigrationOptions`;
    its fields may also be given as keywords (``timestamp_column="created_at"``).

    Raises :class:`~sqla_ids.errors.MigrationRefusedError` naming every
    object it cannot carry over (view, trigger, rule, routine, composite key,
    unsupported type, name clash...) before any change is made.
    """
    return make_plan(connection, backend_for(connection), table, build_options(options, overrides))


def make_plan(
    connection: Connection, backend: MigrationBackend, table: str, options: PkMigrationOptions
) -> PkMigrationPlan:
    """:func:`plan_pk_migration` with the options built and the backend found
    (the runners do both once, at their boundary)."""
    plan, blockers = plan_and_blockers(connection, backend, table, options, despite=False)
    blockers.raise_if_any(table)
    assert plan is not None  # (no blockers: assembled)
    return plan


def plan_and_blockers(
    connection: Connection,
    backend: MigrationBackend,
    table: str,
    options: PkMigrationOptions,
    *,
    despite: bool = True,
) -> tuple[PkMigrationPlan | None, Blockers]:
    """The plan and every problem found planning it, without refusing yet: a mode
    with blockers of its own (online) adds them, so one refusal names them all.
    With ``despite``, the plan is assembled despite blockers when it can be
    (``None`` when not, or without ``despite``); a table with no usable key is
    refused at once (nothing else can be checked)."""
    inspector = inspect(connection)
    ctx = _Planning(
        connection=connection,
        backend=backend,
        inspector=inspector,
        options=options,
        table=table,
        tables=set(inspector.get_table_names()),
    )
    _reflect_key(ctx)
    _collect_references(ctx)
    _check_names(ctx)
    _collect_blockers(ctx)
    if options.versions and not options.online:
        ctx.blockers.add(
            "versions (two versions of the tables served from the expand to the contract)"
            " needs the online mode: add online=True, or migrate offline without versions"
        )
    elif options.versions and backend.online is not None and not backend.online.serves_versions:
        label = backend.database.label if backend.database is not None else "this database"
        ctx.blockers.add(
            "versions (two versions of the tables served during the migration) is not"
            f" available on {label}: it needs PostgreSQL (schemas of updatable views) or"
            " MariaDB (databases of updatable views); migrate without versions (roll the"
            " application out at the swap)"
        )
    elif (
        options.online
        and options.target == "uuid192"
        and backend.online is not None
        and not backend.online.makes_uuid192
    ):
        label = backend.database.label if backend.database is not None else "this database"
        ctx.blockers.add(
            f"the online mode on {label} migrates keys to UUIDv7 only: migrate to UUID192"
            " offline (online=False), or online to UUIDv7"
        )
    if not ctx.blockers.problems:
        return _assemble(ctx), ctx.blockers
    if not despite:
        return None, ctx.blockers
    try:
        return _assemble(ctx), ctx.blockers
    except MigrationRefusedError:
        return None, ctx.blockers  # what the blockers stop cannot be read either


def _reflect_key(ctx: _Planning) -> None:
    """The table, its single-column primary key and the key's kind (or refuse now:
    nothing else can be checked without them)."""
    table = ctx.table
    if table not in ctx.tables:
        raise refuse(f"table {table!r} does not exist")
    pk_name, pk_cols = ctx.backend.reflect.primary_key(ctx.connection, ctx.inspector, table)
    if len(pk_cols) != 1:
        raise refuse(
            f"table {table!r} has a primary key of {len(pk_cols)} columns {pk_cols};"
            " only a single-column key can become a UUIDv7"
        )
    ctx.column, ctx.pk_name = pk_cols[0], pk_name
    ctx.columns = ctx.backend.reflect.columns(ctx.connection, ctx.inspector, table)
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
    ctx.references = ctx.backend.reflect.find_references(
        ctx.connection, ctx.inspector, ctx.table, ctx.column
    )
    declared = {(r.table, r.column) for r in ctx.references}
    for ref_table, ref_column in ctx.options.extra_references:
        if ref_table not in ctx.tables:
            ctx.blockers.add(f"extra reference table {ref_table!r} does not exist")
            continue
        ref_cols = ctx.backend.reflect.columns(ctx.connection, ctx.inspector, ref_table)
        if ref_column not in ref_cols:
            ctx.blockers.add(f"extra reference column {ref_table}.{ref_column} does not exist")
            continue
        if (ref_table, ref_column) in declared:
            ctx.blockers.add(
                f"{ref_table}.{ref_column} already has a foreign key to {ctx.table}; leave it"
                " out of extra_references (it is converted anyway)"
            )
            continue
        ctx.references.append(
            Reference(
                table=ref_table,
                column=ref_column,
                nullable=bool(ref_cols[ref_column]["nullable"]),
                type_sql=ctx.backend.reflect.column_type_sql(ctx.connection, ref_table, ref_column),
            )
        )
    ctx.backend.reflect.resolve_inheritance(ctx.connection, ctx.table, ctx.references, ctx.blockers)
    for t, c in [(ctx.table, ctx.column)] + [(r.table, r.column) for r in ctx.references]:
        ctx.affected.setdefault(t, set()).add(c)


def _check_names(ctx: _Planning) -> None:
    """The columns and tables the migration creates must not exist yet, and must
    fit the database's identifier length (PostgreSQL would silently truncate)."""
    opts = ctx.options
    if ctx.old_column in ctx.columns:
        ctx.blockers.add(
            f"column {ctx.table}.{ctx.old_column} already exists; name the old-key column"
            " with old_column="
        )
    if ctx.mapping_table in ctx.tables:
        ctx.blockers.add(
            f"mapping table {ctx.mapping_table!r} already exists; name another with mapping_table="
        )
    if opts.timestamp_column is not None and opts.timestamp_column not in ctx.columns:
        ctx.blockers.add(f"timestamp column {ctx.table}.{opts.timestamp_column} does not exist")
    elif opts.timestamp_column is not None:
        _check_timestamp_column(ctx, opts.timestamp_column)
    if opts.target == "uuid192":
        _check_segment(ctx)
    created = [("column", ctx.old_column), ("table", ctx.mapping_table)]
    for t, cols in sorted(ctx.affected.items()):
        t_columns = set(ctx.backend.reflect.columns(ctx.connection, ctx.inspector, t))
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
                    ctx.blockers.add(
                        f"column {t}.{name} already exists, and keep_child_old_columns=True"
                        " would create it; rename it first or pass keep_child_old_columns=False"
                    )
    for kind, name in created:
        limit = ctx.backend.reflect.identifier_limit(name)
        if limit is not None:
            ctx.blockers.add(
                f"the {kind} name {name!r} the migration would create is longer than the"
                f" database allows ({limit}); choose a shorter one with"
                f" {'old_column' if kind == 'column' else 'mapping_table'}="
            )


def _check_timestamp_column(ctx: _Planning, column: str) -> None:
    """The keys' times come from a date or timestamp column, whose values must be
    dates a key can hold and Python can read (PostgreSQL's go past the year 9999)."""
    declared = {c["name"]: c["type"] for c in ctx.inspector.get_columns(ctx.table)}
    kind = declared.get(column)
    if kind is None:
        return  # a name the inspector cannot read back: the migration's SQL says it
    if not isinstance(kind, sa.Date | sa.DateTime):
        ctx.blockers.add(
            f"timestamp column {ctx.table}.{column} has type {kind}; the keys' times come"
            " from a date or timestamp column"
        )
        return
    latest: date = date.max
    if isinstance(kind, sa.DateTime):
        latest = datetime.max.replace(tzinfo=UTC) if kind.timezone else datetime.max
    t = sa.table(ctx.table, sa.column(column, kind))
    beyond = ctx.connection.execute(
        sa.select(sa.func.count()).select_from(t).where(t.c[column] > sa.literal(latest, kind))
    ).scalar_one()
    if beyond:
        ctx.blockers.add(
            f"timestamp column {ctx.table}.{column} holds {beyond} value(s) after the year"
            " 9999, where the keys' times stop"
        )


#: The largest UUID192 segment (64 bits, unsigned), as SQL: a constant, written
#: out because SQLite cannot bind an integer this large.
_SEGMENT_MAX: sa.ColumnElement[Any] = sa.literal_column(str(2**64 - 1))


def _check_segment(ctx: _Planning) -> None:
    """A UUID192 segment comes from an integer column or an expression whose every
    value is a whole number from 0 to 2**64-1 (the rows named otherwise)."""
    opts = ctx.options
    column = opts.segment_column
    if column is not None:
        if column not in ctx.columns:
            ctx.blockers.add(f"segment column {ctx.table}.{column} does not exist")
            return
        kind = ctx.columns[column]["type"]
        if not isinstance(kind, sa.Integer):
            ctx.blockers.add(
                f"segment column {ctx.table}.{column} has type {kind}; a UUID192 segment"
                " comes from an integer column (or segment_sql=)"
            )
            return
    if opts.online and opts.segment_sql and analysis.mentions(opts.segment_sql, [ctx.column]):
        ctx.blockers.add(
            f"segment_sql {opts.segment_sql!r} reads the key {ctx.table}.{ctx.column}, which the"
            " online swap renames (rows inserted between the swap and the contract get their"
            " segment from it too): give the segment by segment_column= (the key itself may be"
            " it), or migrate offline"
        )
    what = f"segment column {ctx.table}.{column}" if column else f"segment_sql {opts.segment_sql!r}"
    sql = segment_sql(ctx.connection, opts)
    if sql is None:
        return
    value: sa.ColumnElement[Any] = sa.literal_column(sql)
    t = sa.table(ctx.table, sa.column(ctx.column))
    wrong = sa.or_(value.is_(None), value < 0, value > _SEGMENT_MAX)
    # In a savepoint: an expression that fails must not abort the caller's
    # transaction (PostgreSQL refuses every statement after an error) -- unless
    # there is none to abort (Alembic's autocommit block on MariaDB, where a
    # savepoint would not outlive its own statement).
    autocommit = ctx.connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT"
    guard = nullcontext() if autocommit else ctx.connection.begin_nested()
    try:
        with guard:
            found = ctx.connection.execute(
                sa.select(sa.func.count()).select_from(t).where(wrong)
            ).scalar_one()
            first = (
                ctx.connection.execute(
                    sa.select(t.c[ctx.column]).where(wrong).order_by(t.c[ctx.column]).limit(5)
                )
                .scalars()
                .all()
            )
    except sa.exc.DBAPIError as error:
        reason = str(error.orig).strip().splitlines()[0]
        ctx.blockers.add(f"{what} cannot be read on {ctx.table}: {reason}")
        return
    if found:
        ctx.blockers.add(
            f"{what} is NULL or outside 0..2**64-1 in {found} row(s) of {ctx.table} (first"
            f" {ctx.column} {', '.join(map(str, first))}); a UUID192 segment is a 64-bit"
            " unsigned number"
        )


def _collect_blockers(ctx: _Planning) -> None:
    """Everything the migration could not carry over, from every check at once."""
    _other_foreign_keys(ctx)
    ctx.views = ctx.backend.reflect.find_views(
        ctx.connection,
        ctx.inspector,
        ctx.affected,
        ctx.blockers,
        # The online swap recreates the views in its transaction and refreshes a
        # populated materialized view there (the offline mode refuses one).
        refresh_populated=ctx.options.online,
    )
    for view in ctx.views:
        if not ctx.options.recreate_views:
            ctx.blockers.add(
                f"{view.kind} {view.shown} depends on {view.depends_on}; drop it first and"
                " recreate it after (or pass recreate_views=True)"
            )
        _unmigrated_comparisons(ctx, f"{view.kind} {view.shown}", view.create_sql)
    ctx.blockers.extend(
        ctx.backend.reflect.find_blockers(ctx.connection, ctx.inspector, ctx.table, ctx.affected)
    )
    ctx.blockers.extend(
        ctx.backend.reflect.missing_privileges(
            ctx.connection,
            [ctx.table, *ctx.affected],
            Work(
                online=ctx.options.online,
                # (UUID192 keys get no server default: their segment is the row's)
                key_trigger=ctx.options.server_default is True and ctx.options.target == "uuid7",
                versions=ctx.options.versions,
            ),
        )
    )
    # Set aside offline, guarded online (the application's updates need them
    # meanwhile): see ParkedTrigger.
    ctx.parked_triggers = ctx.backend.reflect.update_triggers(ctx.connection, ctx.affected)
    _routines(ctx)
    _dangling(ctx)
    _driver_placeholders(ctx)


def _driver_placeholders(ctx: _Planning) -> None:
    """mysql-connector formats a ``%`` in every statement sent with parameters, and
    SQLAlchemy does not escape it for that driver (it does for psycopg and PyMySQL):
    a name holding ``%`` would stop the migration half-way there (measured: a
    ``KeyError`` on ``%(x)s``). Refused before anything changes, each name once."""
    if ctx.connection.dialect.driver != "mysqlconnector":
        return
    names = {ctx.table, ctx.old_column, ctx.mapping_table, *ctx.columns}
    for table in ctx.affected:
        names.add(table)
        names.update(c["name"] for c in ctx.inspector.get_columns(table))
        names.update(i["name"] or "" for i in ctx.inspector.get_indexes(table))
        names.update(fk["name"] or "" for fk in ctx.inspector.get_foreign_keys(table))
        names.update(u["name"] or "" for u in ctx.inspector.get_unique_constraints(table))
    names.update(ref.constraint or "" for ref in ctx.references)
    names.update(view.name for view in ctx.views)
    for name in sorted(n for n in names if "%" in n):
        ctx.blockers.add(
            f"the name {name!r} contains %, which mysql-connector reads as a placeholder"
            " in the migration's statements with parameters (SQLAlchemy escapes it for"
            " PyMySQL, not for this driver); migrate through PyMySQL (mysql+pymysql://),"
            " or rename it for the migration (ALTER ... RENAME) and back after"
        )


def _unmigrated_comparisons(ctx: _Planning, what: str, sql: str) -> None:
    """A comparison of a migrated column with a column that stays as it is would
    compare a UUID with the old type: name the column and the way out."""
    for (t, c), (other_t, other_c) in analysis.unmigrated_comparisons(
        sql, ctx.affected, ctx.backend.identifier_quote
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
    for routine in ctx.backend.reflect.find_routines(ctx.connection, ctx.affected):
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
    for fk in ctx.backend.reflect.foreign_keys(ctx.connection, ctx.inspector):
        referred = fk["referred_table"]
        if referred == ctx.table and ctx.column in fk["referred_columns"]:
            continue
        name = fk.get("name") or "(unnamed)"
        drop = _drop_foreign_key_sql(ctx, fk)
        for c in fk["constrained_columns"]:
            if c in ctx.affected.get(fk["table"], set()):
                ctx.blockers.add(
                    f"{fk['table']}.{c} is also part of foreign key {name} to {referred};"
                    f" a column cannot hold both keys: drop that foreign key first{drop}"
                )
        paired = zip(fk["constrained_columns"], fk["referred_columns"], strict=False)
        for local, c in paired:
            if c in ctx.affected.get(referred, set()):
                # Its values are the same keys (those of C.c, a reference to the
                # migrated key): converted through the same mapping, they stay equal.
                ctx.blockers.add(
                    f"foreign key {name} on {fk['table']} references {referred}.{c}, which"
                    f" would change type; drop it first{drop}, pass"
                    f" extra_references=[({fk['table']!r}, {local!r})] so that its values"
                    " are converted too, and add it again after the migration"
                )


def _drop_foreign_key_sql(ctx: _Planning, fk: dict[str, Any]) -> str:
    """`` (ALTER TABLE ... DROP ...)`` removing ``fk``, as the database writes it;
    empty where the database cannot drop a constraint (SQLite) or it has no name."""
    if not fk.get("name") or ctx.connection.dialect.name == "sqlite":
        return ""  # (SQLite: a foreign key goes only with a rebuild of its table)
    metadata = sa.MetaData()
    local = sa.Table(fk["table"], metadata, *(sa.Column(c) for c in fk["constrained_columns"]))
    if fk["referred_table"] == fk["table"]:  # a self-reference: one table of both
        remote = local
        for c in fk["referred_columns"]:
            if c not in local.c:
                local.append_column(sa.Column(c))
    else:
        remote = sa.Table(
            fk["referred_table"], metadata, *(sa.Column(c) for c in fk["referred_columns"])
        )
    constraint = sa.ForeignKeyConstraint(
        [local.c[c] for c in fk["constrained_columns"]],
        [remote.c[c] for c in fk["referred_columns"]],
        name=fk["name"],
    )
    local.append_constraint(constraint)
    try:
        sql = ddl_sql(sa.schema.DropConstraint(constraint), ctx.connection.dialect)
    except sa.exc.CompileError:
        return ""
    return f" ({sql.strip()})"


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
                f" {ctx.table}.{ctx.column}; give them a {ctx.table} row or set them to NULL"
                " first (the migration would have no new key for them)"
            )


def _assemble(ctx: _Planning) -> PkMigrationPlan:
    """The plan, once nothing blocks it."""
    connection, reflect, opts = ctx.connection, ctx.backend.reflect, ctx.options
    row_count = connection.execute(
        sa.select(sa.func.count()).select_from(sa.table(ctx.table))
    ).scalar_one()
    plan = PkMigrationPlan(
        dialect=connection.dialect.name,
        table=ctx.table,
        column=ctx.column,
        pk_name=ctx.pk_name,
        key_kind=ctx.key_kind,
        key_type_sql=reflect.column_type_sql(connection, ctx.table, ctx.column),
        old_column=ctx.old_column,
        mapping_table=ctx.mapping_table,
        row_count=int(row_count),
        references=ctx.references,
        dependents=reflect.find_dependents(
            connection, ctx.inspector, ctx.table, ctx.column, ctx.affected
        ),
        seed=opts.seed if opts.seed is not None else secrets.token_hex(16),
        base_time_ms=int(time.time() * 1000),
        views=ctx.views,
        parked_triggers=ctx.parked_triggers,
        options=opts,
        warnings=ctx.warnings,
    )
    plan.default = reflect.key_default(connection, plan)
    if isinstance(opts.server_default, str):
        plan.new_default = NewKeyDefault("expression", sql=opts.server_default)
    elif opts.server_default and opts.target == "uuid192":
        plan.new_default = NewKeyDefault(
            "none", reason="UUID192 keys: the application makes them, with their segment"
        )
    elif opts.server_default:
        plan.new_default = reflect.uuid7_key_default(connection, plan)
    else:
        plan.new_default = NewKeyDefault("none", reason="server_default=False")
    plan.table_sql = reflect.table_sql(connection, plan)
    plan.comment_sql = reflect.comment_sql(connection, plan)
    plan.columns = reflect.column_definitions(connection, plan)
    return plan


def resumed_options(plan: PkMigrationPlan, current: PkMigrationOptions) -> None:
    """A resumed run paces itself with its own options (every knob), and says so;
    the options that shaped the recorded plan stay as recorded."""
    plan.options, changed = plan.options.resumed_with(current)
    if changed:
        logger.info("%s: resumed with this run's %s", plan.table, ", ".join(changed))
    ignored = plan.options.shape_differences(current)
    if ignored:
        logger.warning(
            "%s: %s differ from the recorded migration's and are ignored (a started"
            " migration keeps its plan; undo it to change them)",
            plan.table,
            ", ".join(ignored),
        )
