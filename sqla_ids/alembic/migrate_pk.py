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

import sqlalchemy as sa
from alembic.autogenerate import renderers
from alembic.autogenerate.api import AutogenContext
from alembic.operations import MigrateOperation, Operations

from sqla_ids.alembic.render import import_operations
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import migrate_pk_to_uuid7, preflight, restore_pk_from_uuid7
from sqla_ids.migration.backends import backend_for
from sqla_ids.migration.core import state
from sqla_ids.migration.core.model import MAPPING_SUFFIX
from sqla_ids.migration.core.options import PkMigrationOptions, build_options
from sqla_ids.migration.core.progress import logger
from sqla_ids.migration.online import Phase
from sqla_ids.migration.runner import migrate_pks_to_uuid7


def _entries(
    tables: list[str | tuple[str, PkMigrationOptions]],
) -> list[str | tuple[str, PkMigrationOptions]]:
    return [t if isinstance(t, str) else (t[0], t[1]) for t in tables]


@Operations.register_operation("migrate_pk_to_uuid7")
class MigratePkToUUID7Op(MigrateOperation):
    """Migrate a table's integer/text primary key (and every reference) to UUIDv7."""

    def __init__(
        self,
        table_name: str,
        options: PkMigrationOptions | None = None,
        *,
        dry_run: bool = False,
        phase: Phase = "all",
        **overrides: Any,
    ) -> None:
        self.table_name = table_name
        self.options = build_options(options, overrides)
        self.dry_run = dry_run
        self.phase = phase
        # Set by the autogenerate rewriter: a created_at-like column, named in a
        # comment of the rendered operation (never passed on by itself).
        self._timestamp_hint: str | None = None

    @classmethod
    def migrate_pk_to_uuid7(
        cls,
        operations: Operations,
        table_name: str,
        options: PkMigrationOptions | None = None,
        *,
        dry_run: bool = False,
        phase: Phase = "all",
        **overrides: Any,
    ) -> Any:
        """Migrate ``table_name``'s key to UUIDv7.

        Options (all optional): ``timestamp_column`` (e.g. ``"created_at"``),
        ``old_column`` (default ``<key>_old``), ``mapping_table`` (default
        ``<table>_uuid7_map``), ``extra_references`` (``[("audit_log",
        "order_ref")]``: plain columns without an FK), ``batch_size``,
        ``seed``, ``keep_child_old_columns``, ``drop_sequence``,
        ``server_default``, ``recreate_views`` and ``dry_run`` (log the
        preflight -- changes, statements of each phase, estimates, risks --
        and change nothing; see :mod:`sqla_ids.migration.dry_run`).

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

        ``online=True`` migrates while the application keeps writing (PostgreSQL
        and MariaDB; see docs/migration.md, "Online migration"), with
        ``lock_timeout``, ``batch_pause``, ``batch_time``, ``nice_ratio``,
        ``swap_attempts`` and (MariaDB) ``metadata_lock_wait``; ``phase`` then runs
        ``"prepare"`` (expand, backfill, indexes and foreign keys, verified),
        ``"swap"`` or ``"contract"`` alone -- one per revision across deploys --
        or ``"all"``. Online steps commit on their own (an autocommit block).
        ``versions=True`` (PostgreSQL, online) serves the tables in two versions
        from revision A's expand until revision C's contract, for rolling
        deploys: give it in every revision of the migration (docs/migration.md,
        "Rolling deploys").

        The options may also be given as one
        :class:`~sqla_ids.migration.core.options.PkMigrationOptions`. Running the
        operation again after it finished does nothing (logged), so a revision
        that stopped half-way can simply be run again.
        """
        return operations.invoke(
            cls(table_name, options, dry_run=dry_run, phase=phase, **overrides)
        )

    def reverse(self) -> RestorePkFromUUID7Op:
        """The downgrade: restore the original keys (carrying this op's arguments)."""
        return RestorePkFromUUID7Op(
            self.table_name, self.options, dry_run=self.dry_run, phase=self.phase
        )


@Operations.register_operation("migrate_pks_to_uuid7")
class MigratePksToUUID7Op(MigrateOperation):
    """Migrate several tables' keys, planning every one before changing anything."""

    def __init__(
        self, tables: list[str | tuple[str, PkMigrationOptions]], *, phase: Phase = "all"
    ) -> None:
        self.tables = _entries(tables)
        self.phase = phase
        # Set by the autogenerate rewriter: table -> created_at-like column, for comments.
        self._timestamp_hints: dict[str, str] = {}

    @classmethod
    def migrate_pks_to_uuid7(
        cls,
        operations: Operations,
        tables: list[str | tuple[str, PkMigrationOptions]],
        *,
        phase: Phase = "all",
    ) -> Any:
        """Migrate ``tables`` (names, or ``(name, PkMigrationOptions(...))``) in order.

        Every table is planned first and the problems of all of them are
        reported in one refusal, before the first change -- on MariaDB/MySQL,
        whose DDL cannot be rolled back, this is the safe way to migrate
        several tables in one revision. With ``PkMigrationOptions(online=True)``
        for every table, ``phase`` runs that phase of each (one revision per
        phase, as for one table); online and offline tables go in separate
        operations.
        """
        return operations.invoke(cls(tables, phase=phase))

    def reverse(self) -> RestorePksFromUUID7Op:
        """The downgrade: restore every table, in reverse order."""
        return RestorePksFromUUID7Op(self.tables, phase=self.phase)


