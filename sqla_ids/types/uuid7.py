"""``UUIDv7``: a column type for time-ordered UUID keys.

A ``TypeDecorator`` over :class:`sqlalchemy.Uuid`, so every dialect keeps
its usual storage (PostgreSQL ``uuid``, SQLite ``CHAR(32)``…). Where the
usual storage would not keep time order, or where there is a choice
(MariaDB native ``UUID`` vs ``CHAR(32)``, SQL Server), the database's
:class:`~sqla_ids.dialects.Database` picks the storage.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.type_api import TypeEngine
from sqlalchemy.util import generic_repr

from sqla_ids.dialects import UnsupportedDialectError, for_dialect
from sqla_ids.identifiers import parse_uuid, uuid7_bounds
from sqla_ids.identifiers.inspection import TimePoint

SqlServerStorage = Literal["ordered", "binary", "native"]
_SQLSERVER_STORAGES = ("ordered", "binary", "native")


class UUIDv7(sa.types.TypeDecorator[uuid.UUID]):
    """A UUIDv7 column, stored natively where the database keeps time order.

    ``mariadb_native``: on MariaDB ≥ 10.7 store a native ``UUID`` (16 bytes,
    sorted by time for v7 values); ``False`` stores ``CHAR(32)``, as
    SQLAlchemy 2.0 does, so existing columns need no change.

    ``sqlserver_storage``: ``"ordered"`` (default) stores a
    ``uniqueidentifier`` whose bytes are permuted so SQL Server's comparison
    sorts by time; ``"binary"`` stores ``BINARY(16)``; ``"native"`` stores the
    value as is (not time ordered in SQL Server indexes).

    Strings are accepted when an ORM attribute is set (they are parsed into
    ``uuid.UUID`` right away) and in Core parameters.
    """

    impl = sa.Uuid
    cache_ok = True

    def __init__(
        self,
        mariadb_native: bool = True,
        sqlserver_storage: SqlServerStorage = "ordered",
    ) -> None:
        if sqlserver_storage not in _SQLSERVER_STORAGES:
            raise ValueError(
                f"sqlserver_storage must be one of {', '.join(_SQLSERVER_STORAGES)}, "
                f"got {sqlserver_storage!r}"
            )
        super().__init__(as_uuid=True)
        self.mariadb_native = mariadb_native
        self.sqlserver_storage = sqlserver_storage

    def __repr__(self) -> str:
        # Autogenerate writes this into migrations: show our arguments, not the impl's.
        return generic_repr(self)

    @property
    def python_type(self) -> type[uuid.UUID]:
        """Values are ``uuid.UUID`` instances."""
        return uuid.UUID

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """Storage chosen by the database (:meth:`Database.uuid7_storage`).

        A database sqla_ids does not know (Oracle, CockroachDB…) gets
        SQLAlchemy's own ``Uuid`` storage: its native UUID type or ``CHAR(32)``.
        """
        try:
            database = for_dialect(dialect)
        except UnsupportedDialectError:
            return dialect.type_descriptor(sa.Uuid())
        return dialect.type_descriptor(database.uuid7_storage(self, dialect))

    def process_bind_param(self, value: Any, dialect: Dialect) -> uuid.UUID | None:
        """Accept ``uuid.UUID`` or any spelling :func:`parse_uuid` reads."""
        if value is None or isinstance(value, uuid.UUID):
            return value
        return parse_uuid(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> uuid.UUID | None:
        """Return ``uuid.UUID`` whatever the driver hands back."""
        if value is None or isinstance(value, uuid.UUID):
            return value
        return parse_uuid(value)

    def coerce_set_value(self, value: Any) -> Any:
        """Parse a string set on an ORM attribute (``None`` and UUIDs pass through)."""
        if value is None or isinstance(value, uuid.UUID):
            return value
        return parse_uuid(value)

    class comparator_factory(sa.types.TypeDecorator.Comparator[uuid.UUID]):
        """Adds time-range helpers to UUIDv7 columns."""

        def created_between(self, start: TimePoint, end: TimePoint) -> ColumnElement[bool]:
            """``col BETWEEN lowest_uuid7(start) AND highest_uuid7(end)`` (both ends inclusive).

            The primary-key index serves this range, no timestamp column needed.
            """
            low, high = uuid7_bounds(start, end)
            expr: ColumnElement[uuid.UUID] = self.expr
            return expr.between(low, high)
