"""The server function by schema: created and dropped where asked, kept while in use.

PostgreSQL resolves unqualified names through ``search_path``, so an
unqualified ``DROP FUNCTION`` could reach another schema's function; and a
function shared by the tables of several ``MetaData`` must outlive
``drop_all()`` of one of them. On PostgreSQL 18+ column defaults call the
native ``uuidv7()`` directly. Tables of another schema (``schema=``, or a tenant's
under ``schema_translate_map``) get the function where their triggers look
(MariaDB) and order numbers of their own; sessions starting together install and
remove it side by side.
"""

from __future__ import annotations

import secrets
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from conftest import _base_url, _engine, _mariadb_scratch, _postgresql_scratch
from sqlalchemy.engine import URL, Connection, Dialect, Engine

import sqla_ids.alembic  # noqa: F401 - registers op.create_uuid7_function & co.
from sqla_ids import (
    FormattedOrderNumber,
    OrderNumberCodec,
    UUIDv7,
    UUIDv7ServerDefault,
    install_uuid7_function,
    is_uuid7,
    register_uuid7_function,
    uuid7_function_ddl,
)
from sqla_ids.dialects import for_dialect
from sqla_ids.order_numbers import default_keyring, register_key
from sqla_ids.types import remove_uuid7_function
from sqla_ids.types.server_functions import (
    uuid7_column_default_sql,
    uuid7_function_create_sql,
    uuid7_function_drop_sql,
)

SERVERS = ("postgresql", "mariadb")


def _pg18(engine: Engine) -> bool:
    with engine.connect():
        return engine.dialect.name == "postgresql" and (
            tuple(engine.dialect.server_version_info or ()) >= (18,)
        )


@pytest.fixture(params=SERVERS)
def two_schemas(request: pytest.FixtureRequest) -> Iterator[tuple[Engine, str, str]]:
    """An engine whose current schema (database) is ``first``, and ``second``.

    On PostgreSQL ``search_path`` is ``first, second``: an unqualified name
    not found in ``first`` resolves to ``second``.
    """
    dialect: str = request.param
    request.getfixturevalue(f"{dialect}_url")  # skips/fails like every test of that dialect
    scratch = _postgresql_scratch if dialect == "postgresql" else _mariadb_scratch
    with ExitStack() as stack:
        first = stack.enter_context(scratch(_base_url(dialect)))
        second = stack.enter_context(scratch(_base_url(dialect)))
        if dialect == "postgresql":
            names = [_search_path_head(u) for u in (first, second)]
            url = first.update_query_dict({"options": f"-csearch_path={names[0]},{names[1]}"})
        else:
            names = [str(first.database), str(second.database)]
            url = first
        for engine in _engine(url):
            yield engine, names[0], names[1]


def _search_path_head(url: URL) -> str:
    options = url.query["options"]
    assert isinstance(options, str)
    return options.removeprefix("-csearch_path=").split(",")[0]


def _call(conn: Connection, schema: str | None = None) -> uuid.UUID:
    preparer = conn.dialect.identifier_preparer
    name = "sqla_ids_uuid7()"
    if schema is not None:
        name = f"{preparer.quote_schema(schema)}.{name}"
    return uuid.UUID(str(conn.exec_driver_sql(f"SELECT {name}").scalar()))


def _exists(conn: Connection, schema: str, serial: bool = False) -> bool:
    name = "sqla_ids_uuid7_serial" if serial else "sqla_ids_uuid7"
    if conn.dialect.name == "postgresql":
        sql = (
            "SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = :schema AND p.proname = :name"
        )
    else:
        sql = (
            "SELECT count(*) FROM information_schema.ROUTINES "
            "WHERE ROUTINE_SCHEMA = :schema AND ROUTINE_NAME = :name"
        )
    return bool(conn.execute(sa.text(sql), {"schema": schema, "name": name}).scalar())


def test_removing_in_one_schema_leaves_the_other(two_schemas: tuple[Engine, str, str]) -> None:
    engine, first, second = two_schemas
    with engine.begin() as conn:
        install_uuid7_function(conn)  # the current schema: first
        install_uuid7_function(conn, schema=second)
        assert _exists(conn, first) and _exists(conn, second)
        assert remove_uuid7_function(conn) == []
        assert not _exists(conn, first) and _exists(conn, second)
        # Again: first has none left, and an unqualified DROP would now find
        # second's through search_path.
        remove_uuid7_function(conn)
        assert _exists(conn, second) and is_uuid7(_call(conn, second))
        if conn.dialect.name == "postgresql":
            assert is_uuid7(_call(conn))  # unqualified: resolves to second's
        remove_uuid7_function(conn, schema=second)
        assert not _exists(conn, second)


