"""PostgreSQL SQL of the scanning tools (``uuid``, ``bytea``, text, ``jsonb``, arrays)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects.scanning import Scanning, Spellings


class PostgreSQLScanning(Scanning):
    """PostgreSQL SQL of the scanning tools (``uuid``, ``bytea``, text, ``jsonb``, arrays)."""

    # SQLSTATE of "canceling statement due to statement timeout".
    _QUERY_CANCELED = "57014"

    def fallback_kind(self, sqltype: TypeEngine[Any]) -> str | None:
        """PostgreSQL has no column type beyond the generic ones that may hold a UUID."""
        return None

    def _contains_any(
        self, text: ColumnElement[Any], fragments: tuple[str, ...]
    ) -> ColumnElement[bool]:
        # ILIKE: documents may spell the UUID in either case.
        return sa.or_(*(text.ilike(f"%{fragment}%") for fragment in fragments))

    def match_clause(
        self,
        column: ColumnElement[Any],
        kind: str,
        uuid: UUID,
        spellings: Spellings,
        sqltype: TypeEngine[Any],
    ) -> ColumnElement[bool]:
        """Condition for ``column`` holding ``uuid``; equality where an index can serve it."""
        if kind == "uuid":
            return column == sa.bindparam(None, uuid, type_=sa.Uuid())
        if kind == "binary":
            return column == sa.bindparam(None, uuid.bytes, type_=sa.LargeBinary())
        if kind == "text":
            return column.in_(spellings.exact)
        if kind == "array":
            item = getattr(sqltype, "item_type", None)
            if isinstance(item, sa.Uuid):
                return sa.bindparam(None, uuid, type_=sa.Uuid()) == sa.any_(column)
            return self._contains_any(sa.cast(column, sa.Text()), spellings.fragments)
        # document: json/jsonb/long text
        return self._contains_any(sa.cast(column, sa.Text()), spellings.fragments)

    def hex_expression(self, column: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        """``column`` as 32 lower-case hex digits."""
        if kind == "binary":
            return sa.func.encode(column, sa.literal_column("'hex'"))
        return sa.func.lower(sa.func.replace(sa.cast(column, sa.Text()), "-", ""))

    @contextmanager
    def time_limit(self, connection: Connection, seconds: float | None) -> Iterator[None]:
        """``SET LOCAL statement_timeout`` for the current transaction."""
        if seconds is not None:
            milliseconds = max(1, int(seconds * 1000))
            connection.exec_driver_sql(f"SET LOCAL statement_timeout = {milliseconds}")
        yield

    def is_timeout(self, error: BaseException) -> bool:
        """True for ``canceling statement due to statement timeout`` (SQLSTATE 57014)."""
        original = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        return getattr(original, "sqlstate", None) == self._QUERY_CANCELED
