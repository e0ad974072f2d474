"""Alembic operations installing the server-side UUIDv7 function.

``op.create_uuid7_function()`` / ``op.drop_uuid7_function()`` (reverses of
each other) and ``op.create_uuid7_trigger(table, column)`` for MariaDB/MySQL,
where a trigger stands in for a function ``DEFAULT``. With ``serial=True``
they handle ``sqla_ids_uuid7_serial()`` (and its sequence) instead. They
emit plain SQL through ``op.execute``, so offline ``alembic upgrade --sql``
prints it.
Importing this module registers the operations.
"""

from __future__ import annotations

from typing import Any

from alembic.operations import MigrateOperation, Operations

from sqla_ids.types.server_functions import (
    uuid7_column_trigger_sql,
    uuid7_function_create_sql,
    uuid7_function_drop_sql,
)


@Operations.register_operation("create_uuid7_function")
class CreateUUID7FunctionOp(MigrateOperation):
    """Create ``sqla_ids_uuid7()`` (nothing on SQLite, where the app registers it)."""

    def __init__(self, serial: bool = False) -> None:
        self.serial = serial

    @classmethod
    def create_uuid7_function(cls, operations: Operations, serial: bool = False) -> Any:
        """Create ``sqla_ids_uuid7()``, or with ``serial=True`` ``sqla_ids_uuid7_serial()``."""
        return operations.invoke(cls(serial))

    def reverse(self) -> DropUUID7FunctionOp:
        """Dropping the function undoes this."""
        return DropUUID7FunctionOp(self.serial)


@Operations.register_operation("drop_uuid7_function")
class DropUUID7FunctionOp(MigrateOperation):
    """Drop ``sqla_ids_uuid7()`` if it exists."""

    def __init__(self, serial: bool = False) -> None:
        self.serial = serial

    @classmethod
    def drop_uuid7_function(cls, operations: Operations, serial: bool = False) -> Any:
        """Drop ``sqla_ids_uuid7()``, or with ``serial=True`` the serial function and sequence."""
        return operations.invoke(cls(serial))

    def reverse(self) -> CreateUUID7FunctionOp:
        """Creating the function undoes this."""
        return CreateUUID7FunctionOp(self.serial)


@Operations.register_operation("create_uuid7_trigger")
class CreateUUID7TriggerOp(MigrateOperation):
    """Fill ``table.column`` from ``sqla_ids_uuid7()`` on insert (MariaDB/MySQL trigger).

    A no-op on PostgreSQL and SQLite, where the column's ``DEFAULT`` calls
    the function directly.
    """

    def __init__(self, table_name: str, column_name: str = "id", serial: bool = False) -> None:
        self.table_name = table_name
        self.column_name = column_name
        self.serial = serial

    @classmethod
    def create_uuid7_trigger(
        cls, operations: Operations, table_name: str, column_name: str = "id", serial: bool = False
    ) -> Any:
        """Add the trigger filling ``table_name.column_name`` with ``sqla_ids_uuid7()``.

        ``serial=True`` calls ``sqla_ids_uuid7_serial()`` instead.
        """
        return operations.invoke(cls(table_name, column_name, serial))


def _dialect_name(operations: Operations) -> str:
    name: str = operations.get_context().dialect.name
    return name


@Operations.implementation_for(CreateUUID7FunctionOp)
def _create_function(operations: Operations, operation: CreateUUID7FunctionOp) -> None:
    for statement in uuid7_function_create_sql(_dialect_name(operations), operation.serial):
        operations.execute(statement)


@Operations.implementation_for(DropUUID7FunctionOp)
def _drop_function(operations: Operations, operation: DropUUID7FunctionOp) -> None:
    for statement in uuid7_function_drop_sql(_dialect_name(operations), operation.serial):
        operations.execute(statement)


@Operations.implementation_for(CreateUUID7TriggerOp)
def _create_trigger(operations: Operations, operation: CreateUUID7TriggerOp) -> None:
    dialect = operations.get_context().dialect
    preparer = dialect.identifier_preparer
    for statement in uuid7_column_trigger_sql(
        dialect.name,
        preparer.quote(operation.table_name),
        preparer.quote(operation.column_name),
        serial=operation.serial,
    ):
        operations.execute(statement)
