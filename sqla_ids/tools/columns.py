"""Which reflected columns can hold a UUID, and in what storage form.

A column's *kind* decides how the scanning tools look for a UUID in it:

``uuid``      native UUID type (PostgreSQL ``uuid``, MariaDB ``UUID``);
``binary``    bytes (``bytea``, ``BINARY(16)``, ``BLOB``): the 16 raw bytes;
``text``      short strings (``CHAR(32)``, ``CHAR(36)``, ``VARCHAR(n≤64)``):
              equal to one spelling of the UUID;
``document``  long text and JSON/JSONB: the UUID appears somewhere inside;
``array``     PostgreSQL arrays (``uuid[]``, ``text[]``);
``any``       SQLite columns whose declared type gives no affinity hint (SQLite
              stores any value in any column).

The generic classification uses SQLAlchemy's type hierarchy; a dialect module
adds a ``fallback_kind`` for types only it understands.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects import for_dialect

KINDS = ("uuid", "binary", "text", "document", "array", "any")
"""Every column kind, in the order the tools report them."""

# Strings longer than this cannot *be* a UUID spelling, so they are searched as
# documents (the UUID inside) rather than compared for equality.
MAX_TEXT_LENGTH = 64


@dataclass(frozen=True)
class CandidateColumn:
    """A reflected column that may hold UUID values."""

    schema: str | None
    table: str
    column: str
    kind: str
    type_name: str
    nullable: bool
    primary_key: bool
    table_primary_key: tuple[str, ...]
    """The primary-key columns of the column's table (empty when it has none)."""
    type: TypeEngine[Any] = field(compare=False, repr=False)

    @property
    def qualified_name(self) -> str:
        """``schema.table.column`` (without schema when it is the default)."""
        prefix = f"{self.schema}." if self.schema else ""
        return f"{prefix}{self.table}.{self.column}"


def column_kind(sqltype: TypeEngine[Any], dialect: Dialect) -> str | None:
    """Return the kind of a reflected column type, or ``None`` if it cannot hold a UUID."""
    if isinstance(sqltype, sa.Uuid):
        return "uuid"
    if isinstance(sqltype, sa.ARRAY):
        return "array"
    if isinstance(sqltype, sa.JSON):
        return "document"
    if isinstance(sqltype, sa.types._Binary):
        return "binary"
    if isinstance(sqltype, sa.String):
        length = sqltype.length
        if isinstance(sqltype, sa.Text) or length is None or length > MAX_TEXT_LENGTH:
            return "document"
        return "text" if length >= 16 else None
    return for_dialect(dialect).scanning().fallback_kind(sqltype)


def default_schema(connection: Connection, schema: str | None) -> str | None:
    """The schema the tools scan: ``schema`` or the connection's default one."""
    return schema if schema is not None else sa.inspect(connection).default_schema_name


def candidate_columns(
    connection: Connection,
    schema: str | None = None,
    *,
    tables: list[str] | None = None,
) -> list[CandidateColumn]:
    """Return every column of the schema's tables that may hold a UUID.

    ``schema=None`` scans the connection's default schema; ``tables`` limits
    the scan to the named tables (an unknown name is an error).
    """
    inspector = sa.inspect(connection)
    names = sorted(inspector.get_table_names(schema=schema))
    if tables is not None:
        unknown = sorted(set(tables) - set(names))
        if unknown:
            where = f"schema {schema!r}" if schema else "the default schema"
            raise ValueError(f"no table(s) {', '.join(unknown)} in {where}")
        names = [name for name in names if name in set(tables)]
    if not names:
        return []
    # One reflection query per kind of object for the whole schema, not per table.
    columns = inspector.get_multi_columns(schema=schema, filter_names=names)
    keys = inspector.get_multi_pk_constraint(schema=schema, filter_names=names)
    # The names as the database has them (MariaDB: see Database.reflected_name).
    name = for_dialect(connection.dialect).reflected_name
    found: list[CandidateColumn] = []
    for table in names:
        constraint = keys.get((schema, table))
        primary = tuple(name(c) for c in (constraint["constrained_columns"] if constraint else ()))
        for reflected in columns.get((schema, table), []):
            column: dict[str, Any] = {**reflected, "name": name(reflected["name"])}
            kind = column_kind(column["type"], connection.dialect)
            if kind is None:
                continue
            found.append(
                CandidateColumn(
                    schema=schema,
                    table=table,
                    column=column["name"],
                    kind=kind,
                    type_name=str(column["type"].compile(dialect=connection.dialect)),
                    nullable=bool(column.get("nullable", True)),
                    primary_key=column["name"] in primary,
                    table_primary_key=primary,
                    type=column["type"],
                )
            )
    return found


def table_clause(schema: str | None, table: str, *columns: str) -> sa.TableClause:
    """A lightweight, correctly quoted ``FROM`` target for reflected names."""
    return sa.table(table, *(sa.column(name) for name in columns), schema=schema)
