"""MariaDB/MySQL SQL of the scanning tools (native ``UUID``, ``BINARY(16)``, ``CHAR``, JSON)."""

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


class MySQLScanning(Scanning):
    """MariaDB/MySQL SQL of the scanning tools (native ``UUID``, ``BINARY(16)``, ``CHAR``, JSON)."""

    # Server error codes for "statement interrupted by its time limit".
    _MARIADB_STATEMENT_TIMEOUT = 1969  # ER_STATEMENT_TIMEOUT (max_statement_time)
    _MYSQL_QUERY_TIMEOUT = 3024  # ER_QUERY_TIMEOUT (max_execution_time)

    def fallback_kind(self, sqltype: TypeEngine[Any]) -> str | None:
        """MariaDB's JSON is ``LONGTEXT`` (a document), already a generic string type."""
        return None

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
            # MariaDB's UUID type compares with its canonical text.
            return column == sa.bindparam(None, str(uuid), type_=sa.String())
        if kind == "binary":
            return column == sa.bindparam(None, uuid.bytes, type_=sa.LargeBinary())
        if kind == "text":
            return column.in_(spellings.exact)
        # document (JSON is LONGTEXT with a binary collation, so compare in lower case)
        lowered = sa.func.lower(column)
        return sa.or_(*(lowered.like(f"%{fragment}%") for fragment in spellings.fragments))

    def hex_expression(self, column: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        """``column`` as 32 lower-case ASCII hex digits (one collation for every column)."""
        if kind == "binary":
            text: ColumnElement[Any] = sa.func.hex(column)
        else:
            text = sa.func.replace(sa.cast(column, sa.String()), "-", "")
        return sa.cast(sa.func.lower(text), sa.CHAR(32, collation="ascii_general_ci"))

    @contextmanager
    def time_limit(self, connection: Connection, seconds: float | None) -> Iterator[None]:
        """Session time limit (MySQL ``max_execution_time``, MariaDB ``max_statement_time``)."""
        if seconds is None:
            yield
            return
        variable, value = self.time_limit_setting(seconds)
        connection.exec_driver_sql(f"SET SESSION {variable} = {value}")
        try:
            yield
        finally:
            connection.exec_driver_sql(f"SET SESSION {variable} = 0")

    def time_limit_setting(self, seconds: float) -> tuple[str, str]:
        """The session variable limiting a statement's time, and its value."""
        return "max_execution_time", str(max(1, int(seconds * 1000)))

    def is_timeout(self, error: BaseException) -> bool:
        """True for MariaDB error 1969 or MySQL error 3024."""
        original = error.orig if isinstance(error, sa.exc.DBAPIError) else error
        args: tuple[Any, ...] = getattr(original, "args", ())
        return bool(args) and args[0] in (
            self._MARIADB_STATEMENT_TIMEOUT,
            self._MYSQL_QUERY_TIMEOUT,
        )


class MariaDBScanning(MySQLScanning):
    """MariaDB: the same SQL; statements are limited by ``max_statement_time``."""

    def time_limit_setting(self, seconds: float) -> tuple[str, str]:
        """``max_statement_time`` in seconds."""
        return "max_statement_time", f"{max(seconds, 0.001):.3f}"
