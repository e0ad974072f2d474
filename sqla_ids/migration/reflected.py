"""Reflection through SQLAlchemy's inspector, shared by the PostgreSQL and SQLite migrations."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection


def primary_key(
    connection: Connection, inspector: sa.Inspector, table: str
) -> tuple[str | None, list[str]]:
    """The primary key's name (if declared) and columns."""
    pk = inspector.get_pk_constraint(table)
    return pk.get("name"), list(pk.get("constrained_columns") or [])


def columns(connection: Connection, inspector: sa.Inspector, table: str) -> dict[str, Any]:
    """The table's columns by name (SQLAlchemy's reflection)."""
    return {c["name"]: c for c in inspector.get_columns(table)}
