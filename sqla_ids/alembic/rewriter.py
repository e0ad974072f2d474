"""Autogenerate rewriter: an integer/text primary key changed to ``UUIDv7`` becomes
``op.migrate_pk_to_uuid7`` instead of a plain ``alter_column`` (which would lose
every key and break every foreign key).

Use it in ``env.py``::

    context.configure(..., process_revision_directives=rewrite_pk_migrations)

or chain it into an existing rewriter with ``pk_migration_rewriter.chain(...)``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic.autogenerate import rewriter
from alembic.operations import ops

from sqla_ids.alembic.migrate_pk import MigratePkToUUID7Op, RestorePkFromUUID7Op

pk_migration_rewriter = rewriter.Rewriter()
"""The :class:`alembic.autogenerate.rewriter.Rewriter` doing the rewrite."""


def _is_uuid7(type_: Any) -> bool:
    # Matched by class name, so subclasses and re-exports count as well.
    return any(cls.__name__ == "UUIDv7" for cls in type(type_).__mro__)


def _is_old_key_type(type_: Any) -> bool:
    return isinstance(type_, sa.Integer | sa.String) and not _is_uuid7(type_)


@pk_migration_rewriter.rewrites(ops.AlterColumnOp)
def _alter_pk_to_uuid7(
    context: Any, revision: Any, op: ops.AlterColumnOp
) -> ops.AlterColumnOp | MigratePkToUUID7Op | RestorePkFromUUID7Op:
    upgrade = _is_uuid7(op.modify_type) and _is_old_key_type(op.existing_type)
    downgrade = _is_uuid7(op.existing_type) and _is_old_key_type(op.modify_type)
    if not (upgrade or downgrade) or context.connection is None:
        return op
    pk = sa.inspect(context.connection).get_pk_constraint(op.table_name)
    if pk.get("constrained_columns") != [op.column_name]:
        return op
    if upgrade:
        return MigratePkToUUID7Op(op.table_name)
    return RestorePkFromUUID7Op(op.table_name)


def _references(context: Any, tables: set[str]) -> set[tuple[str, str]]:
    """(table, column) of every FK column pointing at one of ``tables``."""
    inspector = sa.inspect(context.connection)
    found: set[tuple[str, str]] = set()
    for t in inspector.get_table_names():
        for fk in inspector.get_foreign_keys(t):
            if fk["referred_table"] in tables:
                found.update((t, c) for c in fk["constrained_columns"])
    return found


def _walk(items: list[Any]) -> list[Any]:
    result = []
    for item in items:
        result.append(item)
        if isinstance(item, ops.ModifyTableOps):
            result += _walk(item.ops)
    return result


def _prune(items: list[Any], covered: set[tuple[str, str]]) -> None:
    """Remove ``alter_column`` ops on referencing columns the operation converts itself
    (to ``UUIDv7`` in the upgrade, back from it in the downgrade)."""
    for item in list(items):
        if isinstance(item, ops.ModifyTableOps):
            _prune(item.ops, covered)
            if not item.ops:
                items.remove(item)
        elif (
            isinstance(item, ops.AlterColumnOp)
            and (item.table_name, item.column_name) in covered
            and (_is_uuid7(item.modify_type) or _is_uuid7(item.existing_type))
        ):
            items.remove(item)


def rewrite_pk_migrations(context: Any, revision: Any, directives: list[Any]) -> None:
    """``process_revision_directives`` hook: rewrite key changes to ``UUIDv7``."""
    pk_migration_rewriter(context, revision, directives)
    if context.connection is None:
        return
    for directive in directives:
        for ops_list in (directive.upgrade_ops_list, directive.downgrade_ops_list):
            for container in ops_list:
                migrated = {
                    o.table_name
                    for o in _walk(container.ops)
                    if isinstance(o, MigratePkToUUID7Op | RestorePkFromUUID7Op)
                }
                if migrated:
                    _prune(container.ops, _references(context, migrated))
