"""sqla_ids: UUIDv7 keys, FF3-1 order numbers and key migrations for SQLAlchemy.

The names here are the everyday API: generating and reading UUIDv7, the
column types and defaults, the server-side function, the order-number codec
and the key migration. Everything else lives in its namespace, each with
its own ``__all__``:

* :mod:`sqla_ids.identifiers` -- UUIDv7 layouts, clocks and encodings, COMB
  GUIDs, UUID192, partitions (pure Python);
* :mod:`sqla_ids.order_numbers` -- formats, check digits, alphabets, schemes,
  the keyring (pure Python);
* :mod:`sqla_ids.types` -- the column types, defaults, server functions and
  partitions;
* :mod:`sqla_ids.migration` -- key migration plans, options and merges;
* :mod:`sqla_ids.alembic` -- Alembic operations, rendering and filters;
* :mod:`sqla_ids.tools` -- finding UUIDs, inferring relations, identicons;
* :mod:`sqla_ids.dialects` -- what each database supports.

``import sqla_ids`` does not import SQLAlchemy: the names that need it are
loaded on first access (``from sqla_ids import UUIDv7``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sqla_ids.identifiers import (
    UUIDFormatError,
    UUIDv7Generator,
    is_uuid7,
    parse_uuid,
    to_base32,
    uuid7,
    uuid7_batch,
    uuid7_bounds,
    uuid7_datetime,
    uuid7_timestamp_ms,
)

if TYPE_CHECKING:  # type checkers see the lazy names' real types
    from sqla_ids.migration import (
        PkMigrationOptions as PkMigrationOptions,
    )
    from sqla_ids.migration import (
        migrate_pk_to_uuid7 as migrate_pk_to_uuid7,
    )
    from sqla_ids.migration import (
        restore_pk_from_uuid7 as restore_pk_from_uuid7,
    )
    from sqla_ids.order_numbers import (
        OrderNumberCodec as OrderNumberCodec,
    )
    from sqla_ids.types import (
        FormattedOrderNumber as FormattedOrderNumber,
    )
    from sqla_ids.types import (
        UUID192Type as UUID192Type,
    )
    from sqla_ids.types import (
        UUIDv7 as UUIDv7,
    )
    from sqla_ids.types import (
        UUIDv7ServerDefault as UUIDv7ServerDefault,
    )
    from sqla_ids.types import (
        install_uuid7_function as install_uuid7_function,
    )
    from sqla_ids.types import (
        register_uuid7_function as register_uuid7_function,
    )
    from sqla_ids.types import (
        uuid7_default as uuid7_default,
    )
    from sqla_ids.types import (
        uuid7_function_ddl as uuid7_function_ddl,
    )
    from sqla_ids.types import (
        uuid7_pk as uuid7_pk,
    )

__version__ = "0.1.0"

# Public names that need SQLAlchemy (or the FF3-1 library), and the namespace
# each one comes from; they are imported on first access so ``import
# sqla_ids`` stays light. Keep the TYPE_CHECKING imports above in step
# (tests/test_public_api.py checks it).
_LAZY: dict[str, str] = {
    # column types and defaults
    "UUIDv7": "sqla_ids.types",
    "UUID192Type": "sqla_ids.types",
    "FormattedOrderNumber": "sqla_ids.types",
    "uuid7_pk": "sqla_ids.types",
    "uuid7_default": "sqla_ids.types",
    # the server-side function
    "UUIDv7ServerDefault": "sqla_ids.types",
    "uuid7_function_ddl": "sqla_ids.types",
    "install_uuid7_function": "sqla_ids.types",
    "register_uuid7_function": "sqla_ids.types",
    # order numbers
    "OrderNumberCodec": "sqla_ids.order_numbers",
    # key migration
    "migrate_pk_to_uuid7": "sqla_ids.migration",
    "restore_pk_from_uuid7": "sqla_ids.migration",
    "PkMigrationOptions": "sqla_ids.migration",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sqla_ids' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    # generating UUIDv7
    "UUIDv7Generator",
    "uuid7",
    "uuid7_batch",
    # reading UUIDs
    "UUIDFormatError",
    "is_uuid7",
    "parse_uuid",
    "to_base32",
    "uuid7_bounds",
    "uuid7_datetime",
    "uuid7_timestamp_ms",
    # the rest, loaded on first access
    *_LAZY,
    "__version__",
]
