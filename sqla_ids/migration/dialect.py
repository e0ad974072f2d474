"""What the key migration needs from a database: :class:`MigrationDialect`.

Each database's ``sqla_ids/dialects/<database>/migration.py`` subclasses it;
``for_dialect(connection.dialect).migration()`` returns that object. The
planner (:mod:`sqla_ids.migration.plan`) calls the reflection methods and the
runner hands the plan to :attr:`MigrationDialect.strategy`, the object that
changes the columns (in place, by swapping filled columns in, or by
rebuilding tables): a new way of running a migration is a new
:class:`~sqla_ids.migration.strategies.Strategy`, not a branch.

The methods are static: each database binds its module's functions, so the
SQL stays next to the comments that explain it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.model import (
    Blockers,
    ColumnDefinition,
    Dependent,
    NewKeyDefault,
    OldKeyDefault,
    PkMigrationPlan,
    Reference,
    Routine,
    View,
)
from sqla_ids.migration.strategies import OnlineStrategy, Strategy


class MigrationDialect(ABC):
    """Reflection and column changes of the key migration on one database."""

    identifier_quote: ClassVar[str]
    """The character quoting identifiers in this database's SQL text."""
    strategy: ClassVar[Strategy]
    """How this database's columns are changed (see :mod:`sqla_ids.migration.strategies`)."""
    online: ClassVar[OnlineStrategy | None] = None
    """The online strategy (writers keep going), where the database has one."""

    # --- reflection ------------------------------------------------------------

    @staticmethod
    @abstractmethod
    def primary_key(
        connection: Connection, inspector: sa.Inspector, table: str
    ) -> tuple[str | None, list[str]]:
        """Name and columns of ``table``'s primary key."""

    @staticmethod
    @abstractmethod
    def columns(connection: Connection, inspector: sa.Inspector, table: str) -> dict[str, Any]:
        """``table``'s columns by name (SQLAlchemy's reflected column dicts)."""

    @staticmethod
    @abstractmethod
    def foreign_keys(connection: Connection, inspector: sa.Inspector) -> list[dict[str, Any]]:
        """Every foreign key of the schema (for the ones that are not to the key)."""

    @staticmethod
    @abstractmethod
    def find_references(
        connection: Connection, inspector: sa.Inspector, table: str, column: str
    ) -> list[Reference]:
        """Declared foreign keys to ``table.column``."""

    @staticmethod
    @abstractmethod
    def resolve_inheritance(
        connection: Connection, table: str, references: list[Reference], blockers: Blockers
    ) -> None:
        """Handle partitions / inherited tables of the affected tables, or block them."""

    @staticmethod
    @abstractmethod
    def identifier_limit(name: str) -> int | None:
        """How far ``name`` is over the database's identifier limit (``None``: fits)."""

    @staticmethod
    @abstractmethod
    def column_type_sql(connection: Connection, table: str, column: str) -> str:
        """The column's type as the database prints it."""

    @staticmethod
    @abstractmethod
    def find_blockers(
        connection: Connection, inspector: sa.Inspector, table: str, affected: dict[str, set[str]]
    ) -> list[str]:
        """Objects on the affected columns the migration cannot carry over."""

    @staticmethod
    @abstractmethod
    def find_views(
        connection: Connection,
        inspector: sa.Inspector,
        affected: dict[str, set[str]],
        blockers: Blockers | None = None,
    ) -> list[View]:
        """Views that use the affected columns (dropped and recreated around the change)."""

    @staticmethod
    @abstractmethod
    def find_routines(connection: Connection, affected: dict[str, set[str]]) -> list[Routine]:
        """Functions, procedures and triggers whose body uses the affected columns."""

    @staticmethod
    @abstractmethod
    def find_dependents(
        connection: Connection,
        inspector: sa.Inspector,
        table: str,
        column: str,
        affected: dict[str, set[str]],
    ) -> list[Dependent]:
        """Indexes and constraints on the affected columns, to rebuild after the change."""

    # --- the plan's database-specific parts ---------------------------------------

    @staticmethod
    @abstractmethod
    def key_default(connection: Connection, plan: PkMigrationPlan) -> OldKeyDefault:
        """How the old key is filled (identity, sequence, auto-increment…), for downgrade."""

    @staticmethod
    @abstractmethod
    def uuid7_key_default(connection: Connection, plan: PkMigrationPlan) -> NewKeyDefault:
        """How the new key will be filled by the server (``sqla_ids_uuid7()``)."""

    @staticmethod
    @abstractmethod
    def table_sql(connection: Connection, plan: PkMigrationPlan) -> dict[str, list[str]]:
        """The affected tables' definitions as the database prints them (for the record)."""

    @staticmethod
    @abstractmethod
    def column_definitions(connection: Connection, plan: PkMigrationPlan) -> list[ColumnDefinition]:
        """The affected columns' full definitions, to put them back as they were."""

    @staticmethod
    @abstractmethod
    def preserved_columns(connection: Connection, table: str) -> tuple[str, ...]:
        """Columns every UPDATE must leave untouched (``ON UPDATE CURRENT_TIMESTAMP``)."""

    @staticmethod
    @abstractmethod
    def next_old_key(connection: Connection, plan: PkMigrationPlan) -> Any:
        """The old key's next value, numbering rows inserted after the migration on downgrade."""
