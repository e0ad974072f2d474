"""sqla_ids_uuid7_serial(): server-side UUIDv7 ordered across connections."""

from __future__ import annotations

import io
import itertools
import random
import threading
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from sqlalchemy.dialects import mysql, postgresql
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, MappedAsDataclass, Session, mapped_column

import sqla_ids.alembic  # noqa: F401 - registers op.create_uuid7_function & co.
from sqla_ids import (
    UUIDv7,
    UUIDv7ServerDefault,
    install_uuid7_function,
    is_uuid7,
    register_uuid7_function,
    uuid7_function_ddl,
    uuid7_pk,
)
from sqla_ids.alembic import render_item
from sqla_ids.dialects import UnsupportedDialectError
from sqla_ids.types import last_uuid7, remove_uuid7_function
from sqla_ids.types.server_functions import uuid7_serial_supported


@pytest.fixture
def serial_engine(private_engine: Engine) -> Iterator[Engine]:
    engine = private_engine
    register_uuid7_function(engine)
    with engine.begin() as conn:
        install_uuid7_function(conn, serial=True)
    try:
        yield engine
    finally:
        with engine.begin() as conn:
            remove_uuid7_function(conn)


def _call(conn: Connection) -> uuid.UUID:
    value = conn.exec_driver_sql("SELECT sqla_ids_uuid7_serial()").scalar()
    return uuid.UUID(str(value))


def test_each_call_is_greater_than_every_earlier_one_whichever_connection(
    serial_engine: Engine,
) -> None:
    # Each call starts after the previous one has returned, on a connection
    # picked at random: that order is the only one the values may follow.
    picker = random.Random(7)
    conns = [serial_engine.connect() for _ in range(3)]
    try:
        values = [_call(picker.choice(conns)) for _ in range(600)]
    finally:
        for conn in conns:
            conn.close()
    assert all(is_uuid7(v) for v in values)
    assert all(a < b for a, b in itertools.pairwise(values))


def test_threads_taking_turns_get_increasing_values(serial_engine: Engine) -> None:
    # Four threads, each with its own connection; a lock decides whose call
    # comes next, and the list records that order.
    turn = threading.Lock()
    made: list[uuid.UUID] = []

    def writer() -> None:
        with serial_engine.connect() as conn:
            for _ in range(150):
                with turn:
                    made.append(_call(conn))

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 600 and made == sorted(made) and len(set(made)) == 600


def test_serial_server_default_fills_rows_in_insert_order(private_engine: Engine) -> None:
    engine = private_engine
    md = sa.MetaData()
    table = sa.Table(
        "t_serial",
        md,
        sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault(True)),
        sa.Column("n", sa.Integer, nullable=False),
    )
    uuid7_function_ddl(md)  # sees the serial default and installs that function too
    register_uuid7_function(engine)
    md.create_all(engine)
    try:
        with engine.connect() as one, engine.connect() as two:
            for n in range(40):  # plain SQL from two clients, alternately
                conn = one if n % 2 else two
                conn.exec_driver_sql(f"INSERT INTO t_serial (n) VALUES ({n})")
                conn.commit()
        with engine.connect() as conn:
            ids = conn.execute(sa.select(table.c.id).order_by(table.c.n)).scalars().all()
        assert all(is_uuid7(i) for i in ids) and ids == sorted(ids) and len(ids) == 40
    finally:
        md.drop_all(engine)
    if engine.dialect.name != "sqlite":  # drop_all removed the function and its sequence
        with pytest.raises(sa.exc.DBAPIError), engine.connect() as conn:
            conn.exec_driver_sql("SELECT sqla_ids_uuid7_serial()")


class _SerialBase(DeclarativeBase):
    pass


class _Outbox(_SerialBase):
    __tablename__ = "t_outbox"
    id: Mapped[uuid.UUID] = uuid7_pk(server_default="serial")
    topic: Mapped[str] = mapped_column(sa.String(20))


