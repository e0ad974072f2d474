"""``include_object`` for autogenerate: leave sqla_ids' own objects alone.

sqla_ids keeps objects no model declares: SQLite's order-number counter
table, the PK-migration state table, the backups a migration leaves (the
mapping tables -- ``<table>_uuid7_map`` or the name given as
``mapping_table=`` -- and ``<table>_uuid_merges`` histories) and the columns
holding the old keys (``<key>_old``). Without this filter, ``alembic revision
--autogenerate`` proposes dropping them -- and with them the only record of
the old keys. Pass it as
``context.configure(include_object=sqla_ids.alembic.include_object)``.

Which columns and mapping tables are sqla_ids' is read from the state table
of the database autogenerate compares against; a column carrying the comment
the migration puts on old-key columns counts too.
"""

from __future__ import annotations

from typing import Any

from sqla_ids.dialects.sqlite import SQLite
from sqla_ids.migration import state
from sqla_ids.migration.merge import HISTORY_SUFFIX
from sqla_ids.migration.plan import DEFAULT_OLD_SUFFIX, MAPPING_SUFFIX, OLD_COLUMN_COMMENT
from sqla_ids.migration.state import STATE_TABLE

INTERNAL_TABLES = frozenset({SQLite.ORDER_NUMBER_COUNTERS, STATE_TABLE})
BACKUP_SUFFIXES = (MAPPING_SUFFIX, HISTORY_SUFFIX)
_COMMENT_PREFIX = OLD_COLUMN_COMMENT.split("{", 1)[0]


def is_sqla_ids_table(name: str | None) -> bool:
    """True for tables sqla_ids creates and no model declares (by name)."""
    return bool(name) and (name in INTERNAL_TABLES or str(name).endswith(BACKUP_SUFFIXES))


def recorded_objects(connection: Any) -> tuple[set[str], set[tuple[str, str]]]:
    """The mapping tables and ``(table, column)`` old-key columns of every migration
    recorded in the state table reachable through ``connection``."""
    tables: set[str] = set()
    columns: set[tuple[str, str]] = set()
    if connection is None:
        return tables, columns
    for table in state.steps(connection):
        recorded = state.load(connection, table)
        if recorded is None:
            continue
        plan = recorded[1]
        tables.add(plan.mapping_table)
        columns.add((plan.table, plan.old_column))
        if plan.keep_child_old_columns:
            columns.update((r.table, r.column + DEFAULT_OLD_SUFFIX) for r in plan.references)
    return tables, columns


def _autogenerate_connection() -> Any:
    """The connection of the running Alembic environment, if there is one."""
    from alembic import context

    try:
        return context.get_context().connection
    except (NameError, AttributeError):  # not inside env.py: no Alembic proxy
        return None


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Autogenerate filter: skip reflected sqla_ids tables and old-key columns that no
    model declares."""
    if not reflected or compare_to is not None:
        return True
    if type_ == "table":
        if is_sqla_ids_table(name):
            return False
        return name not in recorded_objects(_autogenerate_connection())[0]
    if type_ == "column" and obj is not None:
        if str(obj.comment or "").startswith(_COMMENT_PREFIX):
            return False
        table = obj.table.name
        return (table, name) not in recorded_objects(_autogenerate_connection())[1]
    return True