def test_statements_without_a_schema_use_the_current_one_when_they_run(
    two_schemas: tuple[Engine, str, str],
) -> None:
    # What offline scripts (alembic upgrade --sql) and op.create/drop_uuid7_function run.
    engine, first, second = two_schemas
    with engine.begin() as conn:
        install_uuid7_function(conn, schema=second)
        for statement in uuid7_function_create_sql(conn.dialect):
            conn.exec_driver_sql(statement)
        assert _exists(conn, first)
        for _ in range(2):
            for statement in uuid7_function_drop_sql(conn.dialect):
                conn.exec_driver_sql(statement)
        assert not _exists(conn, first) and _exists(conn, second)


def _metadata(name: str, serial: bool = False) -> tuple[sa.MetaData, sa.Table]:
    md = sa.MetaData()
    table = sa.Table(
        name,
        md,
        sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault(serial)),
        sa.Column("n", sa.Integer),
    )
    uuid7_function_ddl(md)
    return md, table


@pytest.mark.parametrize("serial", [False, True], ids=["plain", "serial"])
@pytest.mark.parametrize("engine", SERVERS, indirect=True)
def test_drop_all_keeps_the_function_while_another_metadata_uses_it(
    private_engine: Engine, serial: bool
) -> None:
    engine = private_engine
    md1, _ = _metadata("t_fn_first", serial)
    md2, second = _metadata("t_fn_second", serial)
    md1.create_all(engine)
    md2.create_all(engine)
    with engine.connect() as conn:
        schema = for_schema(conn)
    md1.drop_all(engine)  # the function stays: t_fn_second's default or trigger calls it
    with engine.begin() as conn:
        # Plain SQL: "another client" relying on the server default.
        conn.exec_driver_sql("INSERT INTO t_fn_second (n) VALUES (1)")
        (key,) = conn.execute(sa.select(second.c.id)).scalars().all()
        assert is_uuid7(key)
        native = _pg18(engine) and not serial  # the default calls uuidv7() itself
        assert _exists(conn, schema, serial) is not native
        if not native:
            # What keeps it is named.
            kept = remove_uuid7_function(conn)
            assert any("t_fn_second" in user for user in kept), kept
            assert _exists(conn, schema, serial)
    md2.drop_all(engine)  # the last user is gone: so is the function
    with engine.connect() as conn:
        assert not _exists(conn, schema) and not _exists(conn, schema, serial=True)


def for_schema(conn: Connection) -> str:
    sql = "SELECT current_schema()" if conn.dialect.name == "postgresql" else "SELECT DATABASE()"
    return str(conn.exec_driver_sql(sql).scalar())


@pytest.mark.parametrize("engine", SERVERS, indirect=True)
def test_names_are_data(engine: Engine) -> None:
    name = f"sqla_ids_t w'e\"i`rd$do$ @fn@ % {secrets.token_hex(3)}"
    preparer = engine.dialect.identifier_preparer
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        create = "CREATE SCHEMA" if conn.dialect.name == "postgresql" else "CREATE DATABASE"
        drop = "DROP SCHEMA {} CASCADE" if conn.dialect.name == "postgresql" else "DROP DATABASE {}"
        # exec_driver_sql: the preparer doubles % for the driver, as for every statement.
        conn.exec_driver_sql(f"{create} {preparer.quote_schema(name)}")
        try:
            install_uuid7_function(conn, serial=True, schema=name)
            assert _exists(conn, name) and _exists(conn, name, serial=True)
            assert is_uuid7(_call(conn, name))
            assert remove_uuid7_function(conn, schema=name) == []
            assert not _exists(conn, name) and not _exists(conn, name, serial=True)
        finally:
            conn.exec_driver_sql(drop.format(preparer.quote_schema(name)))


