"""Server-side UUIDv7: sqla_ids_uuid7() on PostgreSQL, MariaDB and SQLite, DDL and Alembic ops."""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy.engine import Engine

import sqla_ids.alembic  # noqa: F401 - registers op.create_uuid7_function & co.
from sqla_ids import (
    UUIDv7,
    UUIDv7ServerDefault,
    install_uuid7_function,
    is_uuid7,
    register_uuid7_function,
    uuid7_function_ddl,
)
from sqla_ids.types import remove_uuid7_function
from sqla_ids.types.server_functions import (
    uuid7_column_default_sql,
    uuid7_column_trigger_sql,
    uuid7_function_create_sql,
)

ROWS = 3000

# One statement producing ROWS values in a known evaluation order, per dialect.
_MANY = {
    "postgresql": f"SELECT g, sqla_ids_uuid7() FROM generate_series(1, {ROWS}) AS g ORDER BY g",
    "mysql": f"SELECT seq, sqla_ids_uuid7() FROM seq_1_to_{ROWS} ORDER BY seq",
    "sqlite": (
        f"WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {ROWS}) "
        "SELECT g, sqla_ids_uuid7() FROM s"
    ),
}


@pytest.fixture
def function_engine(private_engine: Engine) -> Iterator[Engine]:
    engine = private_engine
    register_uuid7_function(engine)
    with engine.begin() as conn:
        install_uuid7_function(conn)
    try:
        yield engine
    finally:
        with engine.begin() as conn:
            remove_uuid7_function(conn)


def test_values_are_uuid7_and_increase_within_a_connection(function_engine: Engine) -> None:
    with function_engine.connect() as conn:
        rows = conn.exec_driver_sql(_MANY[function_engine.dialect.name]).all()
        singles = [conn.exec_driver_sql("SELECT sqla_ids_uuid7()").scalar() for _ in range(200)]
    values = [uuid.UUID(str(v)) for _, v in rows] + [uuid.UUID(str(v)) for v in singles]
    assert all(is_uuid7(v) for v in values)
    assert values == sorted(values) and len(set(values)) == len(values)


def test_server_default_fills_rows_from_other_clients(function_engine: Engine) -> None:
    md = sa.MetaData()
    table = sa.Table(
        "t_srv_default",
        md,
        sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault()),
        sa.Column("n", sa.Integer, nullable=False),
    )
    md.create_all(function_engine)
    try:
        with function_engine.begin() as conn:
            # "Other clients": plain SQL without the key.
            for n in range(5):
                conn.exec_driver_sql(f"INSERT INTO t_srv_default (n) VALUES ({n})")
            given = uuid.UUID("01900000-0000-7000-8000-000000000001")
            conn.execute(table.insert(), {"id": given, "n": 99})
            ids = conn.execute(sa.select(table.c.id).order_by(table.c.n)).scalars().all()
        assert all(is_uuid7(i) for i in ids)
        assert ids[:5] == sorted(ids[:5]) and ids[5] == given
    finally:
        md.drop_all(function_engine)


def test_metadata_create_all_installs_and_drop_all_removes(private_engine: Engine) -> None:
    engine = private_engine
    md = sa.MetaData()
    sa.Table(
        "t_srv_md",
        md,
        sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault()),
        sa.Column("n", sa.Integer),
    )
    uuid7_function_ddl(md)
    register_uuid7_function(engine)
    md.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t_srv_md (n) VALUES (1)")
            value = conn.exec_driver_sql("SELECT id FROM t_srv_md").scalar()
        assert is_uuid7(uuid.UUID(str(value)))
    finally:
        md.drop_all(engine)
    if engine.dialect.name != "sqlite":
        with pytest.raises(sa.exc.DBAPIError), engine.connect() as conn:
            conn.exec_driver_sql("SELECT sqla_ids_uuid7()")


def test_postgresql_uses_native_uuidv7_from_version_18() -> None:
    (sql,) = uuid7_function_create_sql("postgresql")
    assert "server_version_num')::int >= 180000" in sql and "SELECT uuidv7()" in sql


def _offline_sql(dialect_name: str, run: str) -> str:
    buffer = io.StringIO()
    context = MigrationContext.configure(
        dialect_name=dialect_name, opts={"as_sql": True, "output_buffer": buffer}
    )
    op = Operations(context)
    getattr(op, run)()
    return buffer.getvalue()


@pytest.mark.parametrize("dialect_name", ["postgresql", "mysql"])
def test_alembic_offline_mode_emits_the_sql(dialect_name: str) -> None:
    created = _offline_sql(dialect_name, "create_uuid7_function")
    dropped = _offline_sql(dialect_name, "drop_uuid7_function")
    if dialect_name == "postgresql":
        # Named by the schema current when the script runs (a DO block).
        assert "CREATE OR REPLACE FUNCTION" in created and "'sqla_ids_uuid7'" in created
        assert "current_schema()" in created and "current_schema()" in dropped
        assert "'DROP FUNCTION IF EXISTS ' || s || '.' || 'sqla_ids_uuid7()'" in dropped
    else:  # MariaDB/MySQL: unqualified is the current database
        assert "CREATE FUNCTION IF NOT EXISTS sqla_ids_uuid7()" in created
        assert "DROP FUNCTION IF EXISTS sqla_ids_uuid7" in dropped


def test_alembic_operations_online(private_engine: Engine) -> None:
    engine = private_engine
    register_uuid7_function(engine)
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.create_uuid7_function()
        op.create_table(
            "t_srv_op",
            sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault()),
            sa.Column("n", sa.Integer),
        )
        # create_table already ran the trigger DDL (after_create); the op is idempotent
        # and only does something on MariaDB/MySQL.
        op.create_uuid7_trigger("t_srv_op", "id")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t_srv_op (n) VALUES (1), (2)")
            stored = conn.exec_driver_sql("SELECT id FROM t_srv_op").scalars().all()
        ids = [uuid.UUID(str(v)) for v in stored]
        assert len(ids) == 2 and all(is_uuid7(i) for i in ids)
    finally:
        with engine.begin() as conn:
            op = Operations(MigrationContext.configure(conn))
            op.drop_table("t_srv_op")
            op.drop_uuid7_function()


def test_column_default_and_trigger_sql_per_dialect() -> None:
    assert uuid7_column_default_sql("postgresql") == "sqla_ids_uuid7()"
    assert uuid7_column_default_sql("sqlite") == "(sqla_ids_uuid7())"
    assert uuid7_column_default_sql("mariadb") == "'" + "0" * 32 + "'"
    assert uuid7_column_trigger_sql("postgresql", '"t"', '"id"') == []
    (trigger,) = uuid7_column_trigger_sql("mariadb", "`db`.`orders`", "`id`")
    assert trigger.startswith("CREATE TRIGGER IF NOT EXISTS `db`.`orders_id_uuid7` BEFORE INSERT")
    assert "ON `db`.`orders` FOR EACH ROW" in trigger and "sqla_ids_uuid7()" in trigger
