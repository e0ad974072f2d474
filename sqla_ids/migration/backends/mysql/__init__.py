"""MariaDB: the key migration's backend (MySQL is refused, by name).

- ``reflect.py``: what the planner reads from ``information_schema``
- ``offline.py``: filled temporary columns swapped in, resumable step by step
- ``online.py``: the online mode (expand, backfill, prepare, swap, contract)

MySQL is not served: the statements are MariaDB's (``ADD COLUMN IF NOT
EXISTS``, ``DROP FOREIGN KEY IF EXISTS``, ``FOREIGN KEY IF NOT EXISTS``,
``SET STATEMENT … FOR``, ``RANDOM_BYTES`` in the backfill, native ``UUID``),
which MySQL 8 and 9 reject, and no MySQL server is in the test runs (none is
published on the package registries this project builds from; Debian ships
MariaDB). :data:`MYSQL_REFUSAL` says so to whoever tries.
"""

from __future__ import annotations

from typing import ClassVar

from sqla_ids.dialects import MariaDB, MySQL
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
from sqla_ids.migration.backends.mysql import preflight, reflect, writes
from sqla_ids.migration.backends.mysql.add_key import MariaDBKeyAdder, MariaDBOnlineKeyAdder
from sqla_ids.migration.backends.mysql.offline import Swap
from sqla_ids.migration.backends.mysql.online import MariaDBOnline

__all__ = ["MYSQL_REFUSAL", "MariaDBBackend"]

MYSQL_REFUSAL = (
    "MySQL (as opposed to MariaDB) is not supported by the key migration: its statements"
    " are MariaDB's (ADD COLUMN IF NOT EXISTS, DROP FOREIGN KEY IF EXISTS, SET STATEMENT"
    " ... FOR, native UUID), which MySQL 8 and 9 reject, and it is not tested on MySQL;"
    " migrate on MariaDB, PostgreSQL or SQLite (the UUIDv7 column types work on MySQL)"
)
refuse_database(MySQL, MYSQL_REFUSAL)


class MariaDBBackend(MigrationBackend):
    """MariaDB: filled temporary columns swapped in, step by step; online mode."""

    database: ClassVar[type[MySQL]] = MariaDB
    identifier_quote: ClassVar[str] = reflect.IDENTIFIER_QUOTE
    reflect: ClassVar[Reflection] = reflect
    preflight: ClassVar[PreflightReads] = preflight
    writes: ClassVar[RowWrites] = writes
    strategy: ClassVar[Strategy] = Swap()
    key_adder: ClassVar[KeyAdder | None] = MariaDBKeyAdder()
    online_key_adder: ClassVar[KeyAdder | None] = MariaDBOnlineKeyAdder()
    online: ClassVar[OnlineStrategy | None] = MariaDBOnline()
    transactional_ddl: ClassVar[bool] = False
