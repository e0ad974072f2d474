"""PostgreSQL: reflection from the catalog; each table rewritten once, in place.

DDL is transactional, so the whole migration (mapping, conversion, checks)
runs in the migration's transaction and any failed check rolls all of it
back. The mapping is computed by the server (:func:`mapping_insert_sql`).
Then each affected table gets one ``ALTER TABLE`` that converts every one of
its columns -- ``ALTER COLUMN ... TYPE uuid USING <lookup>(column)`` (``bytea``
for UUID192 keys), the
lookup a session-private SQL function probing the mapping's index, and on
the migrated table ``<key>_old`` filled from the key in the same statement:
PostgreSQL rewrites the table once and builds each of its indexes once, after
the data (an ``UPDATE`` of temporary columns followed by the conversion wrote
every row twice, with a new index entry per row in between). The columns keep
their position, comment, grants and nullability, and PostgreSQL rebuilds
their primary key, unique constraints and indexes under their own names -- on
every partition too, when the table is partitioned. Only the foreign keys to
the key (a type mismatch while the columns change) and the views over the
columns are dropped meanwhile and recreated from their own definitions
(``pg_get_constraintdef``/``pg_get_viewdef``); a foreign key validated when
it comes back proves its references (the final check does not scan them
again). User triggers on the affected tables are disabled while the values
are rewritten (the rewrite is not an application update) and re-enabled as
they were.

Names reach SQL only through ``quote`` (identifiers) or as bound parameters
(``to_regclass(:t)``, ``setval(CAST(:s AS regclass), ...)``); the lookup
function's body is a literal made by SQLAlchemy's renderer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import execute_sql, query_sql, quoter
from sqla_ids.errors import MigrationVerificationError
from sqla_ids.migration.backends.base import Proven, Strategy
from sqla_ids.migration.backends.postgresql.keys import (
    KEY_NUMBER_SQL,
    NUMBER_PARTS,
    key_sql,
    segment_bytes_sql,
    time_number_sql,
)
from sqla_ids.migration.backends.postgresql.reflect import (
    _params,
    _sequence_name,
    _sequence_options,
)
from sqla_ids.migration.backends.postgresql.writes import user_trigger_statements
from sqla_ids.migration.core import sizing
from sqla_ids.migration.core.mapping import fill_mapping_in_sql, new_type_sql, segment_sql
from sqla_ids.migration.core.model import (
    OLD_COLUMN_COMMENT,
    PkMigrationPlan,
    Reference,
    View,
    name_suffix,
)
from sqla_ids.migration.core.phases import Recorded
from sqla_ids.migration.core.progress import Progress
from sqla_ids.migration.core.sql import literal, view_error


class _Op(NamedTuple):
    """One statement of a rewrite, and what running it involves beyond executing it."""

    sql: str
    rewrite: str | None = None
    """The table this ``ALTER TABLE`` rewrites: its progress is shown, and a
    value left without a mapping row is reported as such."""
    proves: Reference | None = None
    """A foreign key added back: validated, it proved every reference."""
    view: View | None = None
    """A view recreated: a failure names it and the way out."""


class AlterType(Strategy):
    """Convert every affected column in place (see the module docstring)."""

    transactional = True

    @contextmanager
    def quiet(self, connection: Connection, plan: PkMigrationPlan) -> Iterator[None]:
        """User triggers on the affected tables disabled meanwhile (the rewrite is not
        an application update), then enabled again exactly as they were."""
        disable, enable = _trigger_ops(connection, plan)
        _run(connection, plan, disable)
        yield
        _run(connection, plan, enable)

    def fill_mapping(self, connection: Connection, plan: PkMigrationPlan) -> None:
        """The mapping computed by the server (:func:`mapping_insert_sql`)."""
        fill_mapping_in_sql(connection, plan, partial(mapping_insert_sql, connection, plan))

    def upgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Each affected table rewritten once (:func:`upgrade_ops`)."""
        return _run(connection, plan, upgrade_ops(connection, plan))

    def downgrade(self, connection: Connection, plan: PkMigrationPlan, resumed: Recorded) -> Proven:
        """Each affected table rewritten once: the references back through the mapping,
        the key from its old-key column (dropped in the same statement); the key's
        default restored."""
        q = quoter(connection.dialect)
        t, c = q(plan.table), q(plan.column)
        before, after = _around(connection, plan)
        work: list[_Op] = []
        if plan.new_default_sql:
            work.append(_Op(f"ALTER TABLE {t} ALTER COLUMN {c} DROP DEFAULT"))
        types = _reference_types(plan)
        old = q(plan.old_column)
        # The key from its old-key column, which goes in the same rewrite.
        clauses = {
            plan.table: [
                f"ALTER COLUMN {c} TYPE {plan.key_type_sql} USING {old}",
                f"DROP COLUMN {old}",
            ]
        }
        new_type = new_type_sql(connection, plan)
        fn, create, drop = _lookup(
            connection, plan, "new_key", "old_key", new_type, plan.key_type_sql
        )
        for table, column in plan.targets()[1:]:
            each = clauses.setdefault(table, [])
            each.append(
                f"ALTER COLUMN {q(column)} TYPE {types[table, column]} USING {fn}({q(column)})"
            )
            if plan.keep_child_old_columns:
                each.append(f"DROP COLUMN {q(column + '_old')}")
        kept = plan.default.sequence if plan.default.kind == "sequence" else None
        handed = bool(kept) and not plan.drop_sequence
        sequence = _sequence_name(connection, kept) if kept and handed else ""
        if handed:
            # After an online migration the key's sequence belongs to <key>_old
            # (renamed at the swap), and would go with it: held apart while that
            # column goes, given back to the key after.
            work.append(_Op(f"ALTER SEQUENCE {sequence} OWNED BY NONE"))
        work += [create, *_rewrites(q, clauses), drop]
        if handed:
            work.append(_Op(f"ALTER SEQUENCE {sequence} OWNED BY {t}.{c}"))
        proven = _run(connection, plan, before + work)
        _restore_default(connection, plan)
        return proven | _run(connection, plan, after)


