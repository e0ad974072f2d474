"""Alembic operations installing the server-side UUIDv7 function.

``op.create_uuid7_function()`` / ``op.drop_uuid7_function()`` and
``op.create_uuid7_trigger(table, column)`` / ``op.drop_uuid7_trigger(table,
column)`` for MariaDB/MySQL, where a trigger stands in for a function
``DEFAULT`` (each pair are reverses of each other). With ``serial=True``
they handle ``sqla_ids_uuid7_serial()`` (and its sequence) instead. They
emit plain SQL through ``op.execute``, so offline ``alembic upgrade --sql``
prints it. Every operation has a renderer and a ``reverse()`` keeping all
its arguments. Importing this module registers the operations.
"""

from __future__ import annotations

import re
from typing import Any

from alembic.autogenerate import renderers
from alembic.autogenerate.api import AutogenContext
from alembic.operations import MigrateOperation, Operations
from sqlalchemy.engine import Dialect

from sqla_ids.alembic.render import import_operations
from sqla_ids.dialects.sql import quoter, text_sql
from sqla_ids.types.server_functions import (
    uuid7_column_trigger_sql,
    uuid7_function_create_sql,
    uuid7_function_drop_sql,
)


@Operations.register_operation("create_uuid7_function")
class CreateUUID7FunctionOp(MigrateOperation):
    """Create ``sqla_ids_uuid7()`` (nothing on SQLite, where the app registers it).

    ``schema``: the PostgreSQL schema or MariaDB database to create it in; by
    default the one unqualified names are created in. On MariaDB/MySQL a table's
    trigger looks for the function in the table's own database: create it in
    each database whose tables have server-filled UUIDv7 columns.
    """

    def __init__(self, serial: bool = False, *, schema: str | None = None) -> None:
        self.serial = serial
        self.schema = schema

    @classmethod
    def create_uuid7_function(
        cls, operations: Operations, serial: bool = False, *, schema: str | None = None
    ) -> Any:
        """Create ``sqla_ids_uuid7()``, or with ``serial=True`` ``sqla_ids_uuid7_serial()``,
        in ``schema`` (by default the current one)."""
        return operations.invoke(cls(serial, schema=schema))

    def reverse(self) -> DropUUID7FunctionOp:
        """Dropping the function undoes this."""
        return DropUUID7FunctionOp(self.serial, schema=self.schema)

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("add_uuid7_function", self.schema, self.serial)


@Operations.register_operation("drop_uuid7_function")
class DropUUID7FunctionOp(MigrateOperation):
    """Drop ``sqla_ids_uuid7()`` if it exists (``schema`` as for the create)."""

    def __init__(self, serial: bool = False, *, schema: str | None = None) -> None:
        self.serial = serial
        self.schema = schema

    @classmethod
    def drop_uuid7_function(
        cls, operations: Operations, serial: bool = False, *, schema: str | None = None
    ) -> Any:
        """Drop ``sqla_ids_uuid7()``, or with ``serial=True`` the serial function and
        sequence, in ``schema`` (by default the current one)."""
        return operations.invoke(cls(serial, schema=schema))

    def reverse(self) -> CreateUUID7FunctionOp:
        """Creating the function undoes this."""
        return CreateUUID7FunctionOp(self.serial, schema=self.schema)

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("remove_uuid7_function", self.schema, self.serial)


@Operations.register_operation("create_uuid7_trigger")
class CreateUUID7TriggerOp(MigrateOperation):
    """Fill ``table.column`` from ``sqla_ids_uuid7()`` on insert (MariaDB/MySQL trigger).

    A no-op on PostgreSQL and SQLite, where the column's ``DEFAULT`` calls
    the function directly. ``schema`` is the table's schema (database).
    """

    def __init__(
        self,
        table_name: str,
        column_name: str = "id",
        serial: bool = False,
        *,
        schema: str | None = None,
    ) -> None:
        self.table_name = table_name
        self.column_name = column_name
        self.serial = serial
        self.schema = schema

    @classmethod
    def create_uuid7_trigger(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str = "id",
        serial: bool = False,
        *,
        schema: str | None = None,
    ) -> Any:
        """Add the trigger filling ``table_name.column_name`` with ``sqla_ids_uuid7()``.

        ``serial=True`` calls ``sqla_ids_uuid7_serial()`` instead.
        """
        return operations.invoke(cls(table_name, column_name, serial, schema=schema))

    def reverse(self) -> DropUUID7TriggerOp:
        """Dropping the trigger undoes this."""
        return DropUUID7TriggerOp(
            self.table_name, self.column_name, self.serial, schema=self.schema
        )

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("add_uuid7_trigger", self.schema, self.table_name, self.column_name)


