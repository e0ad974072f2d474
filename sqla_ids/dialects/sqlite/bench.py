"""SQLite: the insert benchmark (throw-away database file, dbstat sizes)."""

from __future__ import annotations

from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects.bench import Bench


class SQLiteBench(Bench):
    """The insert benchmark on SQLite."""

    # ``sqla-ids bench`` and benchmarks/insert_keys.py work in a throw-away
    # database file next to the user's (same disk), never in the user's file.
    # Index size comes from the dbstat virtual table where SQLite has it.

    methods: ClassVar[tuple[str, ...]] = ("core",)
    concurrent: ClassVar[bool] = False  # one writer at a time: SQLite locks the whole file

    def key_ddl(self, dialect: Dialect) -> dict[str, str]:
        """The ``id`` column DDL of the benchmark table per key column kind."""
        return {
            "bigint": "id INTEGER PRIMARY KEY",
            "uuid": "id CHAR(32) PRIMARY KEY",
            "text": "id TEXT PRIMARY KEY",
        }

    def key_type(self, dialect: Dialect, column: str) -> TypeEngine[Any]:
        """The type an application declares for ``column``: ``Uuid`` stores ``CHAR(32)`` hex."""
        return sa.Text() if column == "text" else sa.Uuid()

    def index_stats(
        self, connection: Connection, table: str
    ) -> tuple[int | None, float | None, float | None]:
        """Bytes of the primary-key b-tree of ``table`` (the table itself for INTEGER keys)."""
        try:
            value = connection.execute(
                sa.text(
                    "SELECT sum(pgsize) FROM dbstat WHERE name = "
                    "coalesce((SELECT name FROM sqlite_master WHERE tbl_name = :table "
                    "AND type = 'index'), :table)"
                ),
                {"table": table},
            ).scalar()
        except sa.exc.OperationalError:  # SQLite built without dbstat
            return None, None, None
        return (None if value is None else int(value)), None, None

    def _scratch_path(self, url: sa.URL, name: str) -> str:
        import os
        import tempfile

        database = url.database or ""
        folder = (
            os.path.dirname(os.path.abspath(database))
            if database and database != ":memory:" and not database.startswith("file:")
            else tempfile.gettempdir()
        )
        return os.path.join(folder, f"{name}.sqlite3")

    def scratch_create(self, admin: sa.Engine, url: sa.URL, name: str) -> sa.URL:
        """A URL of the throw-away database file ``name`` next to the user's database."""
        return url.set(database=self._scratch_path(url, name), query={})

    def scratch_drop(self, admin: sa.Engine, url: sa.URL, name: str) -> None:
        """Delete the throw-away database file (and its journal files)."""
        import os

        path = self._scratch_path(url, name)
        for suffix in ("", "-journal", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
