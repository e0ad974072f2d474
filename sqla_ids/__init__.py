"""sqla_ids: UUIDv7 keys, FF3-1 order numbers and key migrations for SQLAlchemy.

The pure identifier API (``uuid7``, ``UUIDv7Generator``, encodings, bounds…)
is importable without SQLAlchemy being loaded; the SQLAlchemy column types
are loaded on first access (``from sqla_ids import UUIDv7``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sqla_ids.identifiers import *  # noqa: F403 - the pure API is the package's API
from sqla_ids.identifiers import __all__ as _identifier_names

if TYPE_CHECKING:  # type checkers see the lazy names' real types
    from sqla_ids.migration import (
        PkMigrationPlan as PkMigrationPlan,
    )
    from sqla_ids.migration import (
        migrate_pk_to_uuid7 as migrate_pk_to_uuid7,
    )
    from sqla_ids.migration import (
        plan_pk_migration as plan_pk_migration,
    )
    from sqla_ids.migration import (
        restore_pk_from_uuid7 as restore_pk_from_uuid7,
    )
    from sqla_ids.migration.merge import (
        merge_uuids as merge_uuids,
    )
    from sqla_ids.tools.find import (
        find_uuid as find_uuid,
    )
    from sqla_ids.tools.identicon import (
        identicon_svg as identicon_svg,
    )
    from sqla_ids.tools.relations import (
        infer_relations as infer_relations,
    )
    from sqla_ids.tools.relations import (
        related_columns as related_columns,
    )
    from sqla_ids.types.defaults import (
        last_uuid7 as last_uuid7,
    )
    from sqla_ids.types.defaults import (
        uuid7_default as uuid7_default,
    )
    from sqla_ids.types.defaults import (
        uuid7_pk as uuid7_pk,
    )
    from sqla_ids.types.order_number import (
        FormattedOrderNumber as FormattedOrderNumber,
    )
    from sqla_ids.types.partitions import (
        create_month_partitions as create_month_partitions,
    )
    from sqla_ids.types.partitions import (
        month_partition_ddl as month_partition_ddl,
    )
    from sqla_ids.types.partitions import (
        uuid7_partition_key as uuid7_partition_key,
    )
    from sqla_ids.types.server_functions import (
        UUID7_FUNCTION as UUID7_FUNCTION,
    )
    from sqla_ids.types.server_functions import (
        UUID7_SERIAL_FUNCTION as UUID7_SERIAL_FUNCTION,
    )
    from sqla_ids.types.server_functions import (
        UUIDv7ServerDefault as UUIDv7ServerDefault,
    )
    from sqla_ids.types.server_functions import (
        install_uuid7_function as install_uuid7_function,
    )
    from sqla_ids.types.server_functions import (
        register_uuid7_function as register_uuid7_function,
    )
    from sqla_ids.types.server_functions import (
        remove_uuid7_function as remove_uuid7_function,
    )
    from sqla_ids.types.server_functions import (
        uuid7_column_default_sql as uuid7_column_default_sql,
    )
    from sqla_ids.types.server_functions import (
        uuid7_column_trigger_sql as uuid7_column_trigger_sql,
    )
    from sqla_ids.types.server_functions import (
        uuid7_function_ddl as uuid7_function_ddl,
    )
    from sqla_ids.types.uuid7 import (
        UUIDv7 as UUIDv7,
    )
    from sqla_ids.types.uuid192 import (
        UUID192Type as UUID192Type,
    )
    from sqla_ids.types.uuid192 import (
        uuid192_uuid as uuid192_uuid,
    )

__version__ = "0.1.0"

# Public names that need SQLAlchemy, and the module each one lives in; they
# are imported on first access so ``import sqla_ids`` stays light. Keep the
# TYPE_CHECKING imports above in step (tests/test_public_api.py checks it).
_LAZY: dict[str, str] = {
    "UUIDv7": "sqla_ids.types.uuid7",
    "UUID192Type": "sqla_ids.types.uuid192",
    "uuid192_uuid": "sqla_ids.types.uuid192",
    "uuid7_pk": "sqla_ids.types.defaults",
    "uuid7_default": "sqla_ids.types.defaults",
    "last_uuid7": "sqla_ids.types.defaults",
    "UUIDv7ServerDefault": "sqla_ids.types.server_functions",
    "UUID7_FUNCTION": "sqla_ids.types.server_functions",
    "UUID7_SERIAL_FUNCTION": "sqla_ids.types.server_functions",
    "install_uuid7_function": "sqla_ids.types.server_functions",
    "remove_uuid7_function": "sqla_ids.types.server_functions",
    "register_uuid7_function": "sqla_ids.types.server_functions",
    "uuid7_function_ddl": "sqla_ids.types.server_functions",
    "uuid7_column_default_sql": "sqla_ids.types.server_functions",
    "uuid7_column_trigger_sql": "sqla_ids.types.server_functions",
    "uuid7_partition_key": "sqla_ids.types.partitions",
    "create_month_partitions": "sqla_ids.types.partitions",
    "month_partition_ddl": "sqla_ids.types.partitions",
    "find_uuid": "sqla_ids.tools.find",
    "infer_relations": "sqla_ids.tools.relations",
    "related_columns": "sqla_ids.tools.relations",
    "identicon_svg": "sqla_ids.tools.identicon",
    "FormattedOrderNumber": "sqla_ids.types.order_number",
    "migrate_pk_to_uuid7": "sqla_ids.migration",
    "restore_pk_from_uuid7": "sqla_ids.migration",
    "plan_pk_migration": "sqla_ids.migration",
    "PkMigrationPlan": "sqla_ids.migration",
    "merge_uuids": "sqla_ids.migration.merge",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sqla_ids' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [*_identifier_names, *_LAZY, "__version__"]
