"""SQL Server: the storage of ``UUIDv7`` columns (the only feature it has)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects.base import Database
from sqla_ids.dialects.storage import SqlServerBinary16
from sqla_ids.identifiers import from_sqlserver_order, parse_uuid, to_sqlserver_order

if TYPE_CHECKING:
    from sqla_ids.types.uuid7 import UUIDv7

# --- uuid7 types ---
# SQL Server compares ``uniqueidentifier`` bytes 10-15 first, then 8-9, 6-7,
# 4-5, 0-3, so a UUIDv7 stored as is lands at random index positions. The
# "ordered" storage permutes the bytes (``to_sqlserver_order``) so that SQL
# Server's order is time order; "binary" uses BINARY(16), compared bytewise.


class _OrderedUniqueIdentifier(sa.types.TypeDecorator[uuid.UUID]):
    """``uniqueidentifier`` holding ``to_sqlserver_order(value)``."""

    impl = sa.Uuid
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> uuid.UUID | None:
        return None if value is None else to_sqlserver_order(value)

    def process_result_value(self, value: Any, dialect: Any) -> uuid.UUID | None:
        return None if value is None else from_sqlserver_order(parse_uuid(value))


class SQLServer(Database):
    """SQL Server: ``UUIDv7`` columns only (no server function, order numbers or migration)."""

    names: ClassVar[tuple[str, ...]] = ("mssql",)
    label: ClassVar[str] = "SQL Server"
    alter_table_add_check: ClassVar[bool] = True

    def uuid7_storage(self, type_: UUIDv7, dialect: Dialect) -> TypeEngine[Any]:
        """Storage type of a ``UUIDv7`` column, by its ``sqlserver_storage`` option."""
        storage = type_.sqlserver_storage
        if storage == "ordered":
            return _OrderedUniqueIdentifier()
        if storage == "binary":
            return SqlServerBinary16()
        return sa.Uuid()