@Operations.register_operation("restore_pks_from_uuid7")
class RestorePksFromUUID7Op(MigrateOperation):
    """Undo ``migrate_pks_to_uuid7``: restore each table's key, last migrated first."""

    def __init__(
        self, tables: list[str | tuple[str, PkMigrationOptions]], *, phase: Phase = "all"
    ) -> None:
        # Options and phase are kept only so that reverse() gives back the same upgrade.
        self.tables = _entries(tables)
        self.phase = phase

    @classmethod
    def restore_pks_from_uuid7(
        cls,
        operations: Operations,
        tables: list[str | tuple[str, PkMigrationOptions]],
        *,
        phase: Phase = "all",
    ) -> Any:
        """Restore the original keys of ``tables`` (given in migration order), each
        as ``op.restore_pk_from_uuid7`` does (online where its migration is)."""
        return operations.invoke(cls(tables, phase=phase))

    def reverse(self) -> MigratePksToUUID7Op:
        """The upgrade again, with each table's options."""
        return MigratePksToUUID7Op(self.tables, phase=self.phase)


@Operations.register_operation("restore_pk_from_uuid7")
class RestorePkFromUUID7Op(MigrateOperation):
    """Undo ``migrate_pk_to_uuid7``: the original keys, constraints and default come back."""

    def __init__(
        self,
        table_name: str,
        options: PkMigrationOptions | None = None,
        *,
        dry_run: bool = False,
        phase: Phase = "all",
    ) -> None:
        self.table_name = table_name
        # The upgrade's arguments, kept so that reverse() gives back the same upgrade;
        # the restore itself reads everything it needs from the recorded plan.
        self.options = options
        self.dry_run = dry_run
        self.phase = phase

    @classmethod
    def restore_pk_from_uuid7(
        cls,
        operations: Operations,
        table_name: str,
        options: PkMigrationOptions | None = None,
        *,
        dry_run: bool = False,
        phase: Phase = "all",
    ) -> Any:
        """Restore ``table_name``'s original key from the recorded migration.

        An online migration not swapped yet is undone (its new columns,
        triggers and mapping dropped). ``options``, ``dry_run`` and ``phase``
        are the upgrade's, carried for ``reverse()``; ``dry_run=True`` changes
        nothing here either.
        """
        return operations.invoke(cls(table_name, options, dry_run=dry_run, phase=phase))

    def reverse(self) -> MigratePkToUUID7Op:
        """The upgrade again, with the options it was reversed from."""
        return MigratePkToUUID7Op(
            self.table_name, self.options, dry_run=self.dry_run, phase=self.phase
        )


def refuse_offline(operations: Operations, name: str) -> None:
    """Raise a clear error in ``--sql`` mode: these operations need the rows."""
    if operations.get_context().as_sql:
        raise MigrationRefusedError(
            f"op.{name} cannot run in offline --sql mode: the new keys are computed from the"
            " rows (ordered UUIDv7 per old key) and every step is verified against the data;"
            " run it against the database"
        )


def _run(operations: Operations, work: Any, online: bool = False) -> Any:
    """Run ``work(connection)`` in the transaction mode the dialect needs (online
    steps commit on their own: always an autocommit block)."""
    context = operations.get_context()
    connection = operations.get_bind()
    if not online and backend_for(connection).strategy.transactional:
        return work(connection)
    with context.autocommit_block():
        return work(context.connection)


@Operations.implementation_for(MigratePkToUUID7Op)
def _migrate(operations: Operations, operation: MigratePkToUUID7Op) -> None:
    refuse_offline(operations, "migrate_pk_to_uuid7")
    if operation.dry_run:
        # The preflight, logged (Alembic shows its logger's INFO): the plan,
        # the statements of each phase, the estimates; nothing is changed.
        report = preflight(
            operations.get_bind(), operation.table_name, operation.options, phase=operation.phase
        )
        logger.info(
            "dry run of migrate_pk_to_uuid7(%r):\n%s", operation.table_name, report.describe()
        )
        return
    _run(
        operations,
        lambda conn: migrate_pk_to_uuid7(
            conn,
            operation.table_name,
            operation.options,
            dry_run=operation.dry_run,
            phase=operation.phase,
        ),
        online=operation.options.online,
    )


@Operations.implementation_for(MigratePksToUUID7Op)
def _migrate_many(operations: Operations, operation: MigratePksToUUID7Op) -> None:
    refuse_offline(operations, "migrate_pks_to_uuid7")
    online = all(not isinstance(e, str) and e[1].online for e in operation.tables)
    _run(
        operations,
        lambda conn: migrate_pks_to_uuid7(conn, operation.tables, phase=operation.phase),
        online=online,
    )


