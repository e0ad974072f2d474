"""Reflection through SQLAlchemy's inspector, shared by the MariaDB and SQLite modules."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.plan import Dependent, Reference, refuse


def primary_key(
    connection: Connection, inspector: sa.Inspector, table: str
) -> tuple[str | None, list[str]]:
    """The primary key's name (if declared) and columns."""
    pk = inspector.get_pk_constraint(table)
    return pk.get("name"), list(pk.get("constrained_columns") or [])


def columns(connection: Connection, inspector: sa.Inspector, table: str) -> dict[str, Any]:
    """The table's columns by name (SQLAlchemy's reflection)."""
    return {c["name"]: c for c in inspector.get_columns(table)}


def find_references(
    connection: Connection, inspector: sa.Inspector, table: str, column: str
) -> list[Reference]:
    """Every declared FK whose referred columns include ``table.column``.

    The inspector pairs composite FK columns by ordinal position, so the
    referencing column is the one at the key's position.
    """
    from sqla_ids.migration.dialects import for_dialect

    dialect = for_dialect(connection.dialect.name)
    refs: list[Reference] = []
    for t in sorted(inspector.get_table_names()):
        cols = {c["name"]: c for c in inspector.get_columns(t)}
        for fk in inspector.get_foreign_keys(t):
            if fk["referred_table"] != table or column not in fk["referred_columns"]:
                continue
            local = fk["constrained_columns"][fk["referred_columns"].index(column)]
            name = fk.get("name")
            if not name and connection.dialect.name != "sqlite":
                raise refuse(f"the foreign key on {t}({local}) has no name")
            refs.append(
                Reference(
                    table=t,
                    column=local,
                    nullable=bool(cols[local]["nullable"]),
                    type_sql=dialect.column_type_sql(connection, t, local),
                    constraint=name or "(unnamed)",
                    columns=list(fk["constrained_columns"]),
                    referred_columns=list(fk["referred_columns"]),
                    options=dict(fk.get("options") or {}),
                )
            )
    return refs


def find_dependents(
    inspector: sa.Inspector, table: str, column: str, affected: dict[str, set[str]]
) -> list[Dependent]:
    """Indexes, unique constraints and child primary keys over affected columns."""
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
