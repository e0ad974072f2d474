"""Merging duplicate UUIDs: several ids that denote one object become one id.

Every reference (declared FKs, found like the key migration finds them, plus
``extra_references``) is rewritten from the merged id to the kept one, the
merged rows are deleted, and each merge is recorded in a history table with
the merged row's full content and the references rewritten, so nothing is
lost. Everything is checked before the first change (ids exist, no chains,
no unique key of a referencing table would collide) and the changes run in
one transaction (all are DML).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.identifiers import parse_uuid
from sqla_ids.migration.backends import backend_for
from sqla_ids.migration.core.mapping import uuid_type
from sqla_ids.migration.core.reflected import Inspector, create_table, inspect
from sqla_ids.migration.core.sql import examples
from sqla_ids.migration.plan import Reference, refuse

#: Suffix of the history table (``customer`` -> ``customer_uuid_merges``).
HISTORY_SUFFIX = "_uuid_merges"


def history_table(name: str, key_type: sa.types.TypeEngine[Any]) -> sa.Table:
    """The history table: one row per merged id."""
    return sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("merged_id", key_type, nullable=False),
        sa.Column("kept_id", key_type, nullable=False),
        sa.Column("merged_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("row_data", sa.Text, nullable=False),
        sa.Column("references_rewritten", sa.Text, nullable=False),
    )


def _key(value: Any, key_type: sa.types.TypeEngine[Any]) -> Any:
    if isinstance(key_type, sa.Integer):
        return int(value)
    return value if isinstance(value, uuid.UUID) else parse_uuid(str(value))


def merge_uuids(
    connection: Connection,
    table: str,
    merges: Mapping[Any, Any],
    *,
    history: str | None = None,
    extra_references: Sequence[tuple[str, str]] = (),
) -> int:
    """Replace each ``merged -> kept`` id of ``merges`` everywhere; return the rows merged."""
    inspector = inspect(connection)
    if table not in inspector.get_table_names():
        raise refuse(f"table {table!r} does not exist")
    pk_cols = inspector.get_pk_constraint(table).get("constrained_columns") or []
    if len(pk_cols) != 1:
        raise refuse(f"table {table!r} needs a single-column primary key, has {pk_cols}")
    column = pk_cols[0]
    reflected = {c["name"]: c for c in inspector.get_columns(table)}
    key_type = (
        reflected[column]["type"]
        if isinstance(reflected[column]["type"], sa.Integer)
        else uuid_type()
    )
    pairs = {_key(m, key_type): _key(k, key_type) for m, k in merges.items()}
    if not pairs:
        raise ValueError("merges is empty: give at least one merged_id -> kept_id pair")
    for merged, kept in pairs.items():
        if merged == kept:
            raise refuse(f"id {merged} is merged into itself")
        if kept in pairs:
            raise refuse(f"id {kept} is kept for {merged} but is itself merged into {pairs[kept]}")
    # From the inspector's columns, not autoload_with=: SQLAlchemy's reflection of
    # MariaDB doubles a backtick in a column's name (see core.reflected).
    parent = sa.Table(
        table,
        sa.MetaData(),
        *(sa.Column(c["name"], c["type"]) for c in reflected.values()),
    )
    key = sa.column(column, key_type)
    ids = list(pairs) + list(set(pairs.values()))
    found = set(
        connection.execute(
            sa.select(key).select_from(sa.table(table, key)).where(key.in_(ids))
        ).scalars()
    )
    missing = [i for i in ids if i not in found]
    if missing:
        raise refuse(f"{table}.{column} has no row with id {', '.join(map(str, missing))}")
    reflect = backend_for(connection).reflect
    references: list[Reference] = reflect.find_references(connection, inspector, table, column)
    references += [Reference(t, c, True, "") for t, c in extra_references]
    _refuse_collisions(connection, inspector, references, pairs, key_type)

    history = history or f"{table}{HISTORY_SUFFIX}"
    log = history_table(history, key_type)
    create_table(connection, log)
    if connection.in_transaction():
        _apply(connection, parent, column, key_type, pairs, references, log)
    else:
        with connection.begin():
            _apply(connection, parent, column, key_type, pairs, references, log)
    return len(pairs)


def _apply(
    connection: Connection,
    parent: sa.Table,
    column: str,
    key_type: sa.types.TypeEngine[Any],
    pairs: dict[Any, Any],
    references: list[Reference],
    log: sa.Table,
) -> None:
    """Rewrite references, move merged rows to the history, verify (one transaction)."""
    now = datetime.now(UTC)
    for merged, kept in pairs.items():
        rewritten: dict[str, int] = {}
        for ref in references:
            col = sa.column(ref.column, key_type)
            child = sa.table(ref.table, col)
            count = connection.execute(
                sa.update(child).where(col == merged).values({ref.column: kept})
            ).rowcount
            rewritten[f"{ref.table}.{ref.column}"] = int(count)
        row = (
            connection.execute(sa.select(parent).where(parent.c[column] == merged)).mappings().one()
        )
        connection.execute(sa.delete(parent).where(parent.c[column] == merged))
        connection.execute(
            sa.insert(log).values(
                merged_id=merged,
                kept_id=kept,
                merged_at=now,
                row_data=json.dumps(dict(row), default=str, sort_keys=True),
                references_rewritten=json.dumps(rewritten, sort_keys=True),
            )
        )
    for ref in references:
        col = sa.column(ref.column, key_type)
        left = connection.execute(
            sa.select(sa.func.count())
            .select_from(sa.table(ref.table, col))
            .where(col.in_(list(pairs)))
        ).scalar_one()
        if left:
            still = (
                sa.select(col)
                .select_from(sa.table(ref.table, col))
                .where(col.in_(list(pairs)))
                .distinct()
            )
            raise MigrationVerificationError(
                f"{ref.table}.{ref.column} still holds {left} merged id(s) after the rewrite"
                f" (first: {examples(connection, still)}): something wrote them back (a"
                f" trigger on {ref.table}, or a writer meanwhile); rolled back, nothing"
                " changed. Find what writes them and run merge_uuids again"
            )


def _refuse_collisions(
    connection: Connection,
    inspector: Inspector,
    references: list[Reference],
    pairs: dict[Any, Any],
    key_type: sa.types.TypeEngine[Any],
) -> None:
    """A child whose unique key contains the reference would get duplicates."""
    for ref in references:
        keys = [inspector.get_pk_constraint(ref.table).get("constrained_columns") or []]
        keys += [u["column_names"] for u in inspector.get_unique_constraints(ref.table)]
        keys += [
            [c for c in i["column_names"] if c is not None]
            for i in inspector.get_indexes(ref.table)
            if i["unique"]
        ]
        for unique in keys:
            if ref.column not in unique:
                continue
            others: list[sa.ColumnClause[Any]] = [sa.column(c) for c in unique if c != ref.column]
            col = sa.column(ref.column, key_type)
            child = sa.table(ref.table, col, *others)
            for merged, kept in pairs.items():
                query = (
                    sa.select(sa.func.count())
                    .select_from(child)
                    .where(col.in_([merged, kept]))
                    .group_by(*others)
                    .having(sa.func.count(sa.distinct(col)) > 1)
                )
                if not others:
                    query = (
                        sa.select(sa.func.count())
                        .select_from(child)
                        .where(col.in_([merged, kept]))
                        .having(sa.func.count() > 1)
                    )
                if connection.execute(query).first():
                    raise MigrationRefusedError(
                        f"cannot merge {merged} into {kept}: {ref.table} has a unique key"
                        f" ({', '.join(unique)}) that would hold both; nothing was changed"
                    )
