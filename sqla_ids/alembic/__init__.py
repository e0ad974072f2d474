"""Alembic integration: autogenerate rendering, operations, revision rewriters.

Importing this package registers the operations (``op.migrate_pk_to_uuid7``,
``op.restore_pk_from_uuid7``, ``op.merge_uuids``, ``op.add_order_number_column``,
``op.create_order_number_sequence``, ``op.create_uuid7_function`` and friends)
and the autogenerate comparator that gives a new table's order-number sequence
its own create/drop operations. For ``env.py``: :func:`render_item`,
:func:`include_object` and :func:`rewrite_pk_migrations`.
"""

from sqla_ids.alembic import merge_uuids as merge_uuids  # registers op.merge_uuids
from sqla_ids.alembic import migrate_pk as migrate_pk  # registers op.migrate_pk_to_uuid7
from sqla_ids.alembic import order_numbers as order_numbers  # registers op.add_order_number_column
from sqla_ids.alembic import uuid7_function_ops as uuid7_function_ops  # registers op.*uuid7*
from sqla_ids.alembic.filters import include_object
from sqla_ids.alembic.merge_uuids import MergeUUIDsOp
from sqla_ids.alembic.migrate_pk import (
    MigratePksToUUID7Op,
    MigratePkToUUID7Op,
    RestorePkFromUUID7Op,
    RestorePksFromUUID7Op,
)
from sqla_ids.alembic.order_numbers import (
    AddOrderNumberColumnOp,
    CreateOrderNumberSequenceOp,
    DropOrderNumberColumnOp,
    DropOrderNumberSequenceOp,
)
from sqla_ids.alembic.render import render_item
from sqla_ids.alembic.rewriter import rewrite_pk_migrations
from sqla_ids.alembic.uuid7_function_ops import (
    CreateUUID7FunctionOp,
    CreateUUID7TriggerOp,
    DropUUID7FunctionOp,
    DropUUID7TriggerOp,
)

__all__ = [
    "AddOrderNumberColumnOp",
    "CreateOrderNumberSequenceOp",
    "CreateUUID7FunctionOp",
    "CreateUUID7TriggerOp",
    "DropOrderNumberColumnOp",
    "DropOrderNumberSequenceOp",
    "DropUUID7FunctionOp",
    "DropUUID7TriggerOp",
    "MergeUUIDsOp",
    "MigratePkToUUID7Op",
    "MigratePksToUUID7Op",
    "RestorePkFromUUID7Op",
    "RestorePksFromUUID7Op",
    "include_object",
    "render_item",
    "rewrite_pk_migrations",
]
