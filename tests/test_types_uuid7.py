"""UUIDv7 column type: storage per dialect (and its options), order, str input and
string mode, repr, time ranges."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.autogenerate.api import AutogenContext
from alembic.migration import MigrationContext
from sqlalchemy import orm
from sqlalchemy.dialects import mssql, mysql, postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.schema import CreateTable

from sqla_ids import UUIDv7, uuid7, uuid7_batch
from sqla_ids.alembic import render_item
from sqla_ids.identifiers import (
    UUIDFormatError,
    from_sqlserver_order,
    lowest_uuid7,
    sqlserver_sort_key,
    uuid7_from_timestamp,
)


def _table(metadata: sa.MetaData, type_: UUIDv7[Any] | None = None) -> sa.Table:
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


def test_repr_of_the_storage_options_and_string_mode() -> None:
    assert repr(UUIDv7(as_uuid=False)) == "UUIDv7(as_uuid=False)"
    assert repr(UUIDv7(mysql_storage="binary")) == "UUIDv7(mysql_storage='binary')"
    assert repr(UUIDv7(sqlite_storage="binary")) == "UUIDv7(sqlite_storage='binary')"
    every = UUIDv7(
        mariadb_native=False,
        sqlserver_storage="binary",
        as_uuid=False,
        mysql_storage="binary",
        sqlite_storage="binary",
    )
    text = repr(every)
    assert text == (
        "UUIDv7(mariadb_native=False, sqlserver_storage='binary', as_uuid=False, "
        "mysql_storage='binary', sqlite_storage='binary')"
    )
    again = eval(text, {"UUIDv7": UUIDv7})  # what a migration file runs
    options = ("mariadb_native", "sqlserver_storage", "as_uuid", "mysql_storage", "sqlite_storage")
    assert [getattr(again, o) for o in options] == [getattr(every, o) for o in options]


def test_autogenerate_renders_the_options() -> None:
    context = AutogenContext(MigrationContext.configure(dialect_name="sqlite"))
    rendered = render_item("type", UUIDv7(as_uuid=False, sqlite_storage="binary"), context)
    assert rendered == "sqla_ids.UUIDv7(as_uuid=False, sqlite_storage='binary')"


def test_options_are_part_of_the_cache_key() -> None:
    keys = {
        UUIDv7()._static_cache_key,
        UUIDv7(as_uuid=False)._static_cache_key,
        UUIDv7(mysql_storage="binary")._static_cache_key,
        UUIDv7(sqlite_storage="binary")._static_cache_key,
    }
    assert len(keys) == 4


@pytest.mark.parametrize("option", ["sqlserver_storage", "mysql_storage", "sqlite_storage"])
def test_bad_storage_is_refused(option: str) -> None:
    with pytest.raises(ValueError, match=option):
        UUIDv7(**{option: "random"})


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


def _ddl(type_: UUIDv7[Any], dialect: sa.engine.Dialect) -> str:
    return str(CreateTable(_table(sa.MetaData(), type_)).compile(dialect=dialect))


def _mariadb(version: tuple[int, ...]) -> sa.engine.Dialect:
    dialect = mysql.dialect()
    dialect.is_mariadb = True
    dialect.server_version_info = version
    return dialect


def test_binary_storage_ddl_on_mysql_mariadb_and_sqlite() -> None:
    binary = UUIDv7(mysql_storage="binary", sqlite_storage="binary")
    assert "id BINARY(16) NOT NULL" in _ddl(binary, mysql.dialect())
    assert "id BLOB NOT NULL" in _ddl(binary, sqlite.dialect())
    assert "id UUID NOT NULL" in _ddl(binary, postgresql.dialect())  # PostgreSQL: always uuid
    # MariaDB: native UUID wins unless turned off or byte-swapped (MDEV-29959).
    assert "id UUID NOT NULL" in _ddl(binary, _mariadb((10, 11, 6)))
    no_native = UUIDv7(mariadb_native=False, mysql_storage="binary")
    assert "id BINARY(16) NOT NULL" in _ddl(no_native, _mariadb((10, 11, 6)))
    assert "id BINARY(16) NOT NULL" in _ddl(binary, _mariadb((10, 8, 8)))
    # One option does not leak into the other database.
    assert "id CHAR(32) NOT NULL" in _ddl(UUIDv7(sqlite_storage="binary"), mysql.dialect())
    assert "id CHAR(32) NOT NULL" in _ddl(UUIDv7(mysql_storage="binary"), sqlite.dialect())
    assert "id BLOB NOT NULL" in _ddl(UUIDv7(sqlite_storage="binary"), sqlite.dialect())


def test_binary_storage_binds_bytes_and_renders_hex_literals() -> None:
    value = uuid7()
    for dialect in (mysql.dialect(), sqlite.dialect()):
        impl = UUIDv7(mysql_storage="binary", sqlite_storage="binary").dialect_impl(dialect)
        bind, result = impl.bind_processor(dialect), impl.result_processor(dialect, None)
        assert bind is not None and result is not None
        assert bind(value) == bind(str(value)) == value.bytes  # no byte swap
        assert type(result(value.bytes)) is uuid.UUID and result(bytearray(value.bytes)) == value
        literal = impl.literal_processor(dialect)
        assert literal is not None and literal(value) == f"X'{value.hex}'"


def test_string_mode_binds_either_spelling_and_returns_text() -> None:
    type_ = UUIDv7(as_uuid=False)
    assert type_.python_type is str and UUIDv7().python_type is uuid.UUID
    value = uuid7()
    for dialect in (postgresql.dialect(), sqlite.dialect(), _mariadb((10, 11, 6))):
        impl = type_.dialect_impl(dialect)
        bind, result = impl.bind_processor(dialect), impl.result_processor(dialect, None)
        assert result is not None
        bound = [bind(v) if bind else v for v in (value, str(value), value.hex.upper())]
        assert bound[0] == bound[1] == bound[2]
        assert result(bound[0]) == str(value)
    assert type_.coerce_set_value(value.hex.upper()) == str(value)
    assert UUIDv7().coerce_set_value(str(value)) == value


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


# --- storage options on real databases -------------------------------------------

STORED_AS = {"sqlite": "hex(id)", "mysql": "HEX(id)", "mariadb": "HEX(id)"}


@pytest.fixture(params=["sqlite", "mariadb"])
def binary_engine(request: pytest.FixtureRequest) -> Engine:
    """SQLite and MariaDB, where binary storage is an option."""
    fixture: Engine = request.getfixturevalue(f"{request.param}_engine")
    return fixture


BINARY = UUIDv7(mariadb_native=False, mysql_storage="binary", sqlite_storage="binary")


@pytest.mark.parametrize("as_uuid", [True, False], ids=["uuid", "text"])
def test_binary_storage_round_trips_in_time_order(binary_engine: Engine, as_uuid: bool) -> None:
    engine = binary_engine
    metadata = sa.MetaData()
    type_ = UUIDv7(
        mariadb_native=False, mysql_storage="binary", sqlite_storage="binary", as_uuid=as_uuid
    )
    table = _table(metadata, type_)
    metadata.create_all(engine)
    # Generation order: a key every ~4 months since 1970 (two per millisecond),
    # then a run made now, many in the same millisecond.
    values = [
        uuid7_from_timestamp(t, counter=c)
        for t in range(1, 1_700_000_000_000, 10**10)
        for c in (0, 7)
    ]
    values += uuid7_batch(300)
    shuffled = values[:]
    random.Random(9).shuffle(shuffled)
    expect = values if as_uuid else [str(v) for v in values]
    try:
        with engine.begin() as conn:
            conn.execute(table.insert(), [{"id": v, "n": values.index(v)} for v in shuffled])
            ordered = conn.execute(sa.select(table.c.id, table.c.n).order_by(table.c.id)).all()
            assert [row.id for row in ordered] == expect  # ORDER BY id = generation order
            assert [row.n for row in ordered] == list(range(len(values)))
            assert {type(row.id) for row in ordered} == {uuid.UUID if as_uuid else str}
            # The column holds the 16 bytes as they are (no swap), read in index order.
            stored = conn.execute(
                sa.text(f"SELECT {STORED_AS[engine.dialect.name]} FROM t_uuid7 ORDER BY id")
            ).scalars()
            assert list(stored) == [v.hex.upper() for v in values]
            assert _plan_sorts_through_the_index(conn)
            key = values[10]
            for spelling in (key, str(key), key.hex):
                assert (
                    conn.execute(sa.select(table.c.n).where(table.c.id == spelling)).scalar() == 10
                )
            # The first 10**11 ms of 1970-1973: the keys at 1 and 10**10 + 1, ... 9 * 10**10 + 1.
            in_range = table.c.id.created_between(0, 10**11 - 1)
            assert conn.execute(sa.select(sa.func.count()).where(in_range)).scalar() == 20
        # Autogenerate sees the column as declared.
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts=_only_these_tables(metadata))
            assert compare_metadata(context, metadata) == []
    finally:
        metadata.drop_all(engine)


def _plan_sorts_through_the_index(conn: sa.Connection) -> bool:
    """``ORDER BY id`` reads the primary-key index instead of sorting."""
    if conn.dialect.name == "sqlite":
        plan = " ".join(
            row[-1]
            for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN SELECT id FROM t_uuid7 ORDER BY id")
        )
        return "INDEX" in plan and "TEMP B-TREE" not in plan
    extra = conn.exec_driver_sql("EXPLAIN SELECT id FROM t_uuid7 ORDER BY id").mappings().one()
    return extra["key"] == "PRIMARY" and "filesort" not in (extra["Extra"] or "")


def test_string_mode_on_every_database(engine: Engine, metadata: sa.MetaData) -> None:
    table = _table(metadata, UUIDv7(as_uuid=False))
    metadata.create_all(engine)
    values = uuid7_batch(20)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [{"id": v if i % 2 else str(v).upper(), "n": i} for i, v in enumerate(values)],
        )
        stored = conn.execute(sa.select(table.c.id).order_by(table.c.id)).scalars().all()
        assert stored == [str(v) for v in values]
        assert all(type(v) is str for v in stored)
        assert conn.execute(sa.select(table.c.n).where(table.c.id == stored[4])).scalar() == 4
        assert conn.execute(sa.select(table.c.n).where(table.c.id == values[5])).scalar() == 5
        recent = conn.execute(
            sa.select(sa.func.count()).where(
                table.c.id.created_between(
                    datetime.now(UTC) - timedelta(minutes=5), datetime.now(UTC)
                )
            )
        ).scalar()
        assert recent == 20
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts=_only_these_tables(metadata))
        assert compare_metadata(context, metadata) == []


def _only_these_tables(metadata: sa.MetaData) -> dict[str, Any]:
    """Autogenerate options comparing ``metadata``'s tables only (other tests leave
    theirs in the run's shared schema)."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        table = obj if type_ == "table" else getattr(obj, "table", None)
        return table is None or table.name in metadata.tables

    return {"compare_type": True, "include_object": include}


class TextBase(orm.DeclarativeBase):
    pass


class Note(TextBase):
    __tablename__ = "t_uuid7_note"
    id: orm.Mapped[str] = orm.mapped_column(UUIDv7(as_uuid=False), primary_key=True)
    body: orm.Mapped[str] = orm.mapped_column(sa.String(20))


def test_string_mode_orm_identity(sqlite_engine: Engine) -> None:
    TextBase.metadata.create_all(sqlite_engine)
    try:
        value = uuid7()
        with orm.Session(sqlite_engine) as session:
            note = Note(id=value.hex.upper(), body="a")
            assert note.id == str(value)
            session.add(note)
            session.commit()
            assert session.get(Note, str(value)) is note
    finally:
        TextBase.metadata.drop_all(sqlite_engine)
