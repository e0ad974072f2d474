"""Partition keys from UUIDv7 columns, in SQL.

:func:`uuid7_partition_key` is the SQL twin of
:func:`sqla_ids.partition_bucket` (``unix_ts_ms >> bucket_bits`` read from the
UUID's first 12 hex digits); :func:`create_month_partitions` creates
PostgreSQL range partitions, one per calendar month, bounded by UUIDv7 values.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import FromClause
from sqlalchemy.sql.visitors import InternalTraversal

from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.sql import execute_sql
from sqla_ids.identifiers import month_partitions
from sqla_ids.identifiers.partition import DEFAULT_BUCKET_BITS


class _PartitionKey(ColumnElement[int]):
    inherit_cache = True
    type = sa.BigInteger()

    def __init__(self, expr: ColumnElement[Any], bucket_bits: int) -> None:
        self.expr = expr
        self.bucket_bits = bucket_bits

    @property
    def _from_objects(self) -> list[FromClause]:
        # Lets SELECT find the FROM clause of the wrapped column.
        return self.expr._from_objects

    # Cache key: both the column and the bucket width change the SQL.
    _traverse_internals = [  # noqa: RUF012 - SQLAlchemy convention
        ("expr", InternalTraversal.dp_clauseelement),
        ("bucket_bits", InternalTraversal.dp_plain_obj),
    ]


def uuid7_partition_key(
    expr: ColumnElement[Any], bucket_bits: int = DEFAULT_BUCKET_BITS
) -> ColumnElement[int]:
    """SQL expression: the time bucket (``unix_ts_ms >> bucket_bits``) of a UUIDv7 column.

    Same value as :func:`sqla_ids.partition_bucket` on every dialect.
    """
    if not isinstance(bucket_bits, int) or not 0 <= bucket_bits < 48:
        raise ValueError(f"bucket_bits must be an integer from 0 to 47, got {bucket_bits!r}")
    return _PartitionKey(expr, bucket_bits)


@compiles(_PartitionKey)
def _compile_partition_key(element: _PartitionKey, compiler: Any, **kw: Any) -> str:
    inner = compiler.process(element.expr, **kw)
    sql = for_dialect(compiler.dialect).uuid7_timestamp_ms_sql(inner)
    return f"({sql} >> {element.bucket_bits})"


def month_partition_ddl(
    table: str, first: date, months: int, *, schema: str | None = None
) -> list[str]:
    """PostgreSQL ``CREATE TABLE … PARTITION OF`` statements, one per month from ``first``.

    Partitions are named ``<table>_pYYYY_MM`` and bounded by
    ``lowest_uuid7`` of each month's first instant (half-open ranges).
    """
    database = for_dialect("postgresql")
    return [
        database.uuid7_month_partition_sql(table, schema, f"{table}_{p.name}", p.low, p.high)
        for p in month_partitions(first, months)
    ]


def create_month_partitions(
    connection: Connection, table: str, first: date, months: int, *, schema: str | None = None
) -> list[str]:
    """Create monthly range partitions of ``table`` (``PARTITION BY RANGE (id)``) on PostgreSQL.

    Existing partitions are kept (``IF NOT EXISTS``). Returns the statements run.
    """
    database = for_dialect(connection.dialect)
    if not database.range_partitions:
        database.unsupported("UUIDv7 range partitions", "a PostgreSQL feature")
    statements = month_partition_ddl(table, first, months, schema=schema)
    for statement in statements:
        # As written: the names are quoted as the database reads them, and a
        # driver given parameters (none here) would read a % in them.
        execute_sql(connection, statement)
    return statements