def upgrade_ops(connection: Connection, plan: PkMigrationPlan) -> list[_Op]:
    """The statements of the upgrade, in order: the triggers quiet and the foreign
    keys to the key and the views over the columns out of the way; then one
    ``ALTER TABLE`` per affected table converting all of its columns through the
    mapping (and copying the old key into ``<key>_old``); then all of it back."""
    q = quoter(connection.dialect)
    t, c = q(plan.table), q(plan.column)
    before, after = _around(connection, plan)
    work: list[_Op] = []
    kind = plan.default.kind
    if kind == "identity":
        work.append(_Op(f"ALTER TABLE {t} ALTER COLUMN {c} DROP IDENTITY"))
    elif kind:
        work.append(_Op(f"ALTER TABLE {t} ALTER COLUMN {c} DROP DEFAULT"))
    if kind == "sequence" and plan.drop_sequence:
        name = _sequence_name(connection, plan.default.sequence or {})
        work.append(_Op(f"DROP SEQUENCE {name}"))
    old = q(plan.old_column)
    comment = OLD_COLUMN_COMMENT.format(table=plan.table, column=plan.column)
    work += [
        # Added empty (no rewrite), filled by the one rewrite below.
        _Op(f"ALTER TABLE {t} ADD COLUMN {old} {plan.key_type_sql}"),
        _Op(f"COMMENT ON COLUMN {t}.{old} IS {literal(connection, comment)}"),
    ]
    # The old key copied by the same rewrite: every USING reads the row as it was.
    clauses = {plan.table: [f"ALTER COLUMN {old} TYPE {plan.key_type_sql} USING {c}"]}
    types = _reference_types(plan)
    if plan.keep_child_old_columns:
        for table, column in plan.targets()[1:]:
            kept, ref_type = q(column + "_old"), types[table, column]
            work.append(_Op(f"ALTER TABLE {q(table)} ADD COLUMN {kept} {ref_type}"))
            clauses.setdefault(table, []).append(
                f"ALTER COLUMN {kept} TYPE {ref_type} USING {q(column)}"
            )
    new_type = new_type_sql(connection, plan)
    fn, create, drop = _lookup(connection, plan, "old_key", "new_key", plan.key_type_sql, new_type)
    for table, column in plan.targets():
        clauses.setdefault(table, []).append(
            f"ALTER COLUMN {q(column)} TYPE {new_type} USING {fn}({q(column)})"
        )
    work += [create, *_rewrites(q, clauses), drop]
    if plan.new_default_sql:
        work.append(_Op(f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.new_default_sql}"))
    return before + work + after


def _rewrites(q: Callable[[str], str], clauses: dict[str, list[str]]) -> list[_Op]:
    """One ``ALTER TABLE`` per table with all of its clauses: one rewrite of its rows,
    then each of its indexes built once."""
    return [
        _Op(f"ALTER TABLE {q(table)} " + ", ".join(each), rewrite=table)
        for table, each in clauses.items()
        if each
    ]


def _trigger_ops(connection: Connection, plan: PkMigrationPlan) -> tuple[list[_Op], list[_Op]]:
    """:func:`user_trigger_statements` of the affected tables, as steps."""
    disable, enable = user_trigger_statements(connection, plan.affected_tables)
    return [_Op(sql) for sql in disable], [_Op(sql) for sql in enable]


def _around(connection: Connection, plan: PkMigrationPlan) -> tuple[list[_Op], list[_Op]]:
    """What goes before and after a rewrite: the triggers quiet, the views over the
    columns and the foreign keys to the key dropped (their types change), and
    all of it put back as it was."""
    q = quoter(connection.dialect)
    disable, enable = _trigger_ops(connection, plan)
    constraints = [(ref, ref.constraint) for ref in plan.references if ref.constraint]
    before = [
        *disable,
        *(_Op(view.drop_sql) for view in reversed(plan.views)),
        *(
            _Op(f"ALTER TABLE {q(ref.table)} DROP CONSTRAINT {q(name)}")
            for ref, name in constraints
        ),
    ]
    after = [
        *(
            _Op(
                f"ALTER TABLE {q(ref.table)} ADD CONSTRAINT {q(name)} {ref.definition}",
                proves=ref,
            )
            for ref, name in constraints
        ),
        *(_Op(sql, view=view) for view in plan.views for sql in [view.create_sql, *view.after_sql]),
        # (A foreign key added back has lost its comment; the rest kept theirs.)
        *(_Op(sql) for sql in plan.comment_sql),
        *enable,
    ]
    return before, after


def _run(connection: Connection, plan: PkMigrationPlan, ops: list[_Op]) -> Proven:
    """Run ``ops`` in order; the references proven by the foreign keys validated."""
    proven: set[tuple[str, str]] = set()
    for op in ops:
        if op.rewrite is not None:
            _rewrite(connection, plan, op.rewrite, op.sql)
        elif op.view is not None:
            try:
                execute_sql(connection, op.sql)
            except sa.exc.DBAPIError as error:
                raise view_error(op.view, error) from error
        else:
            execute_sql(connection, op.sql)
        ref = op.proves
        if (
            ref is not None
            and len(ref.columns) == 1
            and _validated(connection, ref.table, ref.constraint or "")
        ):
            proven.add((ref.table, ref.column))
    return frozenset(proven)


def _reference_types(plan: PkMigrationPlan) -> dict[tuple[str, str], str]:
    """Each reference's original type, by ``(table, column)``."""
    return {(r.table, r.column): r.type_sql for r in plan.references}


def _validated(connection: Connection, table: str, constraint: str) -> bool:
    """Whether PostgreSQL validated ``constraint`` (checked every row) when added."""
    return bool(
        connection.execute(
            sa.text(
                "SELECT convalidated FROM pg_constraint"
                " WHERE conrelid = to_regclass(:t) AND conname = :c"
            ),
            {**_params(connection, table), "c": constraint},
        ).scalar()
    )


def _lookup(
    connection: Connection,
    plan: PkMigrationPlan,
    given: str,
    wanted: str,
    given_type: str,
    wanted_type: str,
) -> tuple[str, _Op, _Op]:
    """A session-private function returning the mapping's ``wanted`` for a
    ``given`` value -- its name, and the statements that create and drop it:
    ``ALTER COLUMN ... USING`` takes no subquery, and through a function each
    row's value is one probe of the mapping's index, in the one pass that
    rewrites the table anyway. ``STRICT``: ``NULL`` stays ``NULL``; a value the
    mapping lacks gives ``NULL`` too, which the checks after the rewrite catch
    (``NOT NULL`` columns at once, the others by their counts of values)."""
    q = quoter(connection.dialect)
    schema = query_sql(connection, "SELECT current_schema()").scalar_one()
    name = f"pg_temp.{q(f'sqla_ids_{wanted}_{name_suffix(plan.table)}')}"
    body = f"SELECT {q(wanted)} FROM {q(schema)}.{q(plan.mapping_table)} WHERE {q(given)} = $1"
    create = _Op(
        f"CREATE FUNCTION {name}({given_type}) RETURNS {wanted_type}"
        f" LANGUAGE sql STABLE STRICT AS {literal(connection, body)}"
    )
    return name, create, _Op(f"DROP FUNCTION {name}({given_type})")


def _rewrite(connection: Connection, plan: PkMigrationPlan, table: str, sql: str) -> None:
    """Run the ``ALTER TABLE`` that rewrites ``table``. A ``NULL`` left in a ``NOT
    NULL`` column (a value with no mapping row) stops it: nothing has changed (one
    transaction)."""
    # The statistics' row estimate: counting would read the table once more.
    rows = connection.execute(
        sa.text("SELECT reltuples FROM pg_class WHERE oid = to_regclass(:t)"),
        _params(connection, table),
    ).scalar()
    progress = Progress(f"{table}: one rewrite", max(int(rows or 0), 1))
    try:
        execute_sql(connection, sql)
    except sa.exc.IntegrityError as error:
        raise MigrationVerificationError(
            f"{table}: a value of {', '.join(plan.columns_of(table))} has no row in"
            f" {plan.mapping_table} ({str(error.orig).strip().splitlines()[0]});"
            " rolled back, nothing changed"
        ) from error
    progress.advance(progress.total)


def mapping_insert_sql(connection: Connection, plan: PkMigrationPlan, bounded: bool) -> str:
    """The ``INSERT ... SELECT`` of one batch of mapping rows (see
    :func:`sqla_ids.migration.core.mapping.fill_mapping_in_sql`): the keys'
    (millisecond, counter) number ``v`` from ``row_number()`` -- through a running
    ``max()`` over the timestamps when there is a timestamp column
    (:data:`KEY_NUMBER_SQL`) -- and 56 bits of ``sha256(seed:ordinal)``."""
    q = quoter(connection.dialect)
    k = q(plan.column)
    low = f"{k} > :after AND " if bounded else ""
    if plan.timestamp_column is None:
        ts, t_col = "", ""
        v = "CAST(:start AS bigint) + r"
        ms, counter = "(v >> 18)", "(v & 262143)"
    else:
        ts, t_col = f", {time_number_sql(connection, plan)}", " AS t"
        v = KEY_NUMBER_SQL
        ms, counter = NUMBER_PARTS
    key = key_sql(ms, counter, "(:ordinal + r - 1)")
    segment = segment_sql(connection, plan.options)
    if plan.uuid192:
        # The UUID's 16 bytes, then the segment's 8 (big-endian; int8send writes a
        # bigint, so a segment past 2**63 goes as its two's complement).
        key = f"uuid_send({key})"
        if segment is not None:
            key += f" || {segment_bytes_sql('s')}"
    s_col = ", s" if segment is not None else ""
    s_sql = f", {segment} AS s" if segment is not None else ""
    return (
        f"INSERT INTO {q(plan.mapping_table)} (old_key, new_key)"
        f" SELECT k, {key} FROM (SELECT k, r, {v} AS v{s_col} FROM"
        f" (SELECT {k} AS k, row_number() OVER (ORDER BY {k}) AS r{ts}{t_col}{s_sql}"
        f" FROM {q(plan.table)} WHERE {low}{k} <= :upto) b) w"
    )


def _restore_default(connection: Connection, plan: PkMigrationPlan) -> None:
    """The key's identity, sequence or default as it was, continuing after the
    largest key (rows created since the upgrade were numbered past it)."""
    q = quoter(connection.dialect)
    t, c = q(plan.table), q(plan.column)
    kind = plan.default.kind
    seq: dict[str, Any] = plan.default.sequence or {}
    if kind == "identity":
        how = "ALWAYS" if plan.default.always else "BY DEFAULT"
        execute_sql(
            connection,
            f"ALTER TABLE {t} ALTER COLUMN {c} ADD GENERATED {how} AS IDENTITY"
            f" (SEQUENCE NAME {_sequence_name(connection, seq)} {_sequence_options(seq, False)})",
        )
    elif kind == "sequence":
        if plan.drop_sequence:
            execute_sql(
                connection,
                f"CREATE SEQUENCE {_sequence_name(connection, seq)} {_sequence_options(seq, True)}"
                f" OWNED BY {t}.{c}",
            )
        execute_sql(
            connection, f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.default.expression}"
        )
    elif kind == "expression":
        execute_sql(
            connection, f"ALTER TABLE {t} ALTER COLUMN {c} SET DEFAULT {plan.default.expression}"
        )
    # The sequence continues exactly where it stood -- or after the keys given to
    # rows created since the upgrade. A kept sequence already advanced for those.
    recreated = kind == "identity" or (kind == "sequence" and plan.drop_sequence)
    if recreated:
        value = max(int(seq.get("last_value") or 0), int(plan.default.numbered_up_to or 0))
        if value:
            connection.execute(
                sa.text("SELECT setval(CAST(:s AS regclass), :v)"),
                {"s": _sequence_name(connection, seq), "v": value},
            )


# --- read-only, for a dry run: the statements AlterType.upgrade will run -----------------
# The same list the upgrade runs (upgrade_ops); tests/test_migration_preflight.py
# still runs both and compares what was sent.


def planned_upgrade(connection: Connection, plan: PkMigrationPlan) -> list[sizing.Step]:
    """The statements :meth:`AlterType.upgrade` will run, in order (it runs these)."""
    steps: list[sizing.Step] = []
    for op in upgrade_ops(connection, plan):
        if op.rewrite is not None:
            steps.append(
                sizing.DataStep(f"rewrite {op.rewrite}: every row once, then each index once")
            )
        steps.append(sizing.Statement(op.sql))
    return steps
