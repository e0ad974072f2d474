"""MySQL and MariaDB: the insert benchmark (throw-away database, InnoDB sizes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.types import TypeEngine

from sqla_ids.dialects.bench import Bench


def _quote(engine: sa.Engine, name: str) -> str:
    return engine.dialect.identifier_preparer.quote(name)


class MySQLBench(Bench):
    """The insert benchmark on MySQL."""

    # ``sqla-ids bench`` and benchmarks/insert_keys.py work in a throw-away
    # database. InnoDB clusters rows by primary key, so the PK index is the
    # table's data_length. Native UUID on MariaDB >= 10.7, else CHAR(32) as
    # SQLAlchemy's Uuid stores it.

    methods: ClassVar[tuple[str, ...]] = ("core",)
    concurrent: ClassVar[bool] = True  # concurrent writers are measured

    def __init__(self, native_uuid: Callable[[Dialect], bool] | None = None) -> None:
        # MariaDB hands over its own check (this module sits below its class).
        self._native = native_uuid

    def _native_uuid(self, dialect: Dialect) -> bool:
        return self._native is not None and self._native(dialect)

    def key_ddl(self, dialect: Dialect) -> dict[str, str]:
        """The ``id`` column DDL of the benchmark table per key column kind."""
        return {
            "bigint": "id BIGINT AUTO_INCREMENT PRIMARY KEY",
            "uuid": "id UUID PRIMARY KEY"
            if self._native_uuid(dialect)
            else "id CHAR(32) CHARACTER SET ascii PRIMARY KEY",
            "text": "id VARCHAR(36) CHARACTER SET ascii PRIMARY KEY",
        }

    def key_type(self, dialect: Dialect, column: str) -> TypeEngine[Any]:
        """The type an application declares for ``column``, matching :func:`key_ddl`."""
        if column == "text":
            return sa.Text()
        return sa.UUID() if self._native_uuid(dialect) else sa.Uuid(native_uuid=False)

    def index_stats(
        self, connection: Connection, table: str
    ) -> tuple[int | None, float | None, float | None]:
        """Primary-key bytes (the clustered table) of ``table``; no density on InnoDB."""
        quoted = connection.dialect.identifier_preparer.quote(table)
        connection.exec_driver_sql(f"ANALYZE TABLE {quoted}").all()
        value = connection.execute(
            sa.text(
                "SELECT data_length FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = :table"
            ),
            {"table": table},
        ).scalar()
        return (None if value is None else int(value)), None, None

    def scratch_create(self, admin: sa.Engine, url: sa.URL, name: str) -> sa.URL:
        """Create the throw-away database ``name``; return a URL that works inside it."""
        with admin.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {_quote(admin, name)}")
        return url.set(database=name)

    def scratch_drop(self, admin: sa.Engine, url: sa.URL, name: str) -> None:
        """Drop the throw-away database ``name`` and everything in it."""
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {_quote(admin, name)}")
