"""``include_object`` for autogenerate: leave sqla_ids' own tables alone.

sqla_ids keeps a few tables no model declares: SQLite's order-number counter
table, the PK-migration state table, and the backups a migration leaves (the
``<table>_uuid7_map`` mapping tables and ``<table>_uuid_merges`` histories).
Without this filter, ``alembic revision --autogenerate`` proposes dropping
them -- and with them the only record of the old keys. Pass it as
``context.configure(include_object=sqla_ids.alembic.include_object)``.
"""

from __future__ import annotations

from typing import Any

from sqla_ids.dialects.sqlite import ORDER_NUMBER_COUNTERS
from sqla_ids.migration.merge import HISTORY_SUFFIX
from sqla_ids.migration.plan import MAPPING_SUFFIX
from sqla_ids.migration.state import STATE_TABLE

INTERNAL_TABLES = frozenset({ORDER_NUMBER_COUNTERS, STATE_TABLE})
BACKUP_SUFFIXES = (MAPPING_SUFFIX, HISTORY_SUFFIX)


def is_sqla_ids_table(name: str | None) -> bool:
    """True for tables sqla_ids creates and no model declares."""
    return bool(name) and (name in INTERNAL_TABLES or str(name).endswith(BACKUP_SUFFIXES))


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    """Autogenerate filter: skip reflected sqla_ids tables that no model declares."""
    return not (type_ == "table" and reflected and compare_to is None and is_sqla_ids_table(name))
