"""Alembic integration: autogenerate rendering, operations, revision rewriters.

Importing this package registers the operations (``op.migrate_pk_to_uuid7``,
``op.restore_pk_from_uuid7``, ``op.add_uuid7_key``, ``op.merge_uuids``,
``op.add_order_number_column``, ``op.create_order_number_sequence``,
``op.create_uuid7_function`` and friends)
and the autogenerate comparators: a new table's order-number sequence gets
its own create/drop operations, and sqla_ids' own tables and old keys stay out
of every comparison. For ``env.py``: :data:`hooks` (``context.configure(...,
**hooks)``), or one by one :func:`render_item`, :func:`include_object` and
:func:`rewrite_pk_migrations`.
"""

from sqla_ids.alembic import add_column as add_column  # op.add_column of per-row columns
from sqla_ids.alembic import add_key as add_key  # registers op.add_uuid7_key, op.drop_uuid7_key
from sqla_ids.alembic import merge_uuids as merge_uuids  # registers op.merge_uuids
from sqla_ids.alembic import migrate_pk as migrate_pk  # registers op.migrate_pk_to_uuid7
from sqla_ids.alembic import order_numbers as order_numbers  # registers op.add_order_number_column
from sqla_ids.alembic import uuid7_function_ops as uuid7_function_ops  # registers op.*uuid7*
from sqla_ids.alembic.add_key import AddUUID7KeyOp, DropUUID7KeyOp
from sqla_ids.alembic.filters import include_object
from sqla_ids.alembic.hooks import AlembicHooks, hooks
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
    "AddUUID7KeyOp",
    "AlembicHooks",
    "CreateOrderNumberSequenceOp",
    "CreateUUID7FunctionOp",
    "CreateUUID7TriggerOp",
    "DropOrderNumberColumnOp",
    "DropOrderNumberSequenceOp",
    "DropUUID7FunctionOp",
    "DropUUID7KeyOp",
    "DropUUID7TriggerOp",
    "MergeUUIDsOp",
    "MigratePkToUUID7Op",
    "MigratePksToUUID7Op",
    "RestorePkFromUUID7Op",
    "RestorePksFromUUID7Op",
    "hooks",
    "include_object",
    "render_item",
    "rewrite_pk_migrations",
]
