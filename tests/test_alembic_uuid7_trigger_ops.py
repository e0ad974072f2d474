"""``op.create_uuid7_trigger`` and its reverse ``op.drop_uuid7_trigger`` (with ``schema=``)."""

from __future__ import annotations

import io

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy.engine import Engine

import sqla_ids.alembic  # noqa: F401 - registers the operations
from sqla_ids import UUIDv7, is_uuid7, register_uuid7_function


def _offline(run: str, *args: object, **kwargs: object) -> str:
    buffer = io.StringIO()
    context = MigrationContext.configure(
        dialect_name="mysql", opts={"as_sql": True, "output_buffer": buffer}
    )
    getattr(Operations(context), run)(*args, **kwargs)
    return buffer.getvalue()


def test_trigger_operations_offline_name_the_same_trigger() -> None:
    created = _offline("create_uuid7_trigger", "orders", "id", schema="shop")
    assert "CREATE TRIGGER IF NOT EXISTS shop.`orders_id_uuid7` BEFORE INSERT ON shop.orders" in (
        created
    )
    dropped = _offline("drop_uuid7_trigger", "orders", "id", schema="shop")
    assert dropped.strip() == "DROP TRIGGER IF EXISTS shop.`orders_id_uuid7`;"
    assert "DROP TRIGGER IF EXISTS `orders_id_uuid7`" in _offline("drop_uuid7_trigger", "orders")


def test_trigger_operations_elsewhere_do_nothing() -> None:
    buffer = io.StringIO()
    context = MigrationContext.configure(
        dialect_name="postgresql", opts={"as_sql": True, "output_buffer": buffer}
    )
    op = Operations(context)
    op.create_uuid7_trigger("orders")
    op.drop_uuid7_trigger("orders")
    assert buffer.getvalue() == ""


def test_drop_trigger_undoes_create_trigger(private_engine: Engine) -> None:
    engine = private_engine
    if engine.dialect.name != "mysql":  # MariaDB's dialect is named "mysql" too
        pytest.skip("triggers stand in for a function DEFAULT on MariaDB/MySQL only")
    register_uuid7_function(engine)
    table = sa.Table(
        "t_trigger_op",
        sa.MetaData(),
        # No server default: only the trigger fills the key on MariaDB.
        sa.Column("id", UUIDv7(), primary_key=True),
        sa.Column("n", sa.Integer),
    )
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.create_uuid7_function()
        table.create(conn)
        op.create_uuid7_trigger("t_trigger_op", "id")
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t_trigger_op (n) VALUES (1)")
            assert is_uuid7(conn.scalar(sa.select(table.c.id)))
            op = Operations(MigrationContext.configure(conn))
            op.drop_uuid7_trigger("t_trigger_op", "id")
            op.drop_uuid7_trigger("t_trigger_op", "id")  # gone already: nothing happens
            triggers = conn.exec_driver_sql("SHOW TRIGGERS LIKE 't_trigger_op'").all()
        assert triggers == []
        with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO t_trigger_op (n) VALUES (2)")  # no key now
    finally:
        with engine.begin() as conn:
            table.drop(conn)
            Operations(MigrationContext.configure(conn)).drop_uuid7_function()
