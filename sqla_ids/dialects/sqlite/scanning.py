"""SQLite SQL of the scanning tools: any column may hold text or a blob."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects.scanning import Scanning, Spellings


class SQLiteScanning(Scanning):
    """SQLite SQL of the scanning tools: any column may hold text or a blob."""

    # SQLite calls the progress handler every this many virtual-machine steps.
    _PROGRESS_STEPS = 10_000

    def fallback_kind(self, sqltype: TypeEngine[Any]) -> str | None:
        """Declared types such as ``uuid`` get NUMERIC affinity, yet store text or blobs."""
        if isinstance(sqltype, sa.types.NullType) or (
            isinstance(sqltype, sa.Numeric) and not isinstance(sqltype, sa.Float)
        ):
            return "any"
        return None

    def match_clause(
        self,
        column: ColumnElement[Any],
        kind: str,
        uuid: UUID,
        spellings: Spellings,
        sqltype: TypeEngine[Any],
    ) -> ColumnElement[bool]:
        """Condition for ``column`` holding ``uuid`` as text or as 16 bytes, whatever its type."""
        as_bytes = column == sa.bindparam(None, uuid.bytes, type_=sa.LargeBinary())
        if kind == "document":
            # LIKE is case-insensitive for ASCII in SQLite.
            return sa.or_(*(column.like(f"%{fragment}%") for fragment in spellings.fragments))
        return sa.or_(column.in_(spellings.exact), as_bytes)

    def hex_expression(self, column: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        """``column`` as 32 lower-case hex digits, whether it stores text or a blob."""
        return sa.case(
            (sa.func.typeof(column) == "blob", sa.func.lower(sa.func.hex(column))),
            else_=sa.func.lower(sa.func.replace(column, "-", "")),
        )

    @contextmanager
    def time_limit(self, connection: Connection, seconds: float | None) -> Iterator[None]:
        """Abort statements after ``seconds`` through SQLite's progress handler."""
        if seconds is None:
            yield
            return
        raw = connection.connection.driver_connection
        if not isinstance(raw, sqlite3.Connection):  # e.g. another driver: no limit available
            yield
            return
        deadline = time.monotonic() + seconds
        raw.set_progress_handler(lambda: time.monotonic() > deadline, self._PROGRESS_STEPS)
        try:
            yield
        finally:
            raw.set_progress_handler(None, 0)

    def is_timeout(self, error: BaseException) -> bool:
        """True when the progress handler interrupted the statement."""
        original = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        return isinstance(original, sqlite3.OperationalError) and "interrupted" in str(original)
