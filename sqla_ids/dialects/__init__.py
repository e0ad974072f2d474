"""Per-database support: one :class:`Database` object per database family.

``for_dialect(connection.dialect)`` gives the object for a SQLAlchemy
dialect: :class:`~sqla_ids.dialects.postgresql.PostgreSQL` (and its variants
:class:`~sqla_ids.dialects.cockroachdb.CockroachDB`,
:class:`~sqla_ids.dialects.yugabytedb.YugabyteDB`),
:class:`~sqla_ids.dialects.mysql.MySQL`,
:class:`~sqla_ids.dialects.mysql.MariaDB` (a subclass of ``MySQL``),
:class:`~sqla_ids.dialects.sqlite.SQLite` or
:class:`~sqla_ids.dialects.mssql.SQLServer`. Features ask it instead of
branching on ``dialect.name``; what a database lacks raises
:class:`UnsupportedDialectError` naming the database and the feature.
"""

from __future__ import annotations

from sqla_ids.dialects.base import Database, UnsupportedDialectError, for_dialect, registered

# Importing the subpackages registers their classes (``Database.names``).
from sqla_ids.dialects.cockroachdb import CockroachDB
from sqla_ids.dialects.mssql import SQLServer
from sqla_ids.dialects.mysql import MariaDB, MySQL
from sqla_ids.dialects.postgresql import PostgreSQL
from sqla_ids.dialects.sqlite import SQLite
from sqla_ids.dialects.yugabytedb import YugabyteDB

__all__ = [
    "CockroachDB",
    "Database",
    "MariaDB",
    "MySQL",
    "PostgreSQL",
    "SQLServer",
    "SQLite",
    "UnsupportedDialectError",
    "YugabyteDB",
    "for_dialect",
    "registered",
]