def test_orm_objects_get_server_made_keys_in_flush_order(private_engine: Engine) -> None:
    engine = private_engine
    uuid7_function_ddl(_SerialBase.metadata)
    register_uuid7_function(engine)
    _SerialBase.metadata.create_all(engine)
    try:
        with Session(engine) as session:
            messages = [_Outbox(topic=f"m{n}") for n in range(25)]
            assert all(m.id is None for m in messages)  # no client-side key
            session.add_all(messages)
            session.flush()  # the keys come back with RETURNING
            ids = [m.id for m in messages]
            assert all(is_uuid7(i) for i in ids) and ids == sorted(ids)
            assert last_uuid7(session, _Outbox) == ids[-1]
            session.commit()
    finally:
        _SerialBase.metadata.drop_all(engine)


def test_uuid7_pk_serial_renders_the_serial_default() -> None:
    class Base(DeclarativeBase):
        pass

    class Ticket(Base):
        __tablename__ = "ticket"
        id: Mapped[uuid.UUID] = uuid7_pk(server_default="serial")

    ddl = str(
        sa.schema.CreateTable(cast(sa.Table, Ticket.__table__)).compile(
            dialect=postgresql.dialect()
        )
    )
    assert "DEFAULT sqla_ids_uuid7_serial()" in ddl
    with pytest.raises(ValueError, match='server_default must be True, False or "serial"'):
        uuid7_pk(server_default="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="generator and assign_on_init do not apply"):
        uuid7_pk(server_default="serial", assign_on_init=True)


def test_alembic_renders_and_emits_the_serial_function() -> None:
    context = SimpleNamespace(imports=set())
    rendered = render_item("server_default", UUIDv7ServerDefault(serial=True), context)
    assert rendered == "sqla_ids.UUIDv7ServerDefault(serial=True)"
    for dialect_name, sequence_ddl, drop_ddl in (
        (
            "postgresql",  # in the current schema, named when the script runs
            "'CREATE SEQUENCE IF NOT EXISTS ' || s || '.' || 'sqla_ids_uuid7_serial_seq'",
            "'DROP SEQUENCE IF EXISTS ' || s || '.' || 'sqla_ids_uuid7_serial_seq'",
        ),
        (
            "mariadb",
            "CREATE SEQUENCE IF NOT EXISTS sqla_ids_uuid7_serial_seq",
            "DROP SEQUENCE IF EXISTS sqla_ids_uuid7_serial_seq",
        ),
    ):
        buffer = io.StringIO()
        migration = MigrationContext.configure(
            dialect_name=dialect_name, opts={"as_sql": True, "output_buffer": buffer}
        )
        op = Operations(migration)
        op.create_uuid7_function(serial=True)
        op.drop_uuid7_function(serial=True)
        sql = buffer.getvalue()
        assert sequence_ddl in sql and "sqla_ids_uuid7_serial" in sql
        assert drop_ddl in sql


def test_mysql_without_sequences_is_refused_before_any_change() -> None:
    dialect = mysql.dialect()  # MySQL, not MariaDB: no SEQUENCE objects
    dialect.server_version_info = (8, 0, 36)
    assert not uuid7_serial_supported(dialect)
    executed: list[Any] = []
    connection = SimpleNamespace(dialect=dialect, exec_driver_sql=executed.append)
    with pytest.raises(UnsupportedDialectError, match=r"needs database sequences.*mysql 8\.0\.36"):
        install_uuid7_function(cast(Connection, connection), serial=True)
    assert executed == []


def test_dataclass_model_leaves_the_serial_key_out_of_init(tmp_path: Any) -> None:
    class DataBase(MappedAsDataclass, DeclarativeBase):
        pass

    class Event(DataBase):
        __tablename__ = "t_serial_dc"
        name: Mapped[str]
        id: Mapped[uuid.UUID] = uuid7_pk(server_default="serial", dataclass=True)

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'dc.sqlite3'}")
    register_uuid7_function(engine)
    uuid7_function_ddl(DataBase.metadata)
    DataBase.metadata.create_all(engine)
    with Session(engine) as session:
        first, second = Event(name="a"), Event(name="b")  # no id argument
        assert first.id is None
        session.add_all([first, second])
        session.flush()
        assert is_uuid7(first.id) and first.id < second.id
    engine.dispose()
