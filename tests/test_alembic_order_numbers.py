"""``op.add_order_number_column`` on a table with rows, and its reverse, on each dialect."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy.engine import Engine

import sqla_ids.alembic  # noqa: F401 - registers the operations
from sqla_ids import FormattedOrderNumber
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.order_numbers import OrderNumberCodec, default_keyring, register_key

KEY, TWEAK = "EF4359D8D580AA4F7F036D6F04FC6A94", "D8E7920AFA330A"


@pytest.fixture
def shop_key() -> Iterator[str]:
    register_key("alembic_test", KEY, TWEAK)
    yield "alembic_test"
    default_keyring.forget("alembic_test")


def test_add_backfill_and_drop(engine: Engine, metadata: sa.MetaData, shop_key: str) -> None:
    orders = sa.Table(
        "ops_orders",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    metadata.create_all(engine)
    start = datetime(2026, 1, 1)
    # Ids deliberately not in creation order: numbering follows created_at.
    rows = [{"id": 100 - i, "created_at": start + timedelta(hours=i)} for i in range(40)]
    number_type = FormattedOrderNumber(shop_key, sequence="ops_order_numbers")
    with engine.begin() as conn:
        conn.execute(orders.insert(), rows)
        op = Operations(MigrationContext.configure(conn))
        op.add_order_number_column("ops_orders", "number", number_type, order_by="created_at")
    codec = OrderNumberCodec(shop_key)
    numbered = sa.Table(
        "ops_orders",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("created_at", sa.DateTime),
        sa.Column("number", sa.String(32)),
    )
    with engine.begin() as conn:
        result = conn.execute(sa.select(numbered.c.number).order_by(numbered.c.created_at))
        numbers = result.scalars().all()
        assert [codec.decode(n) for n in numbers] == list(range(1, 41))
        # The sequence continues after the backfill.
        assert codec.decode(number_type.next_value(conn)) == 41
        with pytest.raises(sa.exc.IntegrityError):  # unique index
            conn.execute(numbered.update().where(numbered.c.id == 100).values(number=numbers[1]))
    if engine.dialect.name != "sqlite":
        with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:  # CHECK constraint
            conn.execute(numbered.update().where(numbered.c.id == 100).values(number="12-34"))
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.drop_order_number_column("ops_orders", "number", number_type)
        columns = {c["name"] for c in sa.inspect(conn).get_columns("ops_orders")}
    assert columns == {"id", "created_at"}


def test_refuses_a_type_without_sequence(shop_key: str) -> None:
    from sqla_ids.alembic.order_numbers import AddOrderNumberColumnOp

    with pytest.raises(ValueError, match="needs a FormattedOrderNumber with a sequence"):
        AddOrderNumberColumnOp("t", "number", FormattedOrderNumber(shop_key))


def test_offline_mode_is_refused(shop_key: str) -> None:
    context = MigrationContext.configure(dialect_name="postgresql", opts={"as_sql": True})
    op = Operations(context)
    with pytest.raises(MigrationRefusedError, match="offline --sql mode"):
        op.add_order_number_column(
            "t", "number", FormattedOrderNumber(shop_key, sequence="s"), order_by="id"
        )
