"""One registry of databases: lookup, capabilities, and one way to say "unsupported"."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mssql, mysql, oracle, postgresql, sqlite

from sqla_ids.dialects import (
    Database,
    MariaDB,
    MySQL,
    PostgreSQL,
    SQLite,
    SQLServer,
    UnsupportedDialectError,
    for_dialect,
    registered,
)
from sqla_ids.migration.backends import backend_for
from sqla_ids.migration.backends.base import refusal
from sqla_ids.migration.backends.base import registered as backends
from sqla_ids.types.uuid7 import UUIDv7


def test_each_dialect_gets_its_database() -> None:
    assert isinstance(for_dialect(postgresql.dialect()), PostgreSQL)
    assert isinstance(for_dialect(sqlite.dialect()), SQLite)
    assert isinstance(for_dialect(mssql.dialect()), SQLServer)
    assert type(for_dialect(mysql.dialect())) is MySQL
    assert isinstance(for_dialect("mariadb"), MariaDB)
    assert issubclass(MariaDB, MySQL)
    assert for_dialect("postgresql") is for_dialect(postgresql.dialect())  # one object each
    assert set(registered()) == {
        *("postgresql", "cockroachdb", "yugabytedb"),
        *("mysql", "mariadb", "sqlite", "mssql"),
    }


def test_a_mysql_dialect_connected_to_mariadb_is_mariadb() -> None:
    dialect = mysql.dialect()
    dialect.is_mariadb = True  # what SQLAlchemy learns on the first connection
    assert type(for_dialect(dialect)) is MariaDB


def test_capabilities_are_documented_attributes() -> None:
    assert PostgreSQL.alter_table_add_check and not SQLite.alter_table_add_check
    assert SQLite.client_functions and not PostgreSQL.client_functions
    assert PostgreSQL.range_partitions and not MariaDB.range_partitions
    assert not MySQL.function_in_default and PostgreSQL.function_in_default
    for name in ("alter_table_add_check", "client_functions", "range_partitions"):
        assert name in Database.__dict__


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: backend_for(mssql.dialect()), "migrating keys to UUIDv7 .* SQL Server"),
        (
            lambda: backend_for(mysql.pymysql.dialect()),  # connected to MySQL, not MariaDB
            "MySQL .*not supported by the key migration.*ADD COLUMN IF NOT EXISTS",
        ),
        (lambda: for_dialect("mssql").scanning(), "searching for UUIDs .* SQL Server"),
        (lambda: for_dialect("mssql").uuid192_storage(), "UUID192Type .* SQL Server"),
        (lambda: for_dialect("mssql").uuid7_function_create_sql("f"), "UUIDv7 function .* SQL"),
        (
            lambda: for_dialect("mysql").order_number_next_value(None, "s", None),  # type: ignore[arg-type]
            "order-number sequences .* MySQL .*MariaDB 10.3",
        ),
        (lambda: for_dialect("sqlite").uuid7_month_partition_sql("t", None, "p", 0, 1), "SQLite"),
        (lambda: for_dialect(oracle.dialect()), "'oracle' is not supported"),
    ],
)
def test_unsupported_names_the_database_and_the_feature(call: Any, pattern: str) -> None:
    with pytest.raises(UnsupportedDialectError, match=pattern):
        call()


def test_unsupported_features_raise_the_same_error_from_the_types() -> None:
    from sqla_ids.types.uuid192 import UUID192Type

    with pytest.raises(UnsupportedDialectError, match="SQL Server"):
        UUID192Type().load_dialect_impl(mssql.dialect())
    with pytest.raises(UnsupportedDialectError, match="oracle"):
        UUID192Type().load_dialect_impl(oracle.dialect())
    # UUIDv7 on a database sqla_ids does not know: SQLAlchemy's own Uuid storage.
    assert isinstance(UUIDv7().load_dialect_impl(oracle.dialect()), sa.Uuid)


@pytest.mark.parametrize(
    ("version", "native"),
    [
        ((10, 6, 15), False),
        ((10, 7, 8), False),
        ((10, 8, 8), False),
        ((10, 9, 7), False),
        ((10, 9, 8), True),
        ((10, 10, 5), False),
        ((10, 10, 6), True),
        ((10, 11, 4), False),
        ((10, 11, 5), True),
        ((10, 11, 19), True),
        ((11, 0, 2), False),
        ((11, 0, 3), True),
        ((11, 4, 5), True),
    ],
)
def test_mariadb_native_uuid_only_where_mdev_29959_is_fixed(
    version: tuple[int, ...], native: bool
) -> None:
    dialect: Any = SimpleNamespace(server_version_info=version)
    assert MariaDB.native_uuid(dialect) is native
    storage = for_dialect("mariadb").uuid7_storage(UUIDv7(), dialect)
    assert isinstance(storage, sa.UUID) is native


def test_every_database_has_a_migration_backend_or_a_refusal_of_its_own() -> None:
    """A database class added to the registry must not inherit its parent's
    migration backend unnoticed (CockroachDB speaks PostgreSQL's SQL, but its
    DDL does not roll back): each has a backend registered for it, a refusal
    naming it, or no served ancestor (then "not supported")."""
    served = {backend.database for backend in backends().values()}
    for database in set(registered().values()):
        why = refusal(database)
        if why is not None:
            assert database.label in why
        elif database not in served:
            inherited = [c.label for c in database.__mro__[1:] if c in served]
            assert not inherited, f"{database.label} would use {inherited[0]}'s backend"
