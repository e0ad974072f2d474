"""SQLite: the key migration's backend.

- ``reflect.py``: what the planner reads from ``sqlite_master`` and the pragmas
- ``offline.py``: the affected tables rebuilt, in one transaction
"""

from __future__ import annotations

from typing import ClassVar

from sqla_ids.dialects import SQLite
from sqla_ids.migration.backends.add_key import KeyAdder
from sqla_ids.migration.backends.base import (
    MigrationBackend,
    PreflightReads,
    Reflection,
    RowWrites,
    Strategy,
)
from sqla_ids.migration.backends.sqlite import preflight, reflect, writes
from sqla_ids.migration.backends.sqlite.add_key import SQLiteKeyAdder
from sqla_ids.migration.backends.sqlite.offline import Rebuild

__all__ = ["SQLiteBackend"]


class SQLiteBackend(MigrationBackend):
    """SQLite: every affected table rebuilt, in one transaction; no online mode."""

    database: ClassVar[type[SQLite]] = SQLite
    identifier_quote: ClassVar[str] = reflect.IDENTIFIER_QUOTE
    reflect: ClassVar[Reflection] = reflect
    preflight: ClassVar[PreflightReads] = preflight
    writes: ClassVar[RowWrites] = writes
    strategy: ClassVar[Strategy] = Rebuild()
    key_adder: ClassVar[KeyAdder | None] = SQLiteKeyAdder()