def test_postgresql_without_a_current_schema_says_so(postgresql_url: URL) -> None:
    url = postgresql_url.update_query_dict({"options": "-csearch_path=sqla_ids_no_such_schema"})
    for engine in _engine(url):
        with engine.connect() as conn:
            assert remove_uuid7_function(conn) == []  # nothing to drop
            with pytest.raises(sa.exc.DBAPIError, match="no schema to create the UUIDv7 function"):
                for statement in uuid7_function_create_sql(conn.dialect):
                    conn.exec_driver_sql(statement)


def _dialect(name: str, version: tuple[int, ...] | None) -> Dialect:
    dialect = cast(Dialect, sa.engine.URL.create(name).get_dialect()())
    dialect.server_version_info = version
    return dialect


def test_postgresql_18_defaults_call_native_uuidv7() -> None:
    assert uuid7_column_default_sql(_dialect("postgresql", (18, 0))) == "uuidv7()"
    assert uuid7_column_default_sql(_dialect("postgresql", (19, 1))) == "uuidv7()"
    assert uuid7_column_default_sql(_dialect("postgresql", (17, 6))) == "sqla_ids_uuid7()"
    # Not connected (offline DDL): the function, which is uuidv7() on 18 anyway.
    assert uuid7_column_default_sql(_dialect("postgresql", None)) == "sqla_ids_uuid7()"
    assert uuid7_column_default_sql("postgresql") == "sqla_ids_uuid7()"
    # No native serial function anywhere.
    pg18 = _dialect("postgresql", (18, 0))
    assert uuid7_column_default_sql(pg18, serial=True) == "sqla_ids_uuid7_serial()"
    table = sa.Table(
        "t", sa.MetaData(), sa.Column("id", UUIDv7(), server_default=UUIDv7ServerDefault())
    )
    assert "DEFAULT uuidv7()" in str(sa.schema.CreateTable(table).compile(dialect=pg18))
    assert "DEFAULT sqla_ids_uuid7()" in str(
        sa.schema.CreateTable(table).compile(dialect=_dialect("postgresql", (17, 0)))
    )


def test_postgresql_default_follows_the_connected_server(postgresql_private_engine: Engine) -> None:
    engine = postgresql_private_engine
    md, table = _metadata("t_fn_version")
    md.create_all(engine)
    try:
        with engine.begin() as conn:
            (column,) = [
                c for c in sa.inspect(conn).get_columns("t_fn_version") if c["name"] == "id"
            ]
            native = _pg18(engine)
            assert column["default"] == ("uuidv7()" if native else "sqla_ids_uuid7()")
            conn.execute(table.insert(), {"n": 1})
            assert is_uuid7(conn.execute(sa.select(table.c.id)).scalar_one())
    finally:
        md.drop_all(engine)


def test_offline_sql_names_the_schema() -> None:
    (create,) = uuid7_function_create_sql("postgresql")
    assert "current_schema()" in create and "'sqla_ids_uuid7'" in create
    assert "server_version_num')::int >= 180000" in create and "SELECT uuidv7()" in create
    (drop,) = uuid7_function_drop_sql("postgresql", schema="Shop")
    assert "'\"Shop\"'" in drop and "DROP FUNCTION IF EXISTS" in drop
    assert "dependent_objects_still_exist" in drop
    assert uuid7_function_drop_sql("mariadb", schema="Shop`s") == [
        "DROP FUNCTION IF EXISTS `Shop``s`.sqla_ids_uuid7"
    ]
    # Without a schema MariaDB's unqualified name is exactly the current database.
    assert uuid7_function_drop_sql("mariadb") == ["DROP FUNCTION IF EXISTS sqla_ids_uuid7"]
    serial = " ".join(uuid7_function_create_sql("mariadb", serial=True, schema="S s"))
    assert "SEQUENCE IF NOT EXISTS `S s`.sqla_ids_uuid7_serial_seq" in serial
    assert "FUNCTION IF NOT EXISTS `S s`.sqla_ids_uuid7_serial()" in serial
    assert "NEXTVAL(`S s`.sqla_ids_uuid7_serial_seq)" in serial
    # As the database reads them: run as written, put in migration files or --sql
    # output, so a % is not doubled for psycopg's or PyMySQL's placeholders.
    assert uuid7_function_drop_sql("mariadb", schema="S%s :x") == [
        "DROP FUNCTION IF EXISTS `S%s :x`.sqla_ids_uuid7"
    ]
    (drop,) = uuid7_function_drop_sql("postgresql", schema="S%s :x")
    assert "'\"S%s :x\"'" in drop and "%%" not in drop