@Operations.implementation_for(RestorePksFromUUID7Op)
def _restore_many(operations: Operations, operation: RestorePksFromUUID7Op) -> None:
    refuse_offline(operations, "restore_pks_from_uuid7")
    for entry in reversed(operation.tables):
        table, options = (entry, None) if isinstance(entry, str) else entry
        _restore_table(operations, table, options)


@Operations.implementation_for(RestorePkFromUUID7Op)
def _restore(operations: Operations, operation: RestorePkFromUUID7Op) -> None:
    refuse_offline(operations, "restore_pk_from_uuid7")
    if operation.dry_run:
        return
    _restore_table(operations, operation.table_name, operation.options)


def _restore_table(operations: Operations, table: str, options: PkMigrationOptions | None) -> None:
    """Undo the recorded migration of ``table``, online where it is swapped."""
    bind = operations.get_bind()
    step = state.recorded(bind).get(table)
    mapping = (options and options.mapping_table) or table + MAPPING_SUFFIX
    if step is None and not sa.inspect(bind).has_table(mapping):
        # The revisions of one online migration (prepare, swap, contract) are
        # undone last first, and the latest one's downgrade undoes the whole
        # migration: the contract's restores the table (offline), the swap's
        # undoes the swap and the prepare (online). The earlier revisions then
        # find nothing left -- no record and no mapping table. (A record lost
        # while the mapping table is still there is refused as before.)
        logger.info("%s: no UUIDv7 migration recorded, nothing to undo", table)
        return
    _run(
        operations,
        lambda conn: restore_pk_from_uuid7(conn, table),
        online=step is not None and step.phase.online,
    )


def _timestamp_comment(table: str, column: str) -> str:
    return (
        f"# {table}: timestamp_column={column!r} would take each new key's time from that "
        "column (the keys then sort by creation time); see docs/migration.md"
    )


@renderers.dispatch_for(MigratePkToUUID7Op)
def _render_migrate(autogen_context: AutogenContext, op: MigratePkToUUID7Op) -> str | list[str]:
    import_operations(autogen_context)
    options = op.options.to_dict()
    args = [repr(op.table_name)] + [f"{k}={_literal(v)}" for k, v in sorted(options.items())]
    if op.dry_run:
        args.append("dry_run=True")
    if op.phase != "all":
        args.append(f"phase={op.phase!r}")
    line = f"op.migrate_pk_to_uuid7({', '.join(args)})"
    if op._timestamp_hint and "timestamp_column" not in options:
        return [_timestamp_comment(op.table_name, op._timestamp_hint), line]
    return line


def _render_options(options: PkMigrationOptions) -> str:
    fields = options.to_dict()
    inner = ", ".join(f"{k}={_literal(v)}" for k, v in sorted(fields.items()))
    return f"sqla_ids.migration.PkMigrationOptions({inner})"


def _render_tables(autogen_context: AutogenContext, tables: list[Any]) -> str:
    autogen_context.imports.add("import sqla_ids.migration")
    items = [
        repr(t) if isinstance(t, str) else f"({t[0]!r}, {_render_options(t[1])})" for t in tables
    ]
    return "[" + ", ".join(items) + "]"


def _phase_arg(phase: str) -> str:
    return "" if phase == "all" else f", phase={phase!r}"


@renderers.dispatch_for(MigratePksToUUID7Op)
def _render_migrate_many(
    autogen_context: AutogenContext, op: MigratePksToUUID7Op
) -> str | list[str]:
    import_operations(autogen_context)
    tables = _render_tables(autogen_context, op.tables)
    line = f"op.migrate_pks_to_uuid7({tables}{_phase_arg(op.phase)})"
    comments = [_timestamp_comment(t, c) for t, c in sorted(op._timestamp_hints.items())]
    return [*comments, line] if comments else line


@renderers.dispatch_for(RestorePksFromUUID7Op)
def _render_restore_many(autogen_context: AutogenContext, op: RestorePksFromUUID7Op) -> str:
    import_operations(autogen_context)
    tables = _render_tables(autogen_context, op.tables)
    return f"op.restore_pks_from_uuid7({tables}{_phase_arg(op.phase)})"


def _literal(value: Any) -> str:
    """Options as Python literals (lists of pairs as lists of tuples)."""
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


@renderers.dispatch_for(RestorePkFromUUID7Op)
def _render_restore(autogen_context: AutogenContext, op: RestorePkFromUUID7Op) -> str:
    import_operations(autogen_context)
    args = [repr(op.table_name)]
    if op.options is not None and op.options.to_dict():
        autogen_context.imports.add("import sqla_ids.migration")
        args.append(_render_options(op.options))
    if op.dry_run:
        args.append("dry_run=True")
    if op.phase != "all":
        args.append(f"phase={op.phase!r}")
    return f"op.restore_pk_from_uuid7({', '.join(args)})"
