"""FormattedOrderNumber on real databases: sequence default, CHECK, comparisons."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_ids.order_numbers import (
    Keyring,
    OrderNumberCodec,
    OrderNumberError,
    WrongCheckDigitError,
    register_key,
)
from sqla_ids.types.order_number import FormattedOrderNumber

KEY = "2DE79D232DF5585D68CE47882AE256D6"
TWEAK = "CBD09280979564"


@pytest.fixture(autouse=True)
def _key() -> None:
    register_key("column_tests", KEY, TWEAK)


def _codec() -> OrderNumberCodec:
    ring = Keyring(environ={})
    ring.register("column_tests", KEY, TWEAK)
    return OrderNumberCodec("column_tests", keyring=ring)


def _orders(metadata: sa.MetaData, name: str = "orders", **options: Any) -> sa.Table:
    options.setdefault("sequence", f"{name}_number_seq")
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("number", FormattedOrderNumber("column_tests", **options), unique=True),
        sa.Column("note", sa.String(20)),
    )


def test_sequence_default_and_user_input_comparison(engine: Engine, metadata: sa.MetaData) -> None:
    orders = _orders(metadata)
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(orders.insert(), {"note": "first"})
        conn.execute(orders.insert(), [{"note": f"n{i}"} for i in range(20)])  # executemany
        numbers = conn.scalars(sa.select(orders.c.number).order_by(orders.c.id)).all()
    codec = _codec()
    assert numbers[0] == codec.encode(1)
    assert [codec.decode(n) for n in numbers] == list(range(1, 22))
    typed = numbers[5].replace("-", "")  # what a customer types on a keypad
    with engine.connect() as conn:
        assert conn.scalar(sa.select(orders.c.note).where(orders.c.number == typed)) == "n4"
        found = conn.scalars(
            sa.select(orders.c.note).where(orders.c.number.in_([typed, numbers[0]]))
        ).all()
        assert sorted(found) == ["first", "n4"]
        like = sa.select(sa.func.count()).where(orders.c.number.like(numbers[0][:4] + "%"))
        assert conn.scalar(like) >= 1
    wrong = typed[:-1] + str((int(typed[-1]) + 1) % 10)
    with pytest.raises(WrongCheckDigitError):
        orders.c.number == wrong  # noqa: B015 - raised while building the expression
    with pytest.raises(WrongCheckDigitError):
        orders.c.number.in_([typed, wrong])


def test_check_constraint_rejects_bad_value_in_database(
    engine: Engine, metadata: sa.MetaData
) -> None:
    orders = _orders(metadata, "orders_ck")
    metadata.create_all(engine)
    table = engine.dialect.identifier_preparer.quote("orders_ck")
    good = _codec().encode(77)
    # A trailing newline must not pass (``$`` matches before it in MariaDB's PCRE).
    for bad in ("12345678", "123-456-78x", "1234-567-890", "123 456 789", good + "\n"):
        with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:
            conn.execute(sa.text(f"INSERT INTO {table} (id, number) VALUES (1, :n)"), {"n": bad})
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO {table} (id, number) VALUES (1, :n)"), {"n": good})
        assert conn.scalar(sa.select(orders.c.number)) == good


def test_orm_flush_fills_the_number(engine: Engine) -> None:
    class Base(DeclarativeBase):
        pass

    class Order(Base):
        __tablename__ = "orm_orders"
        id: Mapped[int] = mapped_column(primary_key=True)
        number: Mapped[str] = mapped_column(
            FormattedOrderNumber("column_tests", sequence="orm_orders_seq"), unique=True
        )

    Base.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            orders = [Order() for _ in range(5)]
            session.add_all(orders)
            session.flush()
            assert [_codec().decode(o.number) for o in orders] == [1, 2, 3, 4, 5]
            session.commit()
            typed = orders[2].number.replace("-", " ")
            assert session.scalars(sa.select(Order).where(Order.number == typed)).one().id == 3
    finally:
        Base.metadata.drop_all(engine)


def test_plain_and_random_increment_schemes(engine: Engine, metadata: sa.MetaData) -> None:
    plain = _orders(metadata, "plain_orders", scheme="plain")
    spread = _orders(metadata, "spread_orders", scheme="random-increment", spread=50)
    metadata.create_all(engine)
    with engine.begin() as conn:
        for _ in range(5):
            conn.execute(plain.insert())
            conn.execute(spread.insert())
        plain_numbers = conn.scalars(sa.select(plain.c.number).order_by(plain.c.id)).all()
        spread_numbers = conn.scalars(sa.select(spread.c.number).order_by(spread.c.id)).all()
    assert plain_numbers[0] == "000-000-018"  # 00000001 + Luhn check digit 8
    values = [spread.c.number.type.order_numbers.decode(n) for n in spread_numbers]
    assert [v // 50 for v in values] == [1, 2, 3, 4, 5]  # one value per block, increasing


@pytest.mark.parametrize("dialect", ["postgresql", "mariadb"])
def test_concurrent_inserts_never_duplicate(dialect: str, request: pytest.FixtureRequest) -> None:
    engine: Engine = request.getfixturevalue(f"{dialect}_engine")
    metadata = sa.MetaData()
    orders = _orders(metadata, "concurrent_orders")
    metadata.create_all(engine)
    errors: list[BaseException] = []
    threads_count, per_thread = 6, 40

    def work() -> None:
        try:
            for _ in range(per_thread):
                with engine.begin() as conn:
                    conn.execute(orders.insert())
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(threads_count)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with engine.connect() as conn:
            numbers = conn.scalars(sa.select(orders.c.number)).all()
        values = sorted(_codec().decode(n) for n in numbers)
        assert len(numbers) == len(set(numbers)) == threads_count * per_thread
        assert values == list(range(1, threads_count * per_thread + 1))
    finally:
        metadata.drop_all(engine)


def test_sequence_created_and_dropped_with_table(engine: Engine) -> None:
    metadata = sa.MetaData()
    orders = _orders(metadata, "lifecycle_orders")
    orders.create(engine)
    with engine.begin() as conn:
        conn.execute(orders.insert())
    orders.drop(engine)
    orders.create(engine)  # a fresh sequence starts again at 1
    try:
        with engine.begin() as conn:
            conn.execute(orders.insert())
            assert _codec().decode(conn.scalar(sa.select(orders.c.number))) == 1
            assert orders.c.number.type.next_value(conn) == _codec().encode(2)
    finally:
        orders.drop(engine)


def test_repr_is_alembic_ready_and_secret_free() -> None:
    column_type = FormattedOrderNumber("column_tests", sequence="orders_seq")
    text = repr(column_type)
    assert text == "FormattedOrderNumber(key='column_tests', sequence='orders_seq')"
    assert KEY.lower() not in text.lower() and TWEAK.lower() not in text.lower()
    assert isinstance(
        eval(text, {"FormattedOrderNumber": FormattedOrderNumber}), FormattedOrderNumber
    )
    with pytest.raises(OrderNumberError):
        column_type.process_bind_param("nonsense", sa.create_engine("sqlite://").dialect)


def test_alembic_renders_type_with_import_and_creates_sequence(engine: Engine) -> None:
    from alembic.autogenerate import render, render_python_code
    from alembic.autogenerate.api import AutogenContext
    from alembic.migration import MigrationContext
    from alembic.operations import Operations
    from alembic.operations.ops import CreateTableOp, UpgradeOps

    column_type = FormattedOrderNumber("column_tests", sequence="alembic_orders_seq")
    migration = MigrationContext.configure(dialect_name=engine.dialect.name)
    context = AutogenContext(migration, opts={"user_module_prefix": None})
    rendered = render._repr_type(column_type, context)
    assert rendered == (
        "sqla_ids.types.order_number.FormattedOrderNumber("
        "key='column_tests', sequence='alembic_orders_seq')"
    )
    metadata = sa.MetaData()
    table = sa.Table("alembic_orders", metadata, sa.Column("number", column_type))
    code = render_python_code(UpgradeOps([CreateTableOp.from_table(table)]))
    assert "CheckConstraint" not in code and "FormattedOrderNumber(" in code
    copied = table.to_metadata(sa.MetaData())  # the type re-creates its CHECK
    assert len([c for c in copied.constraints if isinstance(c, sa.CheckConstraint)]) == 1
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        table = op.create_table(
            "alembic_orders",
            sa.Column("id", sa.Integer, primary_key=True),
            sa.Column("number", column_type),
        )
        assert table is not None
        conn.execute(table.insert())
        assert _codec().decode(conn.scalar(sa.select(table.c.number))) == 1
        op.drop_table("alembic_orders")


def test_async_session_on_postgresql(postgresql_url: sa.engine.URL) -> None:
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    metadata = sa.MetaData()
    orders = _orders(metadata, "async_orders")

    async def run() -> list[str]:
        engine = create_async_engine(postgresql_url.set(drivername="postgresql+psycopg_async"))
        try:
            async with engine.begin() as conn:
                await conn.run_sync(metadata.create_all)
            async with engine.begin() as conn:
                await conn.execute(orders.insert(), [{"note": "a"}, {"note": "b"}])
                numbers = (await conn.scalars(sa.select(orders.c.number))).all()
            async with engine.begin() as conn:
                await conn.run_sync(metadata.drop_all)
            return list(numbers)
        finally:
            await engine.dispose()

    numbers = asyncio.run(run())
    assert sorted(_codec().decode(n) for n in numbers) == [1, 2]
