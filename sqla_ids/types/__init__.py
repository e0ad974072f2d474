"""SQLAlchemy column types and defaults built on the pure identifier layer.

* :mod:`~sqla_ids.types.uuid7` and :mod:`~sqla_ids.types.uuid192` -- the key
  column types, :mod:`~sqla_ids.types.defaults` -- ``uuid7_pk`` and friends;
* :mod:`~sqla_ids.types.server_functions` -- ``sqla_ids_uuid7()`` on the
  server, for rows other clients insert;
* :mod:`~sqla_ids.types.order_number` -- ``FormattedOrderNumber``, with its
  table wiring in :mod:`~sqla_ids.types.order_number_ddl` and its sequence in
  :mod:`~sqla_ids.types.order_number_sequence`;
* :mod:`~sqla_ids.types.partitions` -- month partitions keyed by UUIDv7.
"""

from sqla_ids.types.defaults import (
    fetch_server_keys,
    last_uuid7,
    prefetch_server_keys,
    uuid7_default,
    uuid7_pk,
)
from sqla_ids.types.order_number import FormattedOrderNumber
from sqla_ids.types.order_number_ddl import order_number_check_name
from sqla_ids.types.order_number_sequence import OrderNumberSequence
from sqla_ids.types.partitions import (
    create_month_partitions,
    month_partition_ddl,
    uuid7_partition_key,
)
from sqla_ids.types.server_functions import (
    UUID7_FUNCTION,
    UUID7_SERIAL_FUNCTION,
    UUID7_SERIAL_SEQUENCE,
    UUIDv7ServerDefault,
    install_uuid7_function,
    register_uuid7_function,
    remove_uuid7_function,
    uuid7_column_default_sql,
    uuid7_column_trigger_sql,
    uuid7_function_create_sql,
    uuid7_function_ddl,
    uuid7_function_drop_sql,
)
from sqla_ids.types.uuid7 import UUIDv7
from sqla_ids.types.uuid192 import UUID192Type, uuid192_uuid

__all__ = [
    "UUID7_FUNCTION",
    "UUID7_SERIAL_FUNCTION",
    "UUID7_SERIAL_SEQUENCE",
    "FormattedOrderNumber",
    "OrderNumberSequence",
    "UUID192Type",
    "UUIDv7",
    "UUIDv7ServerDefault",
    "create_month_partitions",
    "fetch_server_keys",
    "install_uuid7_function",
    "last_uuid7",
    "month_partition_ddl",
    "order_number_check_name",
    "prefetch_server_keys",
    "register_uuid7_function",
    "remove_uuid7_function",
    "uuid7_column_default_sql",
    "uuid7_column_trigger_sql",
    "uuid7_default",
    "uuid7_function_create_sql",
    "uuid7_function_ddl",
    "uuid7_function_drop_sql",
    "uuid7_partition_key",
    "uuid7_pk",
    "uuid192_uuid",
]
