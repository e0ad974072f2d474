"""``op.add_order_number_column``: give an existing table customer-facing numbers.

``create_table`` already creates a ``FormattedOrderNumber``'s sequence and
CHECK constraint; adding the column to a table that has rows needs more:
create the sequence, number the existing rows in a chosen order (oldest order
gets the first number), then add the unique index and, where the dialect can
``ALTER TABLE … ADD CONSTRAINT``, the CHECK constraint::

    op.add_order_number_column(
        "orders", "number", FormattedOrderNumber("shop", sequence="order_numbers"),
        order_by="created_at",
    )

The reverse drops the column, its index and constraint, and the sequence.
Needs a live database (the numbers are drawn from the sequence row by row),
so offline ``--sql`` mode is refused with a clear message.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.operations import MigrateOperation, Operations

from sqla_ids.dialects import for_dialect
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.types.order_number import FormattedOrderNumber
from sqla_ids.types.order_number_ddl import order_number_check_name
from sqla_ids.types.order_number_sequence import OrderNumberSequence

_BACKFILL_BATCH = 500


def _unique_name(table_name: str, column_name: str) -> str:
    return f"uq_{table_name}_{column_name}"[:63]


def _sequence(type_: FormattedOrderNumber) -> OrderNumberSequence:
    sequence = type_.number_sequence
    assert sequence is not None  # checked by AddOrderNumberColumnOp
    return sequence


@Operations.register_operation("add_order_number_column")
class AddOrderNumberColumnOp(MigrateOperation):
    """Add a ``FormattedOrderNumber`` column and number the existing rows."""

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        *,
        key_column: str = "id",
        order_by: str | None = None,
        schema: str | None = None,
    ) -> None:
        if not isinstance(type_, FormattedOrderNumber) or type_.sequence is None:
            raise ValueError(
                "add_order_number_column needs a FormattedOrderNumber with a sequence= name"
            )
        self.table_name = table_name
        self.column_name = column_name
        self.type_ = type_
        self.key_column = key_column
        self.order_by = order_by or key_column
        self.schema = schema

    @classmethod
    def add_order_number_column(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        **options: Any,
    ) -> Any:
        """Add ``column_name`` to ``table_name``; existing rows are numbered by ``order_by``."""
        return operations.invoke(cls(table_name, column_name, type_, **options))

    def reverse(self) -> DropOrderNumberColumnOp:
        """The downgrade: drop the column, its constraints and its sequence."""
        return DropOrderNumberColumnOp(self.table_name, self.column_name, self.type_, self.schema)


@Operations.register_operation("drop_order_number_column")
class DropOrderNumberColumnOp(MigrateOperation):
    """Drop a column added by ``add_order_number_column``, with its sequence."""

    def __init__(
        self,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        schema: str | None = None,
    ) -> None:
        self.table_name = table_name
        self.column_name = column_name
        self.type_ = type_
        self.schema = schema

    @classmethod
    def drop_order_number_column(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str,
        type_: FormattedOrderNumber,
        schema: str | None = None,
    ) -> Any:
        """Drop ``column_name`` and the sequence of ``type_``."""
        return operations.invoke(cls(table_name, column_name, type_, schema))

    def reverse(self) -> AddOrderNumberColumnOp:
        """The upgrade again."""
        return AddOrderNumberColumnOp(self.table_name, self.column_name, self.type_)


def _live_connection(operations: Operations, name: str) -> sa.Connection:
    if operations.get_context().as_sql:
        raise MigrationRefusedError(
            f"op.{name} cannot run in offline --sql mode: existing rows are numbered from the "
            "database sequence one by one; run this migration online"
        )
    return operations.get_bind()


@Operations.implementation_for(AddOrderNumberColumnOp)
def add_order_number_column(operations: Operations, operation: AddOrderNumberColumnOp) -> None:
    """Create the sequence, add and fill the column, then constrain it."""
    connection = _live_connection(operations, "add_order_number_column")
    type_ = operation.type_
    sequence = _sequence(type_)
    dialect = for_dialect(connection.dialect)
    table = sa.table(
        operation.table_name,
        sa.column(operation.key_column),
        sa.column(operation.order_by),
        sa.column(operation.column_name),
        schema=operation.schema,
    )
    # Plain string storage: the type's CHECK and default are added below.
    operations.add_column(
        operation.table_name,
        sa.Column(
            operation.column_name,
            sa.String(type_.order_numbers.format.max_length),
            nullable=True,
        ),
        schema=operation.schema,
    )
    sequence.create(connection, operation.schema)
    keys = (
        connection.execute(
            sa.select(table.c[operation.key_column]).order_by(
                table.c[operation.order_by], table.c[operation.key_column]
            )
        )
        .scalars()
        .all()
    )
    update = (
        table.update()
        .where(table.c[operation.key_column] == sa.bindparam("_key"))
        .values({operation.column_name: sa.bindparam("_number")})
    )
    for start in range(0, len(keys), _BACKFILL_BATCH):
        chunk = keys[start : start + _BACKFILL_BATCH]
        connection.execute(
            update, [{"_key": key, "_number": sequence.next_number(connection)} for key in chunk]
        )
    operations.create_index(
        _unique_name(operation.table_name, operation.column_name),
        operation.table_name,
        [operation.column_name],
        unique=True,
        schema=operation.schema,
    )
    if dialect.alter_table_add_check:
        quoted = connection.dialect.identifier_preparer.quote(operation.column_name)
        condition = dialect.order_number_format_check(quoted, type_.order_numbers.format)
        operations.create_check_constraint(
            order_number_check_name(operation.table_name, operation.column_name),
            operation.table_name,
            sa.text(condition),
            schema=operation.schema,
        )


@Operations.implementation_for(DropOrderNumberColumnOp)
def drop_order_number_column(operations: Operations, operation: DropOrderNumberColumnOp) -> None:
    """Drop the column with its index and CHECK, then its sequence."""
    connection = _live_connection(operations, "drop_order_number_column")
    check_name = order_number_check_name(operation.table_name, operation.column_name)
    inspector = sa.inspect(connection)
    checks = {
        c["name"] for c in inspector.get_check_constraints(operation.table_name, operation.schema)
    }
    if check_name in checks and for_dialect(connection.dialect).alter_table_add_check:
        operations.drop_constraint(
            check_name, operation.table_name, type_="check", schema=operation.schema
        )
    operations.drop_index(
        _unique_name(operation.table_name, operation.column_name),
        operation.table_name,
        schema=operation.schema,
    )
    operations.drop_column(operation.table_name, operation.column_name, schema=operation.schema)
    _sequence(operation.type_).drop(connection, operation.schema)
