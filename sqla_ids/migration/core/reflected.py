"""Reflection through SQLAlchemy's inspector, in the schema the connection works in now.

SQLAlchemy's MySQL/MariaDB inspector takes "no schema" for the database the
engine first connected to (``dialect.default_schema_name``), not the one a
connection has since chosen with ``USE`` -- as a multi-tenant application
does per connection. :func:`inspect` gives an inspector that asks about the
connection's current database there (PostgreSQL resolves names through the
connection's ``search_path`` already, SQLite has one schema); every read of
the migration goes through it, so it never looks at another tenant's table
of the same name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.base import UnsupportedDialectError, for_dialect
from sqla_ids.dialects.sql import query_sql


def current_schema(connection: Connection) -> str | None:
    """The schema to name in inspector calls (``None``: the inspector's default is right)."""
    if connection.dialect.name != "mysql":
        return None
    current = query_sql(connection, "SELECT DATABASE()").scalar()
    if current is None or current == connection.dialect.default_schema_name:
        return None
    return str(current)


def _unquoted(found: dict[str, Any], name: Callable[[str], str], *keys: str) -> dict[str, Any]:
    """``found`` with the names under ``keys`` (a name or a list) as the database has them."""

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return name(value)
        return [fix(v) for v in value] if isinstance(value, list) else value

    return {key: fix(value) if key in keys else value for key, value in found.items()}


def _as_reflected(name: str) -> str:
    return name


class Inspector:
    """The inspector calls the migration makes, in :func:`current_schema`; on
    MariaDB/MySQL the names of columns, keys and indexes with a backtick as they
    are (see :meth:`~sqla_ids.dialects.base.Database.reflected_name`)."""

    def __init__(self, connection: Connection) -> None:
        self.inner = sa.inspect(connection)
        self.schema = current_schema(connection)
        self.name: Callable[[str], str] = _as_reflected
        # (A database not one of ours: the names as reflected.)
        with contextlib.suppress(UnsupportedDialectError):
            self.name = for_dialect(connection.dialect).reflected_name

    def get_table_names(self) -> list[str]:
        """Tables of the schema."""
        return list(self.inner.get_table_names(schema=self.schema))

    def has_table(self, table: str) -> bool:
        """Whether ``table`` exists in the schema."""
        return bool(self.inner.has_table(table, schema=self.schema))

    def get_columns(self, table: str) -> list[Any]:
        """SQLAlchemy's reflected columns of ``table``."""
        found = self.inner.get_columns(table, schema=self.schema)
        return [_unquoted(dict(column), self.name, "name") for column in found]

    def get_pk_constraint(self, table: str) -> Any:
        """SQLAlchemy's reflected primary key of ``table``."""
        found = self.inner.get_pk_constraint(table, schema=self.schema)
        return _unquoted(dict(found), self.name, "constrained_columns", "name")

    def get_foreign_keys(self, table: str) -> list[Any]:
        """SQLAlchemy's reflected foreign keys of ``table``."""
        return list(self.inner.get_foreign_keys(table, schema=self.schema))

    def get_indexes(self, table: str) -> list[Any]:
        """SQLAlchemy's reflected indexes of ``table``."""
        found = self.inner.get_indexes(table, schema=self.schema)
        keys = ("name", "column_names", "duplicates_constraint")
        return [_unquoted(dict(index), self.name, *keys) for index in found]

    def get_unique_constraints(self, table: str) -> list[Any]:
        """SQLAlchemy's reflected unique constraints of ``table``."""
        found = self.inner.get_unique_constraints(table, schema=self.schema)
        keys = ("name", "column_names", "duplicates_index")
        return [_unquoted(dict(unique), self.name, *keys) for unique in found]


def inspect(connection: Connection) -> Inspector:
    """An :class:`Inspector` for ``connection`` as it is now."""
    return Inspector(connection)


def create_table(connection: Connection, table: sa.Table) -> None:
    """``table`` created where the connection works, unless it exists there."""
    if not inspect(connection).has_table(table.name):
        table.create(connection)


def drop_table(connection: Connection, table: sa.Table) -> None:
    """``table`` dropped where the connection works, if it exists there."""
    if inspect(connection).has_table(table.name):
        table.drop(connection)


def primary_key(
    connection: Connection, inspector: Inspector, table: str
) -> tuple[str | None, list[str]]:
    """The primary key's name (if declared) and columns."""
    pk = inspector.get_pk_constraint(table)
    return pk.get("name"), list(pk.get("constrained_columns") or [])


def columns(connection: Connection, inspector: Inspector, table: str) -> dict[str, Any]:
    """The table's columns by name (SQLAlchemy's reflection)."""
    return {c["name"]: c for c in inspector.get_columns(table)}
