"""UUIDv7 on every driver: MariaDB through PyMySQL, mysql-connector and
mysqlclient (each storage), and the async drivers (aiosqlite, psycopg, asyncpg).

Values must come back as plain ``uuid.UUID`` (``type(v) is uuid.UUID``:
asyncpg's own UUID class is a subclass) and every driver must bind them.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from sqla_ids import UUIDv7, uuid7, uuid7_batch, uuid7_pk
from sqla_ids.identifiers import uuid7_from_timestamp
from sqla_ids.types import last_uuid7

START = datetime(2025, 3, 1, tzinfo=UTC)


class Base(orm.DeclarativeBase):
    pass


class NativeEvent(Base):
    __tablename__ = "t_drv_native"
    id: orm.Mapped[uuid.UUID] = orm.mapped_column(UUIDv7(), primary_key=True)
    n: orm.Mapped[int]


class Char32Event(Base):
    __tablename__ = "t_drv_char32"
    id: orm.Mapped[uuid.UUID] = orm.mapped_column(UUIDv7(mariadb_native=False), primary_key=True)
    n: orm.Mapped[int]


class BinaryEvent(Base):
    __tablename__ = "t_drv_binary"
    id: orm.Mapped[uuid.UUID] = orm.mapped_column(
        UUIDv7(mariadb_native=False, mysql_storage="binary"), primary_key=True
    )
    n: orm.Mapped[int]


Event = NativeEvent | Char32Event | BinaryEvent
# Model -> column type MariaDB reports (10.11 has the fixed native UUID).
STORAGES: dict[type[Event], str] = {NativeEvent: "uuid", Char32Event: "char", BinaryEvent: "binary"}


def _values() -> list[uuid.UUID]:
    """Generation order: one key every 6 hours over 3 days, then a batch made now."""
    hours = [uuid7_from_timestamp(START + timedelta(hours=h)) for h in range(0, 72, 6)]
    return hours + uuid7_batch(50)


def _assert_plain(values: list[uuid.UUID]) -> None:
    assert values and all(type(v) is uuid.UUID for v in values), {type(v) for v in values}


@pytest.mark.parametrize("model", list(STORAGES), ids=lambda m: m.__tablename__)
def test_mariadb_drivers_bind_and_read_every_storage(
    mariadb_driver_engine: Engine, model: type[Event]
) -> None:
    engine = mariadb_driver_engine
    table = model.__table__
    assert isinstance(table, sa.Table)
    values = _values()
    shuffled = values[:]
    random.Random(13).shuffle(shuffled)
    table.create(engine)
    try:
        with engine.begin() as conn:
            data_type = conn.execute(
                sa.text(
                    "SELECT data_type FROM information_schema.columns WHERE "
                    "table_schema = DATABASE() AND table_name = :t AND column_name = 'id'"
                ),
                {"t": model.__tablename__},
            ).scalar_one()
            assert data_type.lower() == STORAGES[model]
            # Core: executemany insert, then the index order is generation order.
            conn.execute(table.insert(), [{"id": v, "n": values.index(v)} for v in shuffled])
            stored = list(conn.execute(sa.select(table.c.id).order_by(table.c.id)).scalars())
            assert stored == values
            _assert_plain(stored)
            # Select by key, as uuid.UUID and as text.
            for key in (values[3], str(values[3]), values[3].hex.upper()):
                assert conn.execute(sa.select(table.c.n).where(table.c.id == key)).scalar() == 3
            found = conn.execute(sa.select(table.c.id).where(table.c.id.in_(values[:2]))).scalars()
            assert sorted(found) == values[:2]
            # created_between: the key range of the second day, both ends inclusive.
            day2 = conn.execute(
                sa.select(table.c.n)
                .where(
                    table.c.id.created_between(START + timedelta(days=1), START + timedelta(days=2))
                )
                .order_by(table.c.id)
            ).scalars()
            assert list(day2) == [4, 5, 6, 7, 8]
            conn.execute(table.delete())
        # ORM round trip: flush (batched), identity map, reload in a new session.
        with orm.Session(engine) as session:
            session.add_all(model(id=v, n=i) for i, v in enumerate(shuffled))
            session.commit()
        with orm.Session(engine) as session:
            event = session.get(model, values[5])
            assert event is not None and event.id == values[5] and type(event.id) is uuid.UUID
            assert session.get(model, str(values[5])) is event
            event.n = -5
            session.commit()
            loaded = session.scalars(
                sa.select(model).where(model.id.created_between(START, START + timedelta(hours=11)))
            ).all()
            assert [e.id for e in loaded] == values[:2]
            assert session.scalar(sa.select(model.n).where(model.id == values[5])) == -5
            session.delete(event)
            session.commit()
            assert session.get(model, values[5]) is None
    finally:
        table.drop(engine)


# --- async drivers -------------------------------------------------------------------


class AsyncBase(orm.DeclarativeBase):
    pass


class Message(AsyncBase):
    __tablename__ = "t_drv_async_message"
    id: orm.Mapped[uuid.UUID] = uuid7_pk()
    n: orm.Mapped[int]
    ref: orm.Mapped[str | None] = orm.mapped_column(UUIDv7(as_uuid=False))


async def _async_checks(engine: AsyncEngine) -> None:
    table = Message.__table__
    assert isinstance(table, sa.Table)
    async with engine.begin() as conn:
        await conn.run_sync(AsyncBase.metadata.create_all)
    try:
        async with AsyncSession(engine, expire_on_commit=False) as session:
            messages = [Message(n=i, ref=str(uuid7())) for i in range(30)]
            session.add_all(messages)
            await session.commit()
            ids = [m.id for m in messages]
            assert last_uuid7(session.sync_session, Message) == max(ids)
        async with AsyncSession(engine) as session:
            loaded = (await session.scalars(sa.select(Message).order_by(Message.id))).all()
            _assert_plain([m.id for m in loaded])
            assert [m.id for m in loaded] == ids
            assert all(type(m.ref) is str and uuid.UUID(m.ref) for m in loaded)
            got = await session.get(Message, ids[7])
            assert got is not None and got.n == 7 and type(got.id) is uuid.UUID
        async with engine.begin() as conn:
            value = uuid7()
            returned = (
                await conn.execute(
                    table.insert().returning(table.c.id, table.c.ref),
                    {"id": value, "n": 99, "ref": value},
                )
            ).one()
            assert type(returned.id) is uuid.UUID and returned.id == value
            assert returned.ref == str(value)
            recent = (
                await conn.execute(
                    sa.select(table.c.id).where(
                        table.c.id.created_between(
                            datetime.now(UTC) - timedelta(minutes=5), datetime.now(UTC)
                        )
                    )
                )
            ).scalars()
            recent_ids = list(recent)
            _assert_plain(recent_ids)
            assert set(recent_ids) == {*ids, value}
    finally:
        async with engine.begin() as conn:
            await conn.run_sync(AsyncBase.metadata.drop_all)


def test_async_drivers_return_plain_uuid(async_engine_factory: Callable[[], AsyncEngine]) -> None:
    async def run() -> None:
        engine = async_engine_factory()
        try:
            await _async_checks(engine)
        finally:
            await engine.dispose()

    asyncio.run(run())
