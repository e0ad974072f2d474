"""UUIDv7 column type: storage per dialect, order, str input, repr, time ranges."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy import orm
from sqlalchemy.dialects import mssql, mysql, postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.schema import CreateTable

from sqla_ids import UUIDv7, uuid7, uuid7_batch
from sqla_ids.identifiers import (
    UUIDFormatError,
    from_sqlserver_order,
    lowest_uuid7,
    sqlserver_sort_key,
    uuid7_from_timestamp,
)


def _table(metadata: sa.MetaData, type_: UUIDv7 | None = None) -> sa.Table:
    return sa.Table(
        "t_uuid7",
        metadata,
        sa.Column("id", type_ or UUIDv7(), primary_key=True),
        sa.Column("n", sa.Integer),
    )


def test_repr_shows_our_arguments() -> None:
    assert repr(UUIDv7()) == "UUIDv7()"
    assert repr(UUIDv7(mariadb_native=False)) == "UUIDv7(mariadb_native=False)"
    assert repr(UUIDv7(sqlserver_storage="binary")) == "UUIDv7(sqlserver_storage='binary')"


def test_bad_sqlserver_storage_is_refused() -> None:
    with pytest.raises(ValueError, match="sqlserver_storage"):
        UUIDv7(sqlserver_storage="random")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("dialect", "expected"),
    [
        (postgresql.dialect(), "id UUID NOT NULL"),
        (sqlite.dialect(), "id CHAR(32) NOT NULL"),
        (mysql.dialect(), "id CHAR(32) NOT NULL"),
        (mssql.dialect(), "id UNIQUEIDENTIFIER NOT NULL"),
    ],
)
def test_ddl_per_dialect(dialect: sa.engine.Dialect, expected: str) -> None:
    ddl = str(CreateTable(_table(sa.MetaData())).compile(dialect=dialect))
    assert expected in ddl


def test_mariadb_native_or_char32_by_choice() -> None:
    dialect = mysql.dialect()
    dialect.is_mariadb = True
    dialect.server_version_info = (10, 11, 6)
    native = str(CreateTable(_table(sa.MetaData())).compile(dialect=dialect))
    assert "id UUID NOT NULL" in native
    char = str(
        CreateTable(_table(sa.MetaData(), UUIDv7(mariadb_native=False))).compile(dialect=dialect)
    )
    assert "id CHAR(32) NOT NULL" in char


def test_sqlserver_binary_storage_ddl() -> None:
    table = _table(sa.MetaData(), UUIDv7(sqlserver_storage="binary"))
    assert "id BINARY(16) NOT NULL" in str(CreateTable(table).compile(dialect=mssql.dialect()))


def test_sqlserver_ordered_storage_sorts_by_time_under_sqlserver_comparison() -> None:
    dialect = mssql.dialect()
    type_ = UUIDv7()
    bind = type_.dialect_impl(dialect).bind_processor(dialect)
    result = type_.dialect_impl(dialect).result_processor(dialect, None)
    assert bind is not None and result is not None
    values = uuid7_batch(500) + [uuid7_from_timestamp(t) for t in range(0, 10**12, 10**10)]
    stored = [bind(v) for v in values]
    # What SQL Server's index does: sort by its comparison of the stored value.
    stored_as_uuid = [uuid.UUID(str(s)) if not isinstance(s, uuid.UUID) else s for s in stored]
    order = sorted(range(len(values)), key=lambda i: sqlserver_sort_key(stored_as_uuid[i]))
    assert [values[i] for i in order] == sorted(values)
    assert [from_sqlserver_order(s) for s in stored_as_uuid] == values
    # pyodbc hands uniqueidentifier values back as text.
    assert [result(str(s)) for s in stored] == values
    # Stored as-is (the "native" option), SQL Server order is not time order.
    assert sorted(values, key=sqlserver_sort_key) != sorted(values)


def test_sqlserver_binary_storage_round_trips() -> None:
    dialect = mssql.dialect()
    impl = UUIDv7(sqlserver_storage="binary").dialect_impl(dialect)
    bind, result = impl.bind_processor(dialect), impl.result_processor(dialect, None)
    assert bind is not None and result is not None
    value = uuid7()
    assert bind(value) == value.bytes
    assert result(value.bytes) == value


def test_time_order_survives_storage(engine: Engine, metadata: sa.MetaData) -> None:
    table = _table(metadata)
    metadata.create_all(engine)
    values = [uuid7_from_timestamp(t, counter=c) for t in range(1, 10**13, 10**11) for c in (0, 7)]
    values += uuid7_batch(300)
    shuffled = values[:]
    random.Random(7).shuffle(shuffled)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": v, "n": i} for i, v in enumerate(shuffled)])
        stored = conn.execute(sa.select(table.c.id).order_by(table.c.id)).scalars().all()
    assert stored == sorted(values)
    assert all(isinstance(v, uuid.UUID) for v in stored)


def test_mariadb_native_uuid_column_on_real_server(mariadb_engine: Engine) -> None:
    md = sa.MetaData()
    _table(md)
    md.create_all(mariadb_engine)
    try:
        with mariadb_engine.connect() as conn:
            column_type = conn.execute(
                sa.text(
                    "SELECT data_type FROM information_schema.columns "
                    "WHERE table_schema = DATABASE() AND table_name = 't_uuid7' "
                    "AND column_name = 'id'"
                )
            ).scalar_one()
        assert column_type.lower() == "uuid"
    finally:
        md.drop_all(mariadb_engine)


def test_core_accepts_str_and_comparisons(engine: Engine, metadata: sa.MetaData) -> None:
    table = _table(metadata)
    metadata.create_all(engine)
    value = uuid7()
    with engine.begin() as conn:
        conn.execute(table.insert(), {"id": str(value), "n": 1})
        found = conn.execute(sa.select(table.c.n).where(table.c.id == str(value))).scalar_one()
    assert found == 1


def test_bad_string_is_a_clear_error(sqlite_engine: Engine) -> None:
    md = sa.MetaData()
    table = _table(md)
    with pytest.raises(sa.exc.StatementError) as info, sqlite_engine.connect() as conn:
        conn.execute(sa.select(table.c.n).where(table.c.id == "not-a-uuid"))
    assert isinstance(info.value.orig, UUIDFormatError)


class Base(orm.DeclarativeBase):
    pass


class Event(Base):
    __tablename__ = "t_uuid7_event"
    id: orm.Mapped[uuid.UUID] = orm.mapped_column(UUIDv7(), primary_key=True)
    name: orm.Mapped[str] = orm.mapped_column(sa.String(20))


def test_orm_coerces_str_when_the_attribute_is_set() -> None:
    value = uuid7()
    event = Event(id=str(value), name="a")
    assert event.id == value and isinstance(event.id, uuid.UUID)
    event.id = value.hex.upper()  # type: ignore[assignment]
    assert event.id == value
    with pytest.raises(UUIDFormatError):
        event.id = "nope"  # type: ignore[assignment]


def test_created_between_selects_rows_by_key_range(engine: Engine) -> None:
    Base.metadata.create_all(engine)
    try:
        start = datetime(2025, 3, 1, tzinfo=UTC)
        times = [start + timedelta(hours=h) for h in range(0, 72, 6)]
        with orm.Session(engine) as session:
            session.add_all(Event(id=uuid7_from_timestamp(t), name=f"{t:%d-%H}") for t in times)
            session.commit()
            query = (
                sa.select(Event.name)
                .where(
                    Event.id.created_between(start + timedelta(days=1), start + timedelta(days=2))
                )
                .order_by(Event.id)
            )
            names = session.scalars(query).all()
        assert names == [
            f"{t:%d-%H}" for t in times if 24 <= (t - start).total_seconds() / 3600 <= 48
        ]
        sql = str(query.compile(dialect=engine.dialect))
        assert "BETWEEN" in sql
        assert lowest_uuid7(start + timedelta(days=1)) <= uuid7_from_timestamp(
            start + timedelta(days=1)
        )
    finally:
        Base.metadata.drop_all(engine)