@Operations.register_operation("drop_uuid7_trigger")
class DropUUID7TriggerOp(MigrateOperation):
    """Drop the trigger of ``create_uuid7_trigger`` if it exists (a no-op where there is none).

    ``serial`` names the function the trigger called; it is kept for
    :meth:`reverse`.
    """

    def __init__(
        self,
        table_name: str,
        column_name: str = "id",
        serial: bool = False,
        *,
        schema: str | None = None,
    ) -> None:
        self.table_name = table_name
        self.column_name = column_name
        self.serial = serial
        self.schema = schema

    @classmethod
    def drop_uuid7_trigger(
        cls,
        operations: Operations,
        table_name: str,
        column_name: str = "id",
        serial: bool = False,
        *,
        schema: str | None = None,
    ) -> Any:
        """Drop the trigger filling ``table_name.column_name`` (MariaDB/MySQL)."""
        return operations.invoke(cls(table_name, column_name, serial, schema=schema))

    def reverse(self) -> CreateUUID7TriggerOp:
        """Creating the trigger again undoes this."""
        return CreateUUID7TriggerOp(
            self.table_name, self.column_name, self.serial, schema=self.schema
        )

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("remove_uuid7_trigger", self.schema, self.table_name, self.column_name)


@Operations.implementation_for(CreateUUID7FunctionOp)
def _create_function(operations: Operations, operation: CreateUUID7FunctionOp) -> None:
    dialect = operations.get_context().dialect
    for statement in uuid7_function_create_sql(dialect, operation.serial, operation.schema):
        execute_statement(operations, statement)


@Operations.implementation_for(DropUUID7FunctionOp)
def _drop_function(operations: Operations, operation: DropUUID7FunctionOp) -> None:
    dialect = operations.get_context().dialect
    for statement in uuid7_function_drop_sql(dialect, operation.serial, operation.schema):
        execute_statement(operations, statement)


def _trigger_sql(
    operations: Operations, operation: CreateUUID7TriggerOp | DropUUID7TriggerOp
) -> list[str]:
    return column_trigger_sql(
        operations.get_context().dialect,
        operation.table_name,
        operation.column_name,
        schema=operation.schema,
        serial=operation.serial,
    )


def column_trigger_sql(
    dialect: Dialect, table: str, column: str, *, schema: str | None, serial: bool
) -> list[str]:
    """The statements of the trigger filling ``table.column`` (MariaDB/MySQL; none
    elsewhere), each name quoted as the database reads it: SQLAlchemy's preparer
    doubles ``%`` for the statements it compiles, and :func:`execute_statement`
    sends these through ``text()``, which doubles it again."""
    q = quoter(dialect)
    target = q(table) if schema is None else f"{q(schema)}.{q(table)}"
    return uuid7_column_trigger_sql(dialect.name, target, q(column), serial=serial)


def execute_statement(operations: Operations, statement: str) -> None:
    """``op.execute(statement)`` for a complete statement whose quoted names may
    hold ``:x``, which a plain string's ``text()`` would read as a parameter."""
    operations.execute(text_sql(operations.get_context().dialect, statement))


# The trigger's name is chosen by the database's DDL (sqla_ids.dialects); the
# drop reads it from the statement that creates it.
_CREATE_TRIGGER = re.compile(r"CREATE TRIGGER IF NOT EXISTS (.+?) BEFORE INSERT ON ", re.DOTALL)


@Operations.implementation_for(CreateUUID7TriggerOp)
def _create_trigger(operations: Operations, operation: CreateUUID7TriggerOp) -> None:
    for statement in _trigger_sql(operations, operation):
        execute_statement(operations, statement)


@Operations.implementation_for(DropUUID7TriggerOp)
def _drop_trigger(operations: Operations, operation: DropUUID7TriggerOp) -> None:
    for statement in _trigger_sql(operations, operation):
        match = _CREATE_TRIGGER.match(statement)
        if match is None:  # pragma: no cover - every trigger statement has this form
            raise RuntimeError(f"cannot find the trigger name in {statement!r}")
        execute_statement(operations, f"DROP TRIGGER IF EXISTS {match.group(1)}")


# --- renderers ---------------------------------------------------------------------


def _function_arguments(op: CreateUUID7FunctionOp | DropUUID7FunctionOp) -> str:
    args = ["serial=True"] if op.serial else []
    if op.schema is not None:
        args.append(f"schema={op.schema!r}")
    return ", ".join(args)


@renderers.dispatch_for(CreateUUID7FunctionOp)
def _render_create_function(autogen_context: AutogenContext, op: CreateUUID7FunctionOp) -> str:
    import_operations(autogen_context)
    return f"op.create_uuid7_function({_function_arguments(op)})"


@renderers.dispatch_for(DropUUID7FunctionOp)
def _render_drop_function(autogen_context: AutogenContext, op: DropUUID7FunctionOp) -> str:
    import_operations(autogen_context)
    return f"op.drop_uuid7_function({_function_arguments(op)})"


def _trigger_arguments(op: CreateUUID7TriggerOp | DropUUID7TriggerOp) -> str:
    args = [repr(op.table_name)]
    if op.column_name != "id":
        args.append(repr(op.column_name))
    if op.serial:
        args.append("serial=True")
    if op.schema is not None:
        args.append(f"schema={op.schema!r}")
    return ", ".join(args)


@renderers.dispatch_for(CreateUUID7TriggerOp)
def _render_create_trigger(autogen_context: AutogenContext, op: CreateUUID7TriggerOp) -> str:
    import_operations(autogen_context)
    return f"op.create_uuid7_trigger({_trigger_arguments(op)})"


@renderers.dispatch_for(DropUUID7TriggerOp)
def _render_drop_trigger(autogen_context: AutogenContext, op: DropUUID7TriggerOp) -> str:
    import_operations(autogen_context)
    return f"op.drop_uuid7_trigger({_trigger_arguments(op)})"