def test_sqlite_remove_is_a_no_op() -> None:
    executed: list[Any] = []
    dialect = _dialect("sqlite", (3, 45, 0))
    connection = SimpleNamespace(dialect=dialect, exec_driver_sql=executed.append)
    assert remove_uuid7_function(cast(Connection, connection)) == []
    assert executed == []


def test_demo_start_fresh_drops_only_in_its_own_schema(
    two_schemas: tuple[Engine, str, str],
) -> None:
    from sqla_ids.demo.tour import SEQUENCE, start_fresh
    from sqla_ids.dialects import for_dialect

    engine, first, second = two_schemas
    with engine.begin() as conn:
        database = for_dialect(conn.dialect)
        for schema in (first, second):
            database.order_number_create_sequence(conn, SEQUENCE, schema)
            sa.Table(
                "demo_customers", sa.MetaData(schema=schema), sa.Column("id", sa.Integer)
            ).create(conn)
    said: list[str] = []
    for _ in range(2):  # the second time first has nothing left; second must stay intact
        start_fresh(engine, said.append)
    assert said == ["  found an earlier demo (demo_customers): starting fresh"]
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        assert inspector.get_table_names(schema=first) == []
        assert inspector.get_table_names(schema=second) == ["demo_customers"]
        assert inspector.get_sequence_names(schema=first) == []
        assert inspector.get_sequence_names(schema=second) == [SEQUENCE]


@pytest.mark.parametrize("serial", [False, True], ids=["plain", "serial"])
@pytest.mark.parametrize("how", ["schema_translate_map", "MetaData(schema=)"])
def test_tables_of_another_schema_get_their_keys_and_numbers(
    two_schemas: tuple[Engine, str, str], how: str, serial: bool
) -> None:
    """One schema (MariaDB: database) per tenant, named by SQLAlchemy's
    ``schema_translate_map`` or by the tables: the server-made keys and the order
    numbers work there, the number sequence is the tenant's own (numbering from 1),
    and on MariaDB the function is where its trigger looks for it, the table's own
    database (it was in the current one: every insert failed, and under a
    translate map ``create_all`` did, creating the trigger on a table not there)."""
    engine, first, second = two_schemas
    register_key("tenant_numbers", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    translated = how == "schema_translate_map"
    metadata = sa.MetaData(schema=None if translated else second)
    orders = sa.Table(
        "t_tenant_orders",
        metadata,
        sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault(serial)),
        sa.Column("number", FormattedOrderNumber(key="tenant_numbers", sequence="t_tenant_seq")),
        sa.Column("n", sa.Integer),
    )
    uuid7_function_ddl(metadata)
    tenant = engine.execution_options(schema_translate_map={None: second}) if translated else engine
    try:
        metadata.create_all(tenant)
        database = for_dialect(tenant.dialect)  # (connected: MariaDB, not MySQL)
        with tenant.begin() as conn:
            conn.execute(orders.insert(), [{"n": 1}, {"n": 2}])
            rows = conn.execute(sa.select(orders.c.id, orders.c.number).order_by(orders.c.n)).all()
        codec = OrderNumberCodec("tenant_numbers")
        assert all(is_uuid7(key) for key, _ in rows)
        assert [codec.decode(number) for _, number in rows] == [1, 2]
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names(schema=second) == ["t_tenant_orders"]
            assert sa.inspect(conn).get_table_names(schema=first) == []
            owned = [tuple(s) for s in database.order_number_sequences(conn, second)]
            assert owned == [("t_tenant_seq", "t_tenant_orders", "number")]
            assert database.order_number_sequences(conn, first) == []
            if engine.dialect.name != "postgresql":  # (PostgreSQL: the current schema's)
                assert _exists(conn, second, serial) and not _exists(conn, first, serial)
        metadata.drop_all(tenant)
        with engine.connect() as conn:
            assert database.order_number_sequences(conn, second) == []
            assert not _exists(conn, second) and not _exists(conn, second, serial=True)
    finally:
        default_keyring.forget("tenant_numbers")
        metadata.drop_all(tenant)


