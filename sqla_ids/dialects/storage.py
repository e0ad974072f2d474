"""Column storages several databases share: a UUID as its 16 bytes in order.

Compared bytewise (``memcmp``), so UUIDv7 values sort by time. Each database
picks the SQL type (``BINARY(16)``, ``BLOB``) and the literal syntax of a
byte string in its ``ddl.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from sqla_ids.identifiers import parse_uuid


class UUIDBytes(sa.types.TypeDecorator[uuid.UUID]):
    """A UUID stored as its 16 big-endian bytes; every driver binds ``bytes``."""

    impl: Any = sa.LargeBinary
    cache_ok = True
    literal: ClassVar[str] = "X'{}'"
    """How the database writes a byte string literal (``{}``: the hex digits)."""

    def process_bind_param(self, value: Any, dialect: Dialect) -> bytes | None:
        return None if value is None else bytes(parse_uuid(value).bytes)

    def process_result_value(self, value: Any, dialect: Dialect) -> uuid.UUID | None:
        return None if value is None else parse_uuid(bytes(value))

    def literal_processor(self, dialect: Dialect) -> Callable[[Any], str]:
        # The impl's own processor would write the bytes as a text literal.
        return lambda value: self.literal.format(parse_uuid(value).hex)


class Binary16(UUIDBytes):
    """``BINARY(16)`` (MySQL/MariaDB, SQL Server)."""

    impl = sa.BINARY(16)
    cache_ok = True


class Blob16(UUIDBytes):
    """``BLOB`` (SQLite has no ``BINARY(16)``: such a column gets NUMERIC affinity)."""

    impl = sa.BLOB
    cache_ok = True


class SqlServerBinary16(Binary16):
    """``BINARY(16)`` with SQL Server's ``0x…`` literals."""

    literal: ClassVar[str] = "0x{}"
    cache_ok = True
