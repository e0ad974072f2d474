"""What the UUID tools (``find``, ``relations``) need from a database.

Each database's ``scanning.py`` subclasses :class:`Scanning`; get it with
``for_dialect(connection.dialect).scanning()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any, NamedTuple
from uuid import UUID

from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine


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


class Scanning(ABC):
    """The SQL of the UUID tools on one database."""

    @abstractmethod
    def fallback_kind(self, sqltype: TypeEngine[Any]) -> str | None:
        """Column kind for a type the generic classification does not know."""

    @abstractmethod
    def match_clause(
        self,
        column: ColumnElement[Any],
        kind: str,
        uuid: UUID,
        spellings: Spellings,
        sqltype: TypeEngine[Any],
    ) -> ColumnElement[bool]:
        """A condition true when ``column`` (of ``kind``) holds ``uuid``."""

    @abstractmethod
    def hex_expression(self, column: ColumnElement[Any], kind: str) -> ColumnElement[Any]:
        """The column's value as 32 lower-case hex digits (for comparing columns)."""

    @abstractmethod
    def time_limit(
        self, connection: Connection, seconds: float | None
    ) -> AbstractContextManager[None]:
        """Limit the statements run inside the block to ``seconds`` on the server."""

    @abstractmethod
    def is_timeout(self, error: BaseException) -> bool:
        """True when ``error`` is the server cancelling a statement for its time limit."""
