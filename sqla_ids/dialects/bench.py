"""What the insert benchmark needs from a database.

``sqla-ids bench`` and ``benchmarks/insert_keys.py`` work in a throw-away area
(a schema, a database or a database file) that :meth:`Bench.scratch_create`
makes and :meth:`Bench.scratch_drop` removes, so the user's tables are never
touched. Each database's ``bench.py`` subclasses :class:`Bench`; get it with
``for_dialect(dialect).bench()``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from sqlalchemy.engine import URL, Connection, Dialect, Engine
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects.base import UnsupportedDialectError


class Bench(ABC):
    """The insert benchmark's SQL on one database."""

    methods: ClassVar[tuple[str, ...]] = ("core",)
    """Insert methods measured: ``core`` (``executemany``) and, where it exists, ``COPY``."""
    concurrent: ClassVar[bool] = True
    """Whether concurrent writers are measured (SQLite lets one writer in at a time)."""

    @abstractmethod
    def key_ddl(self, dialect: Dialect) -> dict[str, str]:
        """``id`` column DDL per key column kind (``bigint``, ``uuid``, ``text``, …)."""

    @abstractmethod
    def key_type(self, dialect: Dialect, column: str) -> TypeEngine[Any]:
        """The type an application declares for ``column`` (keys not from sqla_ids)."""

    @abstractmethod
    def index_stats(
        self, connection: Connection, table: str
    ) -> tuple[int | None, float | None, float | None]:
        """Primary-key bytes, leaf density % and leaf fragmentation % (``None``: unknown)."""

    def wal_position(self, connection: Connection) -> int | None:
        """The server's write-ahead log position in bytes (``None``: not measured)."""
        return None

    def settle(self, connection: Connection) -> None:
        """Let the database write out earlier runs' work before a timed run (default: nothing)."""
        return None

    def copy(self, connection: Connection, table: str, keys: list[Any] | None, rows: int) -> None:
        """Load ``rows`` rows with the database's bulk-load protocol."""
        raise UnsupportedDialectError(
            f"bulk loading (COPY) is not available on {connection.dialect.name}"
        )

    @abstractmethod
    def scratch_create(self, admin: Engine, url: URL, name: str) -> URL:
        """Create the throw-away area ``name``; return a URL working inside it."""

    @abstractmethod
    def scratch_drop(self, admin: Engine, url: URL, name: str) -> None:
        """Drop the throw-away area ``name`` and everything in it."""
