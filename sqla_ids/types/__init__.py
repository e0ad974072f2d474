"""SQLAlchemy column types and defaults built on the pure identifier layer."""

from sqla_ids.types.defaults import last_uuid7 as last_uuid7
from sqla_ids.types.defaults import uuid7_default as uuid7_default
from sqla_ids.types.defaults import uuid7_pk as uuid7_pk
from sqla_ids.types.order_number import FormattedOrderNumber as FormattedOrderNumber
from sqla_ids.types.partitions import create_month_partitions as create_month_partitions
from sqla_ids.types.partitions import month_partition_ddl as month_partition_ddl
from sqla_ids.types.partitions import uuid7_partition_key as uuid7_partition_key
from sqla_ids.types.server_functions import UUID7_FUNCTION as UUID7_FUNCTION
from sqla_ids.types.server_functions import UUID7_SERIAL_FUNCTION as UUID7_SERIAL_FUNCTION
from sqla_ids.types.server_functions import UUIDv7ServerDefault as UUIDv7ServerDefault
from sqla_ids.types.server_functions import install_uuid7_function as install_uuid7_function
from sqla_ids.types.server_functions import register_uuid7_function as register_uuid7_function
from sqla_ids.types.server_functions import remove_uuid7_function as remove_uuid7_function
from sqla_ids.types.server_functions import uuid7_column_default_sql as uuid7_column_default_sql
from sqla_ids.types.server_functions import uuid7_column_trigger_sql as uuid7_column_trigger_sql
from sqla_ids.types.server_functions import uuid7_function_ddl as uuid7_function_ddl
from sqla_ids.types.uuid7 import UUIDv7 as UUIDv7
from sqla_ids.types.uuid192 import UUID192Type as UUID192Type
from sqla_ids.types.uuid192 import uuid192_uuid as uuid192_uuid
