"""PostgreSQL: the key migration's backend (CockroachDB and YugabyteDB are
refused, by name).

- ``reflect.py``: what the planner reads from the catalog
- ``offline.py``: every affected column converted in place, in one transaction
- ``online.py``: the online mode (expand, backfill, prepare, swap, contract)
"""

from __future__ import annotations

from typing import ClassVar

from sqla_ids.dialects import CockroachDB, PostgreSQL, YugabyteDB
from sqla_ids.dialects.postgresql.variant import PostgreSQLVariant
from sqla_ids.migration.backends.add_key import KeyAdder
from sqla_ids.migration.backends.base import (
    MigrationBackend,
    OnlineStrategy,
    PreflightReads,
    Reflection,
    RowWrites,
    Strategy,
    refuse_database,
)
from sqla_ids.migration.backends.postgresql import preflight, reflect, writes
from sqla_ids.migration.backends.postgresql.add_key import (
    PostgreSQLKeyAdder,
    PostgreSQLOnlineKeyAdder,
)
from sqla_ids.migration.backends.postgresql.offline import AlterType
from sqla_ids.migration.backends.postgresql.online import PostgreSQLOnline

__all__ = ["PostgreSQLBackend"]


def _variant_refusal(variant: type[PostgreSQLVariant]) -> str:
    # Each step of both modes counts on PostgreSQL's DDL rolling back with its
    # transaction (a failed check leaves nothing half done).
    return (
        f"migrating keys to UUIDv7 is not supported on {variant.label} (the migration"
        " changes columns and constraints in one transaction that rolls back on any"
        f" failure; {variant.ddl_in_transactions})"
    )


for _variant in (CockroachDB, YugabyteDB):
    refuse_database(_variant, _variant_refusal(_variant))


class PostgreSQLBackend(MigrationBackend):
    """PostgreSQL: transactional DDL, columns converted in place; online mode."""

    database: ClassVar[type[PostgreSQL]] = PostgreSQL
    identifier_quote: ClassVar[str] = reflect.IDENTIFIER_QUOTE
    reflect: ClassVar[Reflection] = reflect
    preflight: ClassVar[PreflightReads] = preflight
    writes: ClassVar[RowWrites] = writes
    strategy: ClassVar[Strategy] = AlterType()
    key_adder: ClassVar[KeyAdder | None] = PostgreSQLKeyAdder()
    online_key_adder: ClassVar[KeyAdder | None] = PostgreSQLOnlineKeyAdder()
    online: ClassVar[OnlineStrategy | None] = PostgreSQLOnline()
    view_dependencies: ClassVar[bool] = True