def test_sqlite_tenant_databases_number_on_their_own(tmp_path: Path) -> None:
    """SQLite: one attached database per tenant under ``schema_translate_map``; each
    keeps its own order-number counter (it was the main database's, shared)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'main.sqlite3'}")

    @sa.event.listens_for(engine, "connect")
    def attach(dbapi_connection: Any, record: Any) -> None:
        for tenant in ("a", "b"):
            dbapi_connection.execute(f"ATTACH DATABASE '{tmp_path / tenant}.sqlite3' AS t_{tenant}")

    register_uuid7_function(engine)
    register_key("tenant_numbers", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    metadata = sa.MetaData()
    orders = sa.Table(
        "t_tenant_orders",
        metadata,
        sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault()),
        sa.Column("number", FormattedOrderNumber(key="tenant_numbers", sequence="t_tenant_seq")),
    )
    codec = OrderNumberCodec("tenant_numbers")
    try:
        for tenant, count in (("t_a", 3), ("t_b", 2)):
            tenant_engine = engine.execution_options(schema_translate_map={None: tenant})
            metadata.create_all(tenant_engine)
            with tenant_engine.begin() as conn:
                conn.execute(orders.insert(), [{}] * count)
                numbers = conn.execute(sa.select(orders.c.number)).scalars().all()
            assert sorted(map(codec.decode, numbers)) == list(range(1, count + 1))
        with engine.connect() as conn:
            inspector = sa.inspect(conn)
            assert inspector.get_table_names() == []  # nothing in the main database
            for tenant in ("t_a", "t_b"):
                assert set(inspector.get_table_names(schema=tenant)) == {
                    "t_tenant_orders",
                    "sqla_ids_counters",
                }
    finally:
        default_keyring.forget("tenant_numbers")
        engine.dispose()


@pytest.mark.parametrize("serial", [False, True], ids=["plain", "serial"])
def test_alembic_creates_the_function_where_the_tables_are(
    two_schemas: tuple[Engine, str, str], serial: bool
) -> None:
    """``op.create_uuid7_function(schema=...)``: in a migration, the function goes
    to another schema (MariaDB: database) too -- there, on MariaDB, the triggers
    of that database's tables find it."""
    engine, first, second = two_schemas
    with engine.begin() as conn:
        op = Operations(MigrationContext.configure(conn))
        op.create_uuid7_function(serial, schema=second)
        orders = op.create_table(
            "t_ops_orders",
            sa.Column("id", UUIDv7(), primary_key=True, server_default=UUIDv7ServerDefault(serial)),
            sa.Column("n", sa.Integer),
            schema=second,
        )
        assert orders is not None
        conn.execute(orders.insert(), [{"n": 1}, {"n": 2}])
        assert all(map(is_uuid7, conn.scalars(sa.select(orders.c.id))))
        assert _exists(conn, second, serial) and not _exists(conn, first, serial)
        op.drop_table("t_ops_orders", schema=second)
        op.drop_uuid7_function(serial, schema=second)
        assert not _exists(conn, second, serial)


def test_instances_starting_together_install_and_remove_it_side_by_side(
    two_schemas: tuple[Engine, str, str],
) -> None:
    """Eight sessions install the function at once (application instances starting
    together, each running ``metadata.create_all()``), half with the serial one, then
    remove it at once. PostgreSQL's ``CREATE OR REPLACE FUNCTION`` in two sessions at
    once fails ("tuple concurrently updated", a duplicate key in ``pg_proc``): 32 of
    40 calls did before the blocks took an advisory lock."""
    engine, first, _ = two_schemas
    errors: list[str] = []

    def together(work: Callable[[Connection, int], object]) -> None:
        barrier = threading.Barrier(8)

        def run(n: int) -> None:
            try:
                with engine.begin() as conn:
                    barrier.wait(timeout=60)
                    work(conn, n)
            except Exception as error:  # collected: the assertion names them all
                errors.append(f"{type(error).__name__}: {error}")

        threads = [threading.Thread(target=run, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    for _ in range(3):
        together(lambda conn, n: install_uuid7_function(conn, serial=n % 2 == 0))
        with engine.connect() as conn:
            assert _exists(conn, first) and _exists(conn, first, serial=True)
        together(lambda conn, n: remove_uuid7_function(conn))
        with engine.connect() as conn:
            assert not _exists(conn, first) and not _exists(conn, first, serial=True)
    assert errors == []
