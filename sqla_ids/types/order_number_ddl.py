"""What a ``FormattedOrderNumber`` column adds to its table: CHECK, sequence, default.

:func:`attach_to_column` listens to the type's ``after_parent_attach`` event
(registered in :mod:`sqla_ids.types.order_number`), then to the column's, so
it runs once the column belongs to a table -- declaratively, with
``sa.Table(...)``, ``Table.to_metadata()`` or Alembic's ``op.create_table``:

* the CHECK constraint :func:`order_number_check_name` (the format, in the
  database's regex or ``GLOB`` syntax: :class:`OrderNumberFormatCheck`);
* with a sequence, ``before_create``/``after_drop`` listeners on the table
  that create it (recording the table and column as its owner) and drop it,
  and the column default that draws the next number
  (:class:`~sqla_ids.types.order_number_sequence.OrderNumberSequence`).

Two private SQLAlchemy arguments remain, as SQLAlchemy has no public
equivalent: ``_type_bound=True`` (the CHECK belongs to the type, like
``Enum``'s: not copied with the table, left out of Alembic's rendered
``create_table``) and ``_set_parent_with_dispatch`` (giving an existing
column its default).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal

from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.order_number_owner import OrderNumberOwner
from sqla_ids.order_numbers.format import OrderNumberFormat
from sqla_ids.types.per_row import refuse_insert_from_select

if TYPE_CHECKING:
    from sqla_ids.types.order_number import FormattedOrderNumber
    from sqla_ids.types.order_number_sequence import OrderNumberSequence

__all__ = ["OrderNumberFormatCheck", "attach_to_column", "order_number_check_name"]

#: Longest constraint name kept (PostgreSQL's identifier limit).
_MAX_NAME = 63

#: Prefix of the table Alembic's batch mode copies a table into (``_calc_temp_name``).
ALEMBIC_BATCH_PREFIX = "_alembic_tmp_"


def order_number_check_name(table_name: str, column_name: str) -> str:
    """Name of the CHECK constraint on the format of ``table_name.column_name``.

    >>> order_number_check_name("orders", "number")
    'ck_orders_number_format'
    """
    return f"ck_{table_name}_{column_name}_format"[:_MAX_NAME]


class OrderNumberFormatCheck(ColumnElement[bool]):
    """SQL condition "this column holds a well-formed number", rendered per dialect."""

    inherit_cache = False
    type = sa.Boolean()
    # Lets CheckConstraint find the column (dialects inspect a type-bound
    # constraint's column).
    _traverse_internals = [("column", InternalTraversal.dp_clauseelement)]  # noqa: RUF012

    def __init__(self, column: sa.Column[Any], format: OrderNumberFormat) -> None:
        self.column = column
        self.format = format


@compiles(OrderNumberFormatCheck)
def _compile_format_check(element: OrderNumberFormatCheck, compiler: SQLCompiler, **kw: Any) -> str:
    column_sql = compiler.preparer.quote(element.column.name)
    text: str = for_dialect(compiler.dialect).order_number_format_check(column_sql, element.format)
    return text


def attach_to_column(type_: FormattedOrderNumber, column: Any) -> None:
    """``after_parent_attach`` of the type: wire the column's table once it has one."""
    if not isinstance(column, sa.Column):
        return

    def attach_to_table(target: sa.Column[Any], table: Any) -> None:
        if isinstance(table, sa.Table):
            _attach(type_, target, table)

    table = getattr(column, "table", None)  # None, or unset before SQLAlchemy 2.1
    if table is not None:
        attach_to_table(column, table)
    else:
        event.listen(column, "after_parent_attach", attach_to_table)


def _attach(type_: FormattedOrderNumber, column: sa.Column[Any], table: sa.Table) -> None:
    # Alembic's batch mode builds the new table as ``_alembic_tmp_<name>``, copies
    # the rows with INSERT ... SELECT and renames it: the CHECK keeps the real
    # table's name, and the copy gets no default (computed once per statement, it
    # would give every copied row the same number) nor the sequence's listeners
    # (``op.add_column`` creates the sequence, recording the real table).
    batch_copy = table.name.startswith(ALEMBIC_BATCH_PREFIX)
    table_name = table.name.removeprefix(ALEMBIC_BATCH_PREFIX)
    if type_.check_constraint:
        check = OrderNumberFormatCheck(column, type_.order_numbers.format)
        name = order_number_check_name(table_name, column.name)
        table.append_constraint(sa.CheckConstraint(check, name=name, _type_bound=True))
    sequence = type_.number_sequence
    if batch_copy:
        # The column is a copy of the one given to batch_op.add_column, default included.
        if isinstance(column.default, sa.ColumnDefault) and isinstance(
            column.default.arg, _NextOrderNumber
        ):
            column.default = None
        return
    if sequence is None:
        return
    owner = OrderNumberOwner(table.name, column.name)
    # The sequence lives in the table's schema as the connection names it:
    # schema_translate_map (one schema per tenant) moves both, as SQLAlchemy
    # moves the table.

    def create(target: sa.Table, connection: Connection, **kw: Any) -> None:
        sequence.create(connection, connection.schema_for_object(target), owner)

    def drop(target: sa.Table, connection: Connection, **kw: Any) -> None:
        sequence.drop(connection, connection.schema_for_object(target))

    event.listen(table, "before_create", create)
    event.listen(table, "after_drop", drop)
    if column.default is None and column.server_default is None:
        default = _NextOrderNumber(sequence, table)
        sa.ColumnDefault(default)._set_parent_with_dispatch(column)


class _NextOrderNumber:
    """The column default: the next number of the sequence (a class, so that a
    batch copy of the column can recognise and drop it)."""

    def __init__(self, sequence: OrderNumberSequence, table: sa.Table) -> None:
        self.sequence = sequence
        self.table = table

    def __call__(self, context: DefaultExecutionContext) -> str:
        refuse_insert_from_select(
            context,
            "order number",
            "to give a table with rows this column, use op.add_order_number_column(table, "
            "column, type_), which numbers the existing rows in key order",
        )
        connection = context.connection
        return self.sequence.next_number(connection, connection.schema_for_object(self.table))
