"""ORM inserts of server-made UUIDv7 keys are batched (issue 13, item 7).

The keys of pending objects are fetched from the database before the flush
(PostgreSQL before 18 and MariaDB: a block of the function's state reserved in
one statement, the keys assembled by the client in the function's layout;
elsewhere one SELECT of the function per 1,000), so the ORM inserts them like
client-made keys: a few ``executemany`` calls instead of one ``INSERT …
RETURNING`` per object. Proved by counting the statements sent (an event
listener), never by timing; on SQLite, PostgreSQL and MariaDB, on SQLAlchemy
2.0 and 2.1 alike.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from sqla_ids import (
    UUIDv7,
    UUIDv7ServerDefault,
    install_uuid7_function,
    is_uuid7,
    register_uuid7_function,
    uuid7,
    uuid7_pk,
)
from sqla_ids.types import last_uuid7, remove_uuid7_function
from sqla_ids.types.defaults import PREFETCH_CHUNK, fetch_server_keys, prefetch_server_keys


class Base(orm.DeclarativeBase):
    pass


class Message(Base):
    """``uuid7_pk(server_default="serial")``: every key from sqla_ids_uuid7_serial()."""

    __tablename__ = "t_batch_serial"
    id: orm.Mapped[uuid.UUID] = uuid7_pk(server_default="serial")
    n: orm.Mapped[int]


class Reading(Base):
    """A plain server default, no client default: keys from sqla_ids_uuid7()."""

    __tablename__ = "t_batch_plain"
    id: orm.Mapped[uuid.UUID] = orm.mapped_column(
        UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault()
    )
    n: orm.Mapped[int]


class Animal(Base):
    """Single-table inheritance: one key sequence for every subclass."""

    __tablename__ = "t_batch_animal"
    id: orm.Mapped[uuid.UUID] = uuid7_pk(server_default="serial")
    kind: orm.Mapped[str] = orm.mapped_column(sa.String(10))
    n: orm.Mapped[int]
    __mapper_args__ = {"polymorphic_on": "kind", "polymorphic_identity": "animal"}  # noqa: RUF012


class Cat(Animal):
    __mapper_args__ = {"polymorphic_identity": "cat"}  # noqa: RUF012


MODELS = [Message, Reading]


@pytest.fixture
def server_engine(private_engine: Engine) -> Iterator[Engine]:
    """An engine whose database has both server functions and the tables above."""
    engine = private_engine
    register_uuid7_function(engine)
    with engine.begin() as conn:
        install_uuid7_function(conn, serial=True)
    Base.metadata.create_all(engine)
    try:
        yield engine
    finally:
        Base.metadata.drop_all(engine)
        with engine.begin() as conn:
            remove_uuid7_function(conn)


class _Statements:
    """Statements sent to the driver, by kind (one per cursor call)."""

    def __init__(self, engine: Engine) -> None:
        self.sent: list[tuple[str, bool]] = []
        sa.event.listen(engine, "before_cursor_execute", self._record)

    def _record(
        self, conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        self.sent.append((statement.lstrip().split(None, 1)[0].upper(), many))

    def count(self, verb: str) -> int:
        return sum(1 for sent_verb, _ in self.sent if sent_verb == verb)

    def fetches(self) -> int:
        """Statements that fetched keys (everything but the INSERTs)."""
        return len(self.sent) - self.count("INSERT")

    def reset(self) -> None:
        self.sent.clear()


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.__name__)
def test_add_all_inserts_in_batches_not_one_statement_per_object(
    server_engine: Engine, model: type[Any]
) -> None:
    rows = 1_500  # two blocks of keys, two pages of INSERTs: more than one of each
    statements = _Statements(server_engine)
    with orm.Session(server_engine) as session:
        objects = [model(n=n) for n in range(rows)]
        assert all(o.id is None for o in objects)  # no client-side key
        session.add_all(objects)
        session.flush()
        # Before: 1,500 INSERT … RETURNING. Now: the keys come from at most
        # 1 + ceil(1,500 / 1,000) SELECTs (one for a block of ticks), and the
        # INSERTs are batched like client-made keys (an executemany;
        # insertmanyvalues pages of 1,000).
        assert 1 <= statements.fetches() <= 1 + math.ceil(rows / PREFETCH_CHUNK)
        assert statements.count("INSERT") <= 3, statements.sent
        ids = [o.id for o in objects]
        assert all(is_uuid7(i) for i in ids)
        assert ids == sorted(ids) and len(set(ids)) == rows  # in the order they were added
        assert last_uuid7(session, model) == ids[-1]
        session.commit()
        stored = {n: key for n, key in session.execute(sa.select(model.n, model.id))}
    assert stored == dict(enumerate(ids))  # each row has its object's key


def test_a_lone_object_keeps_insert_returning(server_engine: Engine) -> None:
    statements = _Statements(server_engine)
    with orm.Session(server_engine) as session:
        message = Message(n=1)
        session.add(message)
        session.flush()  # nothing to batch: no extra SELECT
        assert statements.count("INSERT") == 1 and statements.fetches() == 0
        assert is_uuid7(message.id)
        session.commit()


def test_keys_given_by_the_application_are_kept(server_engine: Engine) -> None:
    given = uuid7()
    with orm.Session(server_engine) as session:
        messages = [Message(n=0, id=given), Message(n=1, id=None), Message(n=2), Message(n=3)]
        session.add_all(messages)
        session.commit()
        assert messages[0].id == given
        made = [m.id for m in messages[1:]]  # an explicit None is a key to make
        assert all(is_uuid7(i) for i in made) and made == sorted(made) and given not in made


def test_subclasses_share_one_key_sequence(server_engine: Engine) -> None:
    statements = _Statements(server_engine)
    with orm.Session(server_engine) as session:
        animals = [Cat(n=n) if n % 2 else Animal(n=n) for n in range(6)]
        session.add_all(animals)
        session.flush()
        assert 1 <= statements.fetches() <= 2  # one fetch for the whole table
        ids = [a.id for a in animals]
        assert all(is_uuid7(i) for i in ids) and ids == sorted(ids)
        session.commit()


def test_prefetch_can_be_called_before_the_flush(server_engine: Engine) -> None:
    with orm.Session(server_engine) as session:
        readings = [Reading(n=n) for n in range(3)]
        session.add_all(readings)
        assert prefetch_server_keys(session) == 3  # keys known before any INSERT
        ids = [r.id for r in readings]
        assert all(is_uuid7(i) for i in ids) and ids == sorted(ids)
        session.commit()
        assert [r.id for r in readings] == ids
    with server_engine.connect() as conn:
        keys = fetch_server_keys(conn, PREFETCH_CHUNK + 5, serial=True)
    assert len(keys) == PREFETCH_CHUNK + 5 and keys == sorted(keys) and len(set(keys)) == len(keys)


def test_a_low_recursion_limit_only_means_more_selects(server_engine: Engine) -> None:
    if not getattr(server_engine.dialect, "is_mariadb", False):
        pytest.skip("MariaDB cuts recursive CTEs short at max_recursive_iterations, silently")
    with server_engine.connect() as conn:
        conn.exec_driver_sql("SET SESSION max_recursive_iterations = 10")
        try:
            keys = fetch_server_keys(conn, 50, serial=True)
        finally:
            conn.exec_driver_sql("SET SESSION max_recursive_iterations = DEFAULT")
    assert len(set(keys)) == 50 and keys == sorted(keys)


@pytest.mark.parametrize(
    ("version", "serial", "called"),
    [
        ((15, 4), False, "sqla_ids.uuid7_tick"),  # a block of the function's ticks
        ((18, 0), False, "uuidv7()"),  # what the column DEFAULT calls there
        ((18, 0), True, "sqla_ids_uuid7_serial_seq"),  # a block of the function's sequence
    ],
)
def test_the_fetch_uses_what_the_column_default_uses(
    version: tuple[int, int], serial: bool, called: str
) -> None:
    dialect = postgresql.psycopg.dialect()
    dialect.server_version_info = version
    sent: list[str] = []

    def execute(statement: Any, parameters: dict[str, int] | None = None) -> Any:
        sql = str(statement.compile(dialect=dialect))
        sent.append(sql)
        count = (parameters or {}).get("count", 1)
        if "uuidv7()" in sql:
            rows: list[Any] = [uuid7() for _ in range(count)]
        elif "string_agg" in sql:
            rows = [",".join(str(n) for n in range(1, count + 1))]
        else:  # the first tick, or the millisecond
            rows = [1_764_000_000_000 * (4096 if "tick" in sql else 1)]
        return SimpleNamespace(scalars=lambda: rows, scalar_one=lambda: rows[0])

    connection = SimpleNamespace(dialect=dialect, execute=execute)
    keys = fetch_server_keys(cast(Connection, connection), 3, serial=serial)
    assert len(keys) == 3 and keys == sorted(keys) and all(is_uuid7(k) for k in keys)
    assert any(called in sql for sql in sent), sent


@pytest.mark.parametrize("serial", [False, True], ids=["ticks", "serial"])
def test_a_block_sorts_between_the_functions_keys_before_and_after(
    server_engine: Engine, serial: bool
) -> None:
    # The block moves the function's own state on: the keys the function makes
    # in the same session before and after it sort around it (PostgreSQL and
    # MariaDB assemble the block in Python; SQLite calls the function).
    function = "sqla_ids_uuid7_serial" if serial else "sqla_ids_uuid7"
    with server_engine.connect() as conn:

        def made() -> uuid.UUID:
            value = conn.exec_driver_sql(f"SELECT {function}()").scalar_one()
            return value if isinstance(value, uuid.UUID) else uuid.UUID(value)

        before = made()
        block = fetch_server_keys(conn, 2 * PREFETCH_CHUNK + 3, serial=serial)
        after = made()
    assert all(is_uuid7(k) for k in block) and len(set(block)) == len(block)
    assert [before, *block, after] == sorted([before, *block, after])
    if serial and server_engine.dialect.name != "sqlite":
        # The sequence's values, in the layout the server function gives them
        # (SQLite's client-side function has its own).
        numbers = [(k.int >> 64 & 0xFFF) << 32 | (k.int >> 28 & 0xFFFFFFFF) for k in block]
        assert numbers == sorted(numbers) and {k.hex[16] for k in block} == {"8"}


def test_core_insert_sorted_by_parameter_order_still_works(server_engine: Engine) -> None:
    # The default is not marked "monotonic" for SQLAlchemy's sentinel logic: on
    # SQLite that made SQLAlchemy 2.1.9 fail an assertion in exactly this call.
    table = Reading.__table__
    statement = sa.insert(table).returning(table.c.id, table.c.n, sort_by_parameter_order=True)
    with server_engine.begin() as conn:
        rows = conn.execute(statement, [{"n": n} for n in range(5)]).all()
    assert [n for _, n in rows] == list(range(5)) and all(is_uuid7(i) for i, _ in rows)


def test_async_session_batches_too(tmp_path: Path) -> None:
    async def run() -> list[uuid.UUID]:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'async.sqlite3'}")
        register_uuid7_function(engine.sync_engine)
        statements = _Statements(engine.sync_engine)
        try:
            async with engine.begin() as conn:
                await conn.run_sync(Base.metadata.create_all)
            async with AsyncSession(engine) as session:
                messages = [Message(n=n) for n in range(50)]
                session.add_all(messages)
                await session.flush()
                assert statements.count("INSERT") == 1 and statements.count("WITH") == 1
                ids = [m.id for m in messages]
                await session.commit()
                return ids
        finally:
            await engine.dispose()

    ids = asyncio.run(run())
    assert len(ids) == 50 and ids == sorted(ids) and all(is_uuid7(i) for i in ids)
