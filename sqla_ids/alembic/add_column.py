"""``op.add_column`` / ``batch_op.add_column`` of a column sqla_ids fills per row.

Alembic adds a column with ``ALTER TABLE … ADD COLUMN`` (or, in batch mode on
SQLite, by copying the table with ``INSERT … SELECT``). Neither runs what
``CREATE TABLE`` runs for sqla_ids' columns, and neither fills existing rows
one by one:

* a ``FormattedOrderNumber(sequence=...)`` column: its sequence was never
  created, and existing rows got ``NULL`` (``ALTER``) or all the same number
  (batch copy: SQLAlchemy computes the client-side default once per
  statement). Existing rows need ``op.add_order_number_column``, which
  numbers them in key order; so a table with rows is refused here, naming
  the column, before anything changes. An empty table gets the sequence
  (recording the table) and the column.
* a ``UUIDv7ServerDefault`` column on MariaDB/MySQL: the ``DEFAULT`` there is
  a nil placeholder that a ``BEFORE INSERT`` trigger replaces, and
  ``ALTER TABLE`` creates no trigger: every row, old and new, kept the nil
  UUID. The trigger is created after the column, and existing rows get
  ``sqla_ids_uuid7()`` (one call per row).

Alembic's own implementation does the rest (Alembic's documented way to
extend a built-in operation: ``Operations.implementation_for(..., replace=True)``).
Importing this module installs it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.operations import BatchOperations, Operations, ops
from alembic.operations.toimpl import add_column as alembic_add_column

from sqla_ids.alembic.uuid7_function_ops import column_trigger_sql, execute_statement
from sqla_ids.dialects.order_number_owner import OrderNumberOwner
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.types.order_number import FormattedOrderNumber
from sqla_ids.types.server_functions import (
    UUID7_FUNCTION,
    UUID7_SERIAL_FUNCTION,
    UUIDv7ServerDefault,
)

__all__ = ["add_column"]


def _has_rows(operations: Operations, table: str, schema: str | None) -> bool:
    bind = operations.get_bind()
    query = sa.select(sa.literal(1)).select_from(sa.table(table, schema=schema)).limit(1)
    return bind.execute(query).first() is not None


def _add_numbered_column(operations: Operations, operation: ops.AddColumnOp) -> None:
    column = operation.column
    type_ = column.type
    assert isinstance(type_, FormattedOrderNumber) and type_.number_sequence is not None
    table, schema = operation.table_name, operation.schema
    as_sql = operations.get_context().as_sql
    if not as_sql and _has_rows(operations, table, schema):
        raise MigrationRefusedError(
            f"op.add_column({table!r}, {column.name!r}): the table has rows and a "
            "FormattedOrderNumber column must number each of them (add_column would leave "
            "them NULL, batch mode would give them all the same number); use "
            f"op.add_order_number_column({table!r}, {column.name!r}, <type>, "
            "key_column=<key>) instead, which numbers the existing rows in key order "
            "(autogenerate writes it when env.py uses sqla_ids.alembic.hooks)"
        )
    bind = operations.get_bind()
    if not (as_sql and bind.dialect.name == "sqlite"):  # SQLite's counters need a live table
        type_.number_sequence.create(bind, schema, OrderNumberOwner(table, column.name))
    alembic_add_column(operations, operation)


def _add_server_keyed_column(operations: Operations, operation: ops.AddColumnOp) -> None:
    column = operation.column
    default = column.server_default
    assert isinstance(default, UUIDv7ServerDefault)
    trigger = column_trigger_sql(
        operations.get_context().dialect,
        operation.table_name,
        column.name,
        schema=operation.schema,
        serial=default.serial,
    )
    if not trigger:  # the DEFAULT itself calls the function (every row, old and new)
        alembic_add_column(operations, operation)
        return
    if isinstance(operations, BatchOperations):
        # MariaDB's batch mode alters in place at the end of the block; the trigger
        # and the rows need the column now, so it is added now.
        operations = Operations(operations.get_context())
    alembic_add_column(operations, operation)
    for statement in trigger:
        execute_statement(operations, statement)
    # The rows the table had got the placeholder: one function call each.
    function: sa.sql.functions.Function[Any] = sa.sql.functions.Function(
        UUID7_SERIAL_FUNCTION if default.serial else UUID7_FUNCTION
    )
    target = sa.table(operation.table_name, sa.column(column.name), schema=operation.schema)
    operations.execute(target.update().values({column.name: function}))


@Operations.implementation_for(ops.AddColumnOp, replace=True)
def add_column(operations: Operations, operation: ops.AddColumnOp) -> None:
    """Alembic's ``add_column``, plus what sqla_ids' per-row columns need (module docs)."""
    column = operation.column
    if isinstance(column.type, FormattedOrderNumber) and column.type.sequence is not None:
        _add_numbered_column(operations, operation)
    elif isinstance(column.server_default, UUIDv7ServerDefault):
        _add_server_keyed_column(operations, operation)
    else:
        alembic_add_column(operations, operation)
