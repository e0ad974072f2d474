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
from sqla_ids.dialects.sql import execute_sql, quote_name


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


# (A name holding "%" and ":" too: the statements reach Alembic's execute() as
# text(), which reads "%" as its driver's placeholder and ":x" as a parameter.)
@pytest.mark.parametrize("name", ["t_trigger_op", "t %s :x ü"])
def test_drop_trigger_undoes_create_trigger(private_engine: Engine, name: str) -> None:
    engine = private_engine
    if engine.dialect.name != "mysql":  # MariaDB's dialect is named "mysql" too
        pytest.skip("triggers stand in for a function DEFAULT on MariaDB/MySQL only")
    register_uuid7_function(engine)
    table = sa.Table(
        name,
        sa.MetaData(),
        # No server default: only the trigger fills the key on MariaDB.
        sa.Column("id", UUIDv7(), primary_key=True),
        sa.Column("n", sa.Integer),
    )
    triggers = sa.text(
        "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
        " WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = :t"
    )
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.create_uuid7_function()
        table.create(conn)
        op.create_uuid7_trigger(name, "id")
    try:
        with engine.begin() as conn:
            execute_sql(conn, f"INSERT INTO {quote_name(conn.dialect, name)} (n) VALUES (1)")
            assert is_uuid7(conn.scalar(sa.select(table.c.id)))
            op = Operations(MigrationContext.configure(conn))
            op.drop_uuid7_trigger(name, "id")
            op.drop_uuid7_trigger(name, "id")  # gone already: nothing happens
            assert conn.execute(triggers, {"t": name}).all() == []
        with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:
            execute_sql(conn, f"INSERT INTO {quote_name(conn.dialect, name)} (n) VALUES (2)")
    finally:
        with engine.begin() as conn:
            table.drop(conn)
            Operations(MigrationContext.configure(conn)).drop_uuid7_function()
