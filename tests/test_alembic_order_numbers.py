"""``op.add_order_number_column`` on a table with rows, and its reverse, on each dialect."""

from __future__ import annotations

import secrets
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


# (Names holding "%" and ":x" too: the format CHECK reaches Alembic as text(),
# which reads "%" as its driver's placeholder and ":x" as a parameter.)
@pytest.mark.parametrize(
    ("table", "column"), [("ops_orders", "number"), ("ops %s :o", "nu %(m)s :b")]
)
def test_add_backfill_and_drop(
    engine: Engine, metadata: sa.MetaData, shop_key: str, table: str, column: str
) -> None:
    orders = sa.Table(
        table,
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
        op.add_order_number_column(table, column, number_type, order_by="created_at")
    codec = OrderNumberCodec(shop_key)
    numbered = sa.Table(
        table,
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("created_at", sa.DateTime),
        sa.Column(column, sa.String(32)),
    )
    with engine.begin() as conn:
        result = conn.execute(sa.select(numbered.c[column]).order_by(numbered.c.created_at))
        numbers = result.scalars().all()
        assert [codec.decode(n) for n in numbers] == list(range(1, 41))
        # The sequence continues after the backfill.
        assert codec.decode(number_type.next_value(conn)) == 41
        with pytest.raises(sa.exc.IntegrityError):  # unique index
            conn.execute(numbered.update().where(numbered.c.id == 100).values({column: numbers[1]}))
    if engine.dialect.name != "sqlite":
        with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:  # CHECK constraint
            conn.execute(numbered.update().where(numbered.c.id == 100).values({column: "12-34"}))
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.drop_order_number_column(table, column, number_type)
        columns = {c["name"] for c in sa.inspect(conn).get_columns(table)}
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


@pytest.fixture
def other_schema(engine: Engine) -> Iterator[str]:
    """A schema (MariaDB: a database) outside the connection's default one."""
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite schemas are attached files, per connection")
    # Names are data: a quote, a backtick, % (a placeholder to psycopg and PyMySQL)
    # and :x (a bound parameter to text()).
    name = f"sqla_ids_t_other 'q\"`b %s :x ü {secrets.token_hex(3)}"
    quoted = engine.dialect.identifier_preparer.quote(name)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE {'SCHEMA' if engine.dialect.name == 'postgresql' else 'DATABASE'} {quoted}"
        )
    try:
        yield name
    finally:
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql(f"DROP SCHEMA {quoted} CASCADE")
            else:
                conn.exec_driver_sql(f"DROP DATABASE {quoted}")


def test_add_in_another_schema_draws_from_that_schemas_sequence(
    engine: Engine, other_schema: str, shop_key: str
) -> None:
    orders = sa.Table(
        "ops_schema_orders",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        schema=other_schema,
    )
    number_type = FormattedOrderNumber(shop_key, sequence="ops_schema_numbers")
    with engine.begin() as conn:
        orders.create(conn)
        conn.execute(orders.insert(), [{"id": i} for i in range(1, 6)])
        op = Operations(MigrationContext.configure(conn))
        op.add_order_number_column("ops_schema_orders", "number", number_type, schema=other_schema)
    numbered = sa.Table(
        "ops_schema_orders",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("number", number_type),
        schema=other_schema,
    )
    codec = OrderNumberCodec(shop_key)
    with engine.begin() as conn:
        numbers = conn.scalars(sa.select(numbered.c.number).order_by(numbered.c.id)).all()
        assert [codec.decode(n) for n in numbers] == [1, 2, 3, 4, 5]
        # The sequence is in the table's schema, and only there.
        inspector = sa.inspect(conn)
        assert "ops_schema_numbers" in inspector.get_sequence_names(schema=other_schema)
        assert "ops_schema_numbers" not in inspector.get_sequence_names()
        # The column default of a table in that schema continues the same sequence.
        conn.execute(numbered.insert().values(id=6))
        assert (
            codec.decode(conn.scalar(sa.select(numbered.c.number).where(numbered.c.id == 6))) == 6
        )
        op = Operations(MigrationContext.configure(conn))
        op.drop_order_number_column("ops_schema_orders", "number", number_type, schema=other_schema)
        assert "ops_schema_numbers" not in sa.inspect(conn).get_sequence_names(schema=other_schema)


def test_reverse_keeps_schema_key_column_and_order_by(shop_key: str) -> None:
    from sqla_ids.alembic.order_numbers import AddOrderNumberColumnOp, DropOrderNumberColumnOp

    number_type = FormattedOrderNumber(shop_key, sequence="ops_numbers")
    add = AddOrderNumberColumnOp(
        "orders", "number", number_type, key_column="order_id", order_by="created_at", schema="s"
    )
    drop = add.reverse()
    assert isinstance(drop, DropOrderNumberColumnOp)
    assert (drop.schema, drop.key_column, drop.order_by) == ("s", "order_id", "created_at")
    again = drop.reverse()
    assert (again.schema, again.key_column, again.order_by) == ("s", "order_id", "created_at")
    assert again.type_ is number_type
