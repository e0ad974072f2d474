"""Dialect-specific SQL of the scanning tools, one module per database family.

Each ``sqla_ids/dialects/<dialect>.py`` names its module here in
``TOOLS_MODULE`` (its ``# --- tools ---`` section), so the dialect lookup
stays in one place (:func:`sqla_ids.dialects.for_dialect`).
"""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol, cast
from uuid import UUID

from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects import UnsupportedDialectError, for_dialect


class Spellings(NamedTuple):
    """The text forms a UUID may be stored in."""

    exact: tuple[str, ...]
    """Whole-value spellings: canonical and 32-hex in both cases, Crockford Base32."""
    fragments: tuple[str, ...]
    """Lower-case spellings to look for inside documents (case-insensitively)."""

    @classmethod
    def of(cls, uuid: UUID) -> Spellings:
        """Every spelling of ``uuid`` the tools look for."""
        from sqla_ids.identifiers import to_base32

        canonical, hex32, base32 = str(uuid), uuid.hex, to_base32(uuid)
        return cls(
            exact=(canonical, canonical.upper(), hex32, hex32.upper(), base32),
            fragments=(canonical, hex32, base32.lower()),
        )


class ToolsDialect(Protocol):
    """What every ``sqla_ids.tools.dialects`` module provides."""

    def fallback_kind(self, sqltype: TypeEngine[Any]) -> str | None:
        """Column kind for a type the generic classification does not know."""

    def match_clause(
        self,
        column: ColumnElement[Any],
        kind: str,
        uuid: UUID,
        spellings: Spellings,
        sqltype: TypeEngine[Any],
    ) -> ColumnElement[bool]:
        """A condition true when ``column`` (of ``kind``) holds ``uuid``."""

    def hex_expression(self, column: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        """The column's value as 32 lower-case hex digits (for comparing columns)."""

    def time_limit(
        self, connection: Connection, seconds: float | None
    ) -> AbstractContextManager[None]:
        """Limit the statements run inside the block to ``seconds`` on the server."""

    def is_timeout(self, error: BaseException) -> bool:
        """True when ``error`` is the server cancelling a statement for its time limit."""


def tools_dialect(dialect_name: str) -> ToolsDialect:
    """The tools' SQL for the SQLAlchemy dialect ``dialect_name``."""
    module_name = getattr(for_dialect(dialect_name), "TOOLS_MODULE", None)
    if module_name is None:
        raise UnsupportedDialectError(
            f"the UUID tools do not support dialect {dialect_name!r} yet "
            "(supported: postgresql, mariadb/mysql, sqlite)"
        )
    return cast(ToolsDialect, importlib.import_module(module_name))
