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

``include_object`` only reaches that database inside a running ``env.py``.
So the same objects are also taken out of every comparison by
:func:`keep_sqla_ids_objects`, an autogenerate comparator registered when
:mod:`sqla_ids.alembic` is imported: ``compare_metadata(MigrationContext.configure(
connection), metadata)`` and ``produce_migrations`` (how test suites and
pytest-alembic look for pending migrations), ``alembic check`` and
``alembic revision --autogenerate`` all leave them alone, with or without
``include_object``. It also keeps the unique index
``op.add_order_number_column`` gives a ``FormattedOrderNumber`` column of the
models (``uq_<table>_<column>``).
"""

from __future__ import annotations

from typing import Any

from alembic.autogenerate import comparators
from alembic.autogenerate.api import AutogenContext
from alembic.operations import ops
from alembic.util import DispatchPriority, PriorityDispatchResult

from sqla_ids.alembic.order_numbers import order_number_index_name
from sqla_ids.dialects.sqlite import SQLite
from sqla_ids.migration.core import state
from sqla_ids.migration.core.state import STATE_TABLE
from sqla_ids.migration.merge import HISTORY_SUFFIX
from sqla_ids.migration.plan import DEFAULT_OLD_SUFFIX, MAPPING_SUFFIX, OLD_COLUMN_COMMENT
from sqla_ids.types.order_number import FormattedOrderNumber

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


def _old_key_column(op: Any, columns: set[tuple[str, str]]) -> bool:
    if not isinstance(op, ops.DropColumnOp):
        return False
    if (op.table_name, op.column_name) in columns:
        return True
    reverse = op._reverse
    comment = "" if reverse is None else str(reverse.column.comment or "")
    return comment.startswith(_COMMENT_PREFIX)


def _reflected_name(name: Any) -> str:
    # SQLAlchemy's MariaDB/MySQL reflection doubles a backtick inside an index name.
    return str(name).replace("``", "`")


def _numbered_indexes(autogen_context: AutogenContext) -> set[tuple[str, str]]:
    """(table, index) of the unique index of each model ``FormattedOrderNumber`` column."""
    return {
        (table.name, order_number_index_name(table.name, column.name))
        for table in autogen_context.sorted_tables
        for column in table.columns
        if isinstance(column.type, FormattedOrderNumber)
    }


@comparators.dispatch_for("autogenerate", priority=DispatchPriority.LAST)
def keep_sqla_ids_objects(
    autogen_context: AutogenContext, upgrade_ops: ops.UpgradeOps
) -> PriorityDispatchResult:
    """Autogenerate: never propose dropping sqla_ids' tables, old keys or number indexes.

    Runs after every other comparison, in every autogenerate run (module docs).
    """
    tables, columns = recorded_objects(autogen_context.connection)
    indexes = _numbered_indexes(autogen_context)
    kept: list[Any] = []
    for op in upgrade_ops.ops:
        if isinstance(op, ops.DropTableOp | ops.ModifyTableOps) and (
            is_sqla_ids_table(op.table_name) or op.table_name in tables
        ):
            continue
        if isinstance(op, ops.ModifyTableOps):
            op.ops[:] = [
                o
                for o in op.ops
                if not _old_key_column(o, columns)
                and not (
                    isinstance(o, ops.DropIndexOp)
                    and (o.table_name, _reflected_name(o.index_name)) in indexes
                )
            ]
            if not op.ops:
                continue
        kept.append(op)
    upgrade_ops.ops[:] = kept
    return PriorityDispatchResult.CONTINUE
