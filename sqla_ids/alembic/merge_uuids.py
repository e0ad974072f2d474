"""``op.merge_uuids``: several ids denoting one object become one id everywhere.

::

    def upgrade():
        op.merge_uuids("customer", {"0190…dup": "0190…kept"})

Each merged row is kept in the history table ``<table>_uuid_merges`` (its full
content and the references rewritten). The merge is one-way: the history is
the record of what happened, and ``downgrade`` does not split ids again, so
:meth:`MergeUUIDsOp.reverse` raises ``NotImplementedError`` (Alembic's way of
saying an operation has no automatic reverse).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from alembic.autogenerate import renderers
from alembic.autogenerate.api import AutogenContext
from alembic.operations import MigrateOperation, Operations

from sqla_ids.alembic.migrate_pk import refuse_offline
from sqla_ids.alembic.render import import_operations
from sqla_ids.migration.merge import merge_uuids


@Operations.register_operation("merge_uuids")
class MergeUUIDsOp(MigrateOperation):
    """Replace merged ids by the kept ones in ``table`` and everything referencing it."""

    def __init__(
        self,
        table_name: str,
        merges: Mapping[Any, Any],
        *,
        history: str | None = None,
        extra_references: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.table_name = table_name
        self.merges = dict(merges)
        self.history = history
        self.extra_references = [(str(t), str(c)) for t, c in extra_references]

    @classmethod
    def merge_uuids(
        cls,
        operations: Operations,
        table_name: str,
        merges: Mapping[Any, Any],
        *,
        history: str | None = None,
        extra_references: Sequence[tuple[str, str]] = (),
    ) -> Any:
        """Merge ``{merged_id: kept_id, ...}`` in ``table_name`` and every reference to it.

        ``history``: the history table (default ``<table>_uuid_merges``);
        ``extra_references``: ``[("audit_log", "customer_ref")]``, plain
        referencing columns without a foreign key.
        """
        return operations.invoke(
            cls(table_name, merges, history=history, extra_references=extra_references)
        )

    def reverse(self) -> MigrateOperation:
        """Merges are one-way; the history table holds what was merged."""
        raise NotImplementedError(
            "op.merge_uuids has no automatic reverse; the merged rows are kept in the history table"
        )

    def to_diff_tuple(self) -> tuple[Any, ...]:
        """For ``compare_metadata()`` and ``alembic check``."""
        return ("merge_uuids", self.table_name, tuple(self.merges.items()))


@Operations.implementation_for(MergeUUIDsOp)
def _merge(operations: Operations, operation: MergeUUIDsOp) -> None:
    refuse_offline(operations, "merge_uuids")
    # Plain DML: it runs in the migration's own transaction on every database.
    merge_uuids(
        operations.get_bind(),
        operation.table_name,
        operation.merges,
        history=operation.history,
        extra_references=operation.extra_references,
    )


def _literal(value: Any, autogen_context: AutogenContext) -> str:
    """A Python literal for an id (``uuid.UUID`` values with their import)."""
    if isinstance(value, uuid.UUID):
        autogen_context.imports.add("import uuid")
        return f"uuid.UUID({str(value)!r})"
    return repr(value)


@renderers.dispatch_for(MergeUUIDsOp)
def _render_merge(autogen_context: AutogenContext, op: MergeUUIDsOp) -> str:
    import_operations(autogen_context)
    merges = ", ".join(
        f"{_literal(merged, autogen_context)}: {_literal(kept, autogen_context)}"
        for merged, kept in op.merges.items()
    )
    args = [repr(op.table_name), "{" + merges + "}"]
    if op.history is not None:
        args.append(f"history={op.history!r}")
    if op.extra_references:
        args.append(f"extra_references={op.extra_references!r}")
    return f"op.merge_uuids({', '.join(args)})"
