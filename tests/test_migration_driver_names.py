"""Names with ``%`` through every MariaDB driver: a statement sent with no
parameters reaches the server exactly as written.

With an empty parameter list PyMySQL formats the text anyway (a table named
``a%s`` became ``a{}``) while mysql-connector does not (it would keep an
escaping ``%%``): :func:`~sqla_ids.migration.core.sql.execute_sql` and
``query_sql`` send the text alone. Here a key added and dropped on a table,
key and unique key whose names hold ``%s`` and a lone ``%`` -- each
statement of the run and its ``SHOW CREATE TABLE`` reads through the driver.
"""

from __future__ import annotations

import uuid

import dbsnapshot
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.dialects.sql import execute_sql, query_sql, quote_name
from sqla_ids.migration import add_uuid7_key, drop_uuid7_key


def test_a_key_added_and_dropped_through_every_driver(mariadb_driver_engine: Engine) -> None:
    engine = mariadb_driver_engine
    if engine.dialect.driver == "mysqlconnector" and sa.__version__.startswith("2.0."):
        pytest.skip(
            "SQLAlchemy 2.0's MySQL reflection through mysql-connector cannot read a table"
            " whose name holds % (its SHOW CREATE TABLE keeps the doubled %%); 2.1 can"
        )
    # (Not ``%%`` nor ``%(n)s`` in a name: SQLAlchemy's own statements with
    # parameters cannot carry them through mysql-connector.)
    table = f"sqla_ids %s 100% {uuid.uuid4().hex[:8]}"
    q = lambda name: quote_name(engine.dialect, name)  # noqa: E731
    unique, code = "uq %s", "co%de"
    try:
        with engine.begin() as conn:
            execute_sql(
                conn,
                f"CREATE TABLE {q(table)} ({q(code)} varchar(20) NOT NULL,"
                f" UNIQUE KEY {q(unique)} ({q(code)}) COMMENT '%s %% 100%')",
            )
            execute_sql(conn, f"INSERT INTO {q(table)} VALUES ('a%s'), ('b%%'), ('c')")
        with engine.connect() as conn:
            found = conn.execute(
                sa.text("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_NAME = :t"),
                {"t": table},
            ).scalar_one()
            assert found == table  # as written, not formatted by the driver
            before = query_sql(conn, f"SHOW CREATE TABLE {q(table)}").one()[1]
            rows = dbsnapshot.rows(conn)
            add_uuid7_key(conn, table, column="k %s", unique_key=unique, keep_unique_key=False)
            keys = conn.execute(sa.text(f"SELECT count(DISTINCT {q('k %s')}) FROM {q(table)}"))
            assert keys.scalar_one() == 3
            drop_uuid7_key(conn, table)
            assert query_sql(conn, f"SHOW CREATE TABLE {q(table)}").one()[1] == before
            assert dbsnapshot.rows(conn) == rows
    finally:
        with engine.begin() as conn:
            execute_sql(conn, f"DROP TABLE IF EXISTS {q(table)}")
