"""The online migration's checks: every row against the mapping, by key.

The same questions on every database, asked with SQLAlchemy constructs (each
dialect spells ``IS DISTINCT FROM`` its own way), one statement per table:

* :attr:`~sqla_ids.migration.core.phases.Check.FORWARD` (before the swap):
  every parent's new key is its mapped one, and every child whose old
  reference is set has the new value its parent maps to -- a reference with no
  new value at all counts too (it would be lost at the swap);
* :attr:`~.Check.SWAPPED` (after the swap, before the contract drops the old
  columns): wherever the old side is known, the new side agrees with it;
* :attr:`~.Check.RESTORABLE` (before the swap is undone): every new value has
  its old one, and every parent its old key.

Each problem names up to five rows (their primary key), so the error says
which rows and the runner says what to do about them.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.names import child_old, references
from sqla_ids.migration.core.phases import Check

#: Rows named per problem.
EXAMPLES = 5


def _examples(connection: Connection, query: sa.Select[Any], key: sa.ColumnElement[Any]) -> str:
    found = connection.execute(query.with_only_columns(key).limit(EXAMPLES)).scalars().all()
    return ", ".join(str(k) for k in found)


def _count(connection: Connection, query: sa.Select[Any]) -> int:
    return int(connection.execute(query.with_only_columns(sa.func.count())).scalar_one())


def _problem(
    connection: Connection,
    query: sa.Select[Any],
    key: sa.ColumnElement[Any],
    what: str,
) -> str | None:
    found = _count(connection, query)
    if not found:
        return None
    return f"{found} {what} (e.g. {key.name} {_examples(connection, query, key)})"


def verify(
    connection: Connection, plan: PkMigrationPlan, check: Check, keys: dict[str, str]
) -> list[str]:
    """The problems ``check`` finds (empty: none); ``keys`` gives each child
    table's primary key column (to name rows)."""
    mapping = sa.table(plan.mapping_table, sa.column("old_key"), sa.column("new_key")).alias("x")
    swapped = check is not Check.FORWARD
    old_key = plan.old_column if swapped else plan.column
    new_key = plan.column if swapped else plan.temp_column(plan.table, plan.column)
    parent = sa.table(plan.table, sa.column(old_key), sa.column(new_key)).alias("p")
    po, pn = parent.c[old_key], parent.c[new_key]
    problems: list[str | None] = []
    base = sa.select(sa.literal(1)).select_from(parent.outerjoin(mapping, mapping.c.old_key == po))
    problems.append(
        _problem(
            connection,
            base.where(po.is_not(None), mapping.c.new_key.is_distinct_from(pn)),
            pn,
            f"{plan.table} rows whose new key is not the one mapped to their old key",
        )
    )
    if check is Check.RESTORABLE:
        problems.append(
            _problem(
                connection,
                sa.select(sa.literal(1)).select_from(parent).where(po.is_(None)),
                pn,
                f"{plan.table} rows without an old key (inserted after the swap)",
            )
        )
    for n, ref in references(plan):
        if swapped:
            old, new = child_old(plan, n, ref), ref.column
        else:
            old, new = ref.column, plan.temp_column(ref.table, ref.column)
        pk = keys[ref.table]
        child = sa.table(ref.table, *map(sa.column, dict.fromkeys([old, new, pk]))).alias("r")
        co, cn, ck = child.c[old], child.c[new], child.c[pk]
        label = f"{ref.table}.{ref.column}"
        if check is Check.RESTORABLE:
            joined = child.outerjoin(mapping, mapping.c.new_key == cn)
            problems.append(
                _problem(
                    connection,
                    sa.select(sa.literal(1))
                    .select_from(joined)
                    .where(
                        sa.or_(
                            sa.and_(cn.is_not(None), mapping.c.old_key.is_distinct_from(co)),
                            sa.and_(cn.is_(None), co.is_not(None)),
                        )
                    ),
                    ck,
                    f"{label} rows whose old value is not their parent's old key",
                )
            )
            continue
        joined = child.outerjoin(mapping, mapping.c.old_key == co)
        if check is Check.FORWARD:
            wrong = sa.or_(
                sa.and_(
                    co.is_not(None),
                    sa.or_(mapping.c.new_key.is_(None), mapping.c.new_key.is_distinct_from(cn)),
                ),
                # A reference set NULL (a cascade) must not keep a new value.
                sa.and_(co.is_(None), cn.is_not(None)),
            )
        else:
            # From the swap on the new side is the reference: an old value no
            # parent maps (a placeholder of a row written before its parent)
            # says nothing, nor one whose parent is gone (a cascade while the
            # triggers turned round: MariaDB's swap is statements that each
            # commit, and a run killed between them left the parent's mapping
            # row behind; cascades fire no trigger there); one that maps to a
            # parent elsewhere says a reference was lost.
            there = sa.table(plan.table, sa.column(new_key)).alias("still")
            wrong = sa.and_(co.is_not(None), mapping.c.new_key.is_distinct_from(cn))
            wrong = sa.and_(
                wrong,
                mapping.c.new_key.is_not(None),
                sa.exists().where(there.c[new_key] == mapping.c.new_key),
            )
        problems.append(
            _problem(
                connection,
                sa.select(sa.literal(1)).select_from(joined).where(wrong),
                ck,
                f"{label} rows whose new value is not their parent's new key",
            )
        )
    return [p for p in problems if p is not None]
