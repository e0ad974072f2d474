"""``op.merge_uuids``: several ids denoting one object become one id everywhere.

::

    def upgrade():
        op.merge_uuids("customer", {"0190…dup": "0190…kept"})

Each merged row is kept in the history table ``<table>_uuid_merges`` (its full
content and the references rewritten). The merge is one-way: the history is
the record of what happened, and ``downgrade`` does not split ids again.
"""

from __future__ import annotations

from typing import Any

from alembic.operations import MigrateOperation, Operations

from sqla_ids.alembic.migrate_pk import refuse_offline
from sqla_ids.migration.merge import merge_uuids


@Operations.register_operation("merge_uuids")
class MergeUUIDsOp(MigrateOperation):
    """Replace merged ids by the kept ones in ``table`` and everything referencing it."""

    def __init__(self, table_name: str, merges: dict[Any, Any], **options: Any) -> None:
        self.table_name = table_name
        self.merges = merges
        self.options = options

    @classmethod
    def merge_uuids(
        cls, operations: Operations, table_name: str, merges: dict[Any, Any], **options: Any
    ) -> Any:
        """Merge ``{merged_id: kept_id, ...}``; options ``history`` (history table name)
        and ``extra_references`` (plain referencing columns without an FK)."""
        return operations.invoke(cls(table_name, merges, **options))

    def reverse(self) -> MigrateOperation:
        """Merges are one-way; the history table holds what was merged."""
        raise NotImplementedError(
            "op.merge_uuids has no automatic reverse; the merged rows are kept in the history table"
        )


@Operations.implementation_for(MergeUUIDsOp)
def _merge(operations: Operations, operation: MergeUUIDsOp) -> None:
    refuse_offline(operations, "merge_uuids")
    # Plain DML: it runs in the migration's own transaction on every database.
    merge_uuids(operations.get_bind(), operation.table_name, operation.merges, **operation.options)
