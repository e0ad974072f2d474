"""Client-side UUIDv7 defaults: uuid7_pk() in ORM/Core/async, batching, last_uuid7()."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.engine import URL, Engine
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from sqla_ids import UUIDv7, is_uuid7, uuid7, uuid7_pk
from sqla_ids.identifiers import UUIDv7Generator
from sqla_ids.types import last_uuid7


class Base(orm.DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "t_def_order"
    id: orm.Mapped[uuid.UUID] = uuid7_pk()
    n: orm.Mapped[int]


class Early(Base):
    __tablename__ = "t_def_early"
    id: orm.Mapped[uuid.UUID] = uuid7_pk(assign_on_init=True)
    n: orm.Mapped[int]


class DataBase(orm.MappedAsDataclass, orm.DeclarativeBase):
    pass


class Ticket(DataBase):
    __tablename__ = "t_def_ticket"
    n: orm.Mapped[int]
    id: orm.Mapped[uuid.UUID] = uuid7_pk(dataclass=True)


@pytest.fixture
def tables(engine: Engine) -> Iterator[Engine]:
    Base.metadata.create_all(engine)
    DataBase.metadata.create_all(engine)
    try:
        yield engine
    finally:
        Base.metadata.drop_all(engine)
        DataBase.metadata.drop_all(engine)


def _count_inserts(engine: Engine) -> list[int]:
    """Number of INSERT statements sent to the driver (one per cursor call)."""
    count = [0]

    @sa.event.listens_for(engine, "before_cursor_execute")
    def count_insert(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if statement.lstrip().upper().startswith("INSERT"):
            count[0] += 1

    return count


def test_classic_mapping_fills_the_key_at_flush(tables: Engine) -> None:
    with orm.Session(tables) as session:
        order = Order(n=1)
        assert order.id is None  # classic mappings: generated at flush
        session.add(order)
        session.flush()
        assert is_uuid7(order.id)
        session.commit()
        assert session.get(Order, order.id) is order


def test_assign_on_init_gives_the_id_before_flush(tables: Engine) -> None:
    given = uuid7()
    early, explicit = Early(n=1), Early(n=2, id=given)
    assert is_uuid7(early.id) and explicit.id == given
    with orm.Session(tables) as session:
        session.add_all([early, explicit])
        session.commit()
        assert {e.id for e in session.scalars(sa.select(Early))} == {early.id, given}


def test_dataclass_mapping_uses_default_factory(tables: Engine) -> None:
    ticket = Ticket(n=1)
    first = ticket.id
    assert is_uuid7(first)
    with orm.Session(tables) as session:
        session.add(ticket)
        session.commit()
        # Core inserts use insert_default.
        session.execute(sa.insert(Ticket), [{"n": 2}, {"n": 3}])
        ids = session.scalars(sa.select(Ticket.id).order_by(Ticket.n)).all()
    assert ids[0] == first and all(is_uuid7(i) for i in ids) and ids == sorted(ids)


def test_orm_bulk_insert_stays_batched(tables: Engine) -> None:
    inserts = _count_inserts(tables)
    rows = 2500
    with orm.Session(tables) as session:
        orders = [Order(n=i) for i in range(rows)]
        session.add_all(orders)
        session.flush()
        generated = [o.id for o in orders]
        assert all(is_uuid7(i) for i in generated)
        # SQLAlchemy's default insertmanyvalues page is 1000 rows: 3 statements, not 2500.
        assert inserts[0] <= 3
        session.commit()
        ids = session.scalars(sa.select(Order.id).order_by(Order.n)).all()
    assert ids == generated == sorted(ids)


def test_core_insert_and_last_uuid7_on_connection(tables: Engine) -> None:
    table = Order.__table__
    assert isinstance(table, sa.Table)
    with tables.begin() as conn:
        assert last_uuid7(conn, table) is None
        result = conn.execute(sa.insert(table).returning(table.c.id), [{"n": i} for i in range(5)])
        ids = result.scalars().all()
        assert last_uuid7(conn, table) == max(ids) == ids[-1]
        assert last_uuid7(conn, "t_def_order") == ids[-1]


def test_last_uuid7_in_session(tables: Engine) -> None:
    with orm.Session(tables) as session:
        assert last_uuid7(session, Order) is None
        orders = [Order(n=i) for i in range(10)]
        session.add_all(orders)
        session.commit()
        assert last_uuid7(session, Order) == max(o.id for o in orders)
        early = Early(n=1)
        session.add(early)
        session.commit()
        assert last_uuid7(session, Early) == early.id


def test_custom_generator_and_shift() -> None:
    generator = UUIDv7Generator(shift=-86_400_000)
    column = uuid7_pk(generator=generator)
    assert isinstance(column.column.type, UUIDv7)
    assert column.column.primary_key


@pytest.mark.slow
def test_bulk_insert_100k_rows_keeps_generation_order(tables: Engine) -> None:
    rows = 100_000
    with orm.Session(tables) as session:
        session.execute(sa.insert(Order), [{"n": i} for i in range(rows)])
        session.commit()
        ids = session.scalars(sa.select(Order.id).order_by(Order.n)).all()
        stored_order = session.scalars(sa.select(Order.n).order_by(Order.id)).all()
    assert len(ids) == rows and ids == sorted(ids)
    assert stored_order == list(range(rows))  # index order == generation order


async def _async_round_trip(url: URL) -> list[uuid.UUID]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        async with AsyncSession(engine) as session:
            orders = [Order(n=i) for i in range(50)]
            session.add_all(orders)
            await session.commit()
            ids = (await session.scalars(sa.select(Order.id).order_by(Order.n))).all()
            assert last_uuid7(session.sync_session, Order) == max(ids)
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.drop_all)
        return list(ids)
    finally:
        await engine.dispose()


def test_async_session_aiosqlite(sqlite_url: URL) -> None:
    ids = asyncio.run(_async_round_trip(sqlite_url.set(drivername="sqlite+aiosqlite")))
    assert len(ids) == 50 and ids == sorted(ids)


def test_async_session_psycopg(postgresql_url: URL) -> None:
    ids = asyncio.run(_async_round_trip(postgresql_url.set(drivername="postgresql+psycopg_async")))
    assert len(ids) == 50 and ids == sorted(ids)
