"""``op.add_uuid7_key`` and its reverse ``op.drop_uuid7_key``.

For tables without a primary key (logs, imports, link tables, tables whose
"key" is a unique constraint)::

    def upgrade():
        op.add_uuid7_key("event_log", timestamp_column="logged_at", order_by=["logged_at", "seq"])

    def downgrade():
        op.drop_uuid7_key("event_log")

The work is done by :mod:`sqla_ids.migration.add_key`; PostgreSQL and SQLite
run in the migration's transaction, MariaDB (implicit DDL commits) and the
online mode in an autocommit block (the drop of a key added online too).
Offline ``--sql`` mode is refused: the keys are computed from the rows.
"""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import renderers
from alembic.autogenerate.api import AutogenContext
from alembic.operations import MigrateOperation, Operations

from sqla_ids.alembic.migrate_pk import _run, refuse_offline
from sqla_ids.alembic.render import import_operations
from sqla_ids.migration.add_key import add_uuid7_key, drop_uuid7_key
from sqla_ids.migration.core.added_key import (
    AddKeyOptions,
    build_add_key_options,
    load_record,
)


@Operations.register_operation("add_uuid7_key")
class AddUUID7KeyOp(MigrateOperation):
    """Add a UUIDv7 primary key to a table that has none, filled in a chosen order."""

    def __init__(
        self, table_name: str, options: AddKeyOptions | None = None, **overrides: Any
    ) -> None:
        self.table_name = table_name
        self.options = build_add_key_options(options, overrides)

    @classmethod
    def add_uuid7_key(
        cls,
        operations: Operations,
        table_name: str,
        options: AddKeyOptions | None = None,
        **overrides: Any,
    ) -> Any:
        """Add a UUIDv7 primary key to ``table_name``.

        Options (all optional, see :class:`~sqla_ids.migration.core.added_key.AddKeyOptions`):
        ``column`` (default ``"id"``), the order -- ``unique_key="uq_name"``,
        ``order_by=["col", ...]`` or ``timestamp_column="created_at"`` (whose
        times the keys carry), else the physical order -- ``keep_unique_key``,
        ``batch_size``, ``seed``, ``server_default``.
        """
        return operations.invoke(cls(table_name, options, **overrides))

    def reverse(self) -> MigrateOperation:
        """``op.drop_uuid7_key``: the column goes, what it replaced comes back."""
        return DropUUID7KeyOp(self.table_name, self.options)

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("add_uuid7_key", self.table_name, self.options.column)


@Operations.register_operation("drop_uuid7_key")
class DropUUID7KeyOp(MigrateOperation):
    """Undo ``op.add_uuid7_key`` (from its record: what was there comes back)."""

    def __init__(
        self, table_name: str, options: AddKeyOptions | None = None, **overrides: Any
    ) -> None:
        self.table_name = table_name
        # Only for reverse(): the downgrade itself reads what the upgrade recorded.
        self.options = build_add_key_options(options, overrides)

    @classmethod
    def drop_uuid7_key(
        cls,
        operations: Operations,
        table_name: str,
        options: AddKeyOptions | None = None,
        **overrides: Any,
    ) -> Any:
        """Drop the UUIDv7 key ``op.add_uuid7_key`` added to ``table_name``; what it
        replaced comes back as the upgrade recorded it. ``options`` (those of the
        ``op.add_uuid7_key`` it undoes, as autogenerate's ``reverse()`` writes them)
        only make ``reverse()`` give that operation back."""
        return operations.invoke(cls(table_name, options, **overrides))

    def reverse(self) -> MigrateOperation:
        """``op.add_uuid7_key`` with the options this operation was reversed from."""
        return AddUUID7KeyOp(self.table_name, self.options)

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("drop_uuid7_key", self.table_name)


@Operations.implementation_for(AddUUID7KeyOp)
def _add(operations: Operations, operation: AddUUID7KeyOp) -> None:
    refuse_offline(operations, "add_uuid7_key")
    _run(
        operations,
        lambda conn: add_uuid7_key(conn, operation.table_name, operation.options),
        online=operation.options.online,
    )


@Operations.implementation_for(DropUUID7KeyOp)
def _drop(operations: Operations, operation: DropUUID7KeyOp) -> None:
    refuse_offline(operations, "drop_uuid7_key")
    # A key added online is dropped online too -- in an autocommit block, as it was
    # added: in the downgrade's transaction, PostgreSQL would build the index of the
    # unique key that keep_unique_key=False dropped under the table's lock, the
    # application's writes waiting for the whole build; in autocommit mode it builds
    # it CONCURRENTLY. (From the record: a hand-written downgrade names no options.)
    online = operation.options.online or _added_online(operations, operation.table_name)
    _run(operations, lambda conn: drop_uuid7_key(conn, operation.table_name), online=online)


def _added_online(operations: Operations, table: str) -> bool:
    """Whether the recorded ``add_uuid7_key`` of ``table`` ran online. The read
    leaves the connection as it found it: a transaction it began is rolled back
    (Alembic's autocommit block accepts only its own)."""
    connection = operations.get_bind()
    began = not connection.in_transaction()
    recorded = load_record(connection, table)
    if began:
        connection.rollback()
    return recorded is not None and recorded.options.online


@renderers.dispatch_for(AddUUID7KeyOp)
def _render_add(autogen_context: AutogenContext, op: AddUUID7KeyOp) -> str:
    import_operations(autogen_context)
    args = [repr(op.table_name)]
    args += [f"{name}={value!r}" for name, value in op.options.to_dict().items()]
    return f"op.add_uuid7_key({', '.join(args)})"


@renderers.dispatch_for(DropUUID7KeyOp)
def _render_drop(autogen_context: AutogenContext, op: DropUUID7KeyOp) -> str:
    import_operations(autogen_context)
    args = [repr(op.table_name)]
    args += [f"{name}={value!r}" for name, value in op.options.to_dict().items()]
    return f"op.drop_uuid7_key({', '.join(args)})"
