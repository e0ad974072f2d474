"""Migrate a key to UUIDv7 or undo it: the entry points, offline or online.

Each entry point builds the options once and finds the database's backend
once, at this boundary, then hands over to the offline runner
(:mod:`sqla_ids.migration.offline`) or the online one
(:mod:`sqla_ids.migration.online`).

Running an upgrade again is safe: a finished migration is skipped (so a
revision that migrated some tables before failing can simply be run again),
and an interrupted one continues from its recorded step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.engine import Connection

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import offline, online
from sqla_ids.migration.backends import backend_for
from sqla_ids.migration.core import state
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.options import PkMigrationOptions, build_options
from sqla_ids.migration.online import Phase
from sqla_ids.migration.plan import make_plan


def migrate_pk_to_uuid7(
    connection: Connection,
    table: str,
    options: PkMigrationOptions | None = None,
    *,
    dry_run: bool = False,
    phase: Phase = "all",
    **overrides: Any,
) -> PkMigrationPlan:
    """Migrate ``table``'s primary key to UUIDv7.

    ``options`` (a :class:`~sqla_ids.migration.core.options.PkMigrationOptions`) or
    its fields as keywords say how. Returns the plan; with ``dry_run=True``
    nothing is changed. A finished migration is skipped (logged) and an
    interrupted one continues with its recorded plan, paced by this run's
    options (batch sizes, pauses, lock waits; logged when they differ).

    ``online=True`` migrates while the application keeps writing (see
    :mod:`sqla_ids.migration.online`); ``phase`` then runs ``"prepare"``,
    ``"swap"`` or ``"contract"`` alone, or ``"all"`` of them.
    """
    opts = build_options(options, overrides)
    backend = backend_for(connection)
    if opts.online:
        return online.migrate(connection, backend, table, opts, phase, dry_run=dry_run)
    if phase != "all":
        raise ValueError(f"phase={phase!r} needs online=True (the offline mode has one phase)")
    return offline.migrate(connection, backend, table, opts, dry_run=dry_run)


def migrate_pks_to_uuid7(
    connection: Connection,
    tables: Sequence[str | tuple[str, PkMigrationOptions]],
    *,
    dry_run: bool = False,
    phase: Phase = "all",
) -> list[PkMigrationPlan]:
    """Migrate several tables' keys, in order, after planning all of them first.

    Each entry is a table name or ``(table, options)``. Every table is planned
    before the first change, and the problems of all of them are reported in
    one refusal; tables already migrated are skipped, and one with an
    unfinished (online) migration continues from its record. Each table is
    planned again just before its turn (the earlier ones change what it sees).
    ``phase`` (online entries only) runs that phase of each table's online
    migration: the deploy sequence of docs/migration.md for several tables.
    """
    entries = [
        (entry, PkMigrationOptions()) if isinstance(entry, str) else (entry[0], entry[1])
        for entry in tables
    ]
    offline_tables = [t for t, o in entries if not o.online]
    if phase != "all" and offline_tables:
        raise ValueError(
            f"phase={phase!r} needs online=True for every table"
            f" ({', '.join(offline_tables)} offline)"
        )
    if offline_tables and len(offline_tables) < len(entries):
        raise ValueError(
            "online and offline tables need separate calls (an online migration runs outside"
            " any transaction, an offline one inside one); offline here:"
            f" {', '.join(offline_tables)}"
        )
    backend = backend_for(connection)
    ours = not connection.in_transaction()
    problems = []
    for table, options in entries:
        if state.load(connection, table) is not None:  # done, or continued from its record
            continue
        try:
            if options.online:  # the online mode's own refusals too, before any change
                online.make_online_plan(connection, backend, table, options)
            else:
                make_plan(connection, backend, table, options)
        except MigrationRefusedError as error:
            problems.append(str(error))
    if problems:
        raise offline.refused(connection, MigrationRefusedError(" | ".join(problems)))
    if ours and not offline_tables:  # the planning's reads began it; online steps wait for none
        connection.rollback()
    return [migrate_pk_to_uuid7(connection, t, o, dry_run=dry_run, phase=phase) for t, o in entries]


def restore_pk_from_uuid7(connection: Connection, table: str) -> PkMigrationPlan:
    """Undo :func:`migrate_pk_to_uuid7`: the old keys, columns, constraints and default
    come back; rows created since get fresh old-style keys (integer keys only).

    The old keys come from ``<key>_old``, or from the mapping table when that
    column was dropped; with neither, nothing is changed and the error says so.
    An online migration not contracted yet is undone online.
    """
    backend = backend_for(connection)
    ours = not connection.in_transaction()
    recorded = state.load(connection, table)
    if recorded is None:
        raise MigrationRefusedError(f"no recorded UUIDv7 migration of {table!r} to undo")
    step, plan = recorded
    if step.phase.online:
        return online.undo(connection, backend, plan, step.phase, ours=ours)
    return offline.restore(connection, backend, plan, step)
