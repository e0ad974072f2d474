"""``op.migrate_pk_to_uuid7`` and its reverse ``op.restore_pk_from_uuid7``.

Registered with Alembic's operation plugin API, so a migration script reads::

    def upgrade():
        op.migrate_pk_to_uuid7("orders", timestamp_column="created_at")

    def downgrade():
        op.restore_pk_from_uuid7("orders")

The work is done by :mod:`sqla_ids.migration`. PostgreSQL and SQLite run in
the migration's transaction; on MariaDB/MySQL (implicit DDL commits) the
operation runs in an autocommit block and records its progress so that a
re-run after a crash continues. Offline ``--sql`` mode is refused with a
clear message: the new keys are computed from the rows, so the operation
needs a live database.
"""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import renderers
from alembic.autogenerate.api import AutogenContext
from alembic.operations import MigrateOperation, Operations

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration.dialects import for_dialect


@Operations.register_operation("migrate_pk_to_uuid7")
class MigratePkToUUID7Op(MigrateOperation):
    """Migrate a table's integer/text primary key (and every reference) to UUIDv7."""

    def __init__(self, table_name: str, **options: Any) -> None:
        self.table_name = table_name
        self.options = options

    @classmethod
    def migrate_pk_to_uuid7(cls, operations: Operations, table_name: str, **options: Any) -> Any:
        """Migrate ``table_name``'s key to UUIDv7.

        Options (all optional): ``timestamp_column`` (e.g. ``"created_at"``),
        ``old_column`` (default ``<key>_old``), ``mapping_table`` (default
        ``<table>_uuid7_map``), ``extra_references`` (``[("audit_log",
        "order_ref")]``: plain columns without an FK), ``batch_size``,
        ``seed``, ``keep_child_old_columns``, ``drop_sequence``,
        ``server_default``, ``recreate_views`` and ``dry_run`` (log the plan,
        change nothing).

        ``server_default`` replaces the autoincrement/sequence/identity
        default. ``True`` (the default): UUIDv7 from the server function
        ``sqla_ids_uuid7()``, installed if missing -- PostgreSQL ``DEFAULT
        sqla_ids_uuid7()``; MariaDB/MySQL a nil placeholder ``DEFAULT`` plus a
        ``BEFORE INSERT`` trigger; SQLite none (its functions live in the
        client: give the model a client default such as ``uuid7_pk()``; a
        warning is logged). A string: that SQL expression as ``DEFAULT``.
        ``False``: no default. The downgrade restores the original default
        exactly and drops the trigger, never the shared function.

        ``recreate_views=True``: views over the affected columns (and, on
        PostgreSQL, views over those) are dropped before the change and
        recreated from their definitions after it, on upgrade and downgrade
        (PostgreSQL also restores their owner, grants and comment). Without
        it such a view is refused, naming it.
        """
        return operations.invoke(cls(table_name, **options))

    def reverse(self) -> RestorePkFromUUID7Op:
        """The downgrade: restore the original keys."""
        return RestorePkFromUUID7Op(self.table_name)


@Operations.register_operation("restore_pk_from_uuid7")
class RestorePkFromUUID7Op(MigrateOperation):
    """Undo ``migrate_pk_to_uuid7``: the original keys, constraints and default come back."""

    def __init__(self, table_name: str) -> None:
        self.table_name = table_name

    @classmethod
    def restore_pk_from_uuid7(cls, operations: Operations, table_name: str) -> Any:
        """Restore ``table_name``'s original key from the recorded migration."""
        return operations.invoke(cls(table_name))

    def reverse(self) -> MigratePkToUUID7Op:
        """The upgrade again."""
        return MigratePkToUUID7Op(self.table_name)


def refuse_offline(operations: Operations, name: str) -> None:
    """Raise a clear error in ``--sql`` mode: these operations need the rows."""
    if operations.get_context().as_sql:
        raise MigrationRefusedError(
            f"op.{name} cannot run in offline --sql mode: the new keys are computed from the"
            " rows (ordered UUIDv7 per old key) and every step is verified against the data;"
            " run it against the database"
        )


def _run(operations: Operations, work: Any) -> Any:
    """Run ``work(connection)`` in the transaction mode the dialect needs."""
    context = operations.get_context()
    connection = operations.get_bind()
    if for_dialect(connection.dialect.name).TRANSACTIONAL:
        return work(connection)
    with context.autocommit_block():
        return work(context.connection)


@Operations.implementation_for(MigratePkToUUID7Op)
def _migrate(operations: Operations, operation: MigratePkToUUID7Op) -> None:
    refuse_offline(operations, "migrate_pk_to_uuid7")
    _run(
        operations,
        lambda conn: migrate_pk_to_uuid7(conn, operation.table_name, **operation.options),
    )


@Operations.implementation_for(RestorePkFromUUID7Op)
def _restore(operations: Operations, operation: RestorePkFromUUID7Op) -> None:
    refuse_offline(operations, "restore_pk_from_uuid7")
    _run(operations, lambda conn: restore_pk_from_uuid7(conn, operation.table_name))


@renderers.dispatch_for(MigratePkToUUID7Op)
def _render_migrate(autogen_context: AutogenContext, op: MigratePkToUUID7Op) -> str:
    args = [repr(op.table_name)] + [f"{k}={v!r}" for k, v in sorted(op.options.items())]
    return f"op.migrate_pk_to_uuid7({', '.join(args)})"


@renderers.dispatch_for(RestorePkFromUUID7Op)
def _render_restore(autogen_context: AutogenContext, op: RestorePkFromUUID7Op) -> str:
    return f"op.restore_pk_from_uuid7({op.table_name!r})"
