"""Alembic integration: autogenerate rendering, operations, revision rewriters."""

from sqla_ids.alembic import merge_uuids as merge_uuids  # registers op.merge_uuids
from sqla_ids.alembic import migrate_pk as migrate_pk  # registers op.migrate_pk_to_uuid7
from sqla_ids.alembic import order_numbers as order_numbers  # registers op.add_order_number_column
from sqla_ids.alembic import server_functions as server_functions  # registers op.*uuid7*
from sqla_ids.alembic.filters import include_object as include_object
from sqla_ids.alembic.render import render_item as render_item
