"""What sqla_ids emits for CockroachDB, YugabyteDB and Citus (docs/distributed.md).

No CockroachDB, YugabyteDB or Citus server is available to the test suite:
the DDL is compiled with their own SQLAlchemy dialects (``sqlalchemy-cockroachdb``,
``sqlalchemy-yugabytedb``, the ``distributed`` extra: without them those
tests skip, and fail under ``SQLA_IDS_REQUIRE_DIALECTS`` as .ci/run sets) and with ``postgresql``
(what Citus is spoken to with). What YugabyteDB gets is PostgreSQL's SQL
(YSQL is PostgreSQL's query layer), so that SQL also runs on the real
PostgreSQL server here. What the key migration does on a schema without
foreign keys (TiDB before 6.6, Vitess/PlanetScale) runs on the real MariaDB
and PostgreSQL servers.
"""

from __future__ import annotations

import os
import uuid
from datetime import UTC, date, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.schema import CreateTable

from sqla_ids import FormattedOrderNumber, UUID192Type, migrate_pk_to_uuid7, uuid7_pk
from sqla_ids.dialects import (
    CockroachDB,
    PostgreSQL,
    UnsupportedDialectError,
    YugabyteDB,
    for_dialect,
    registered,
)
from sqla_ids.identifiers import lowest_uuid7, month_partitions
from sqla_ids.order_numbers import register_key
from sqla_ids.types import (
    install_uuid7_function,
    month_partition_ddl,
    uuid7_function_create_sql,
)

register_key("shop", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[uuid.UUID] = uuid7_pk()
    customer: Mapped[str] = mapped_column(sa.String(100))


class Event(Base):
    __tablename__ = "events"
    id: Mapped[uuid.UUID] = uuid7_pk(server_default=True)


class Outbox(Base):
    __tablename__ = "outbox"
    id: Mapped[uuid.UUID] = uuid7_pk(server_default="serial")


class Receipt(Base):
    __tablename__ = "receipts"
    id: Mapped[uuid.UUID] = uuid7_pk()
    number: Mapped[str] = mapped_column(FormattedOrderNumber("shop", sequence="receipts_seq"))


class Ticket(Base):
    """An order number the application assigns (no sequence): CockroachDB's way."""

    __tablename__ = "tickets"
    id: Mapped[uuid.UUID] = uuid7_pk()
    number: Mapped[str] = mapped_column(FormattedOrderNumber("shop"))


class Routed(Base):
    __tablename__ = "routed"
    key = mapped_column(UUID192Type(), primary_key=True)


def _cockroachdb() -> Dialect:
    from sqlalchemy_cockroachdb.base import CockroachDBDialect

    return CockroachDBDialect()


def _yugabytedb() -> Dialect:
    from sqlalchemy_yugabytedb.psycopg2 import YugabyteDBDialect_psycopg2

    return YugabyteDBDialect_psycopg2()


_VARIANTS = {"cockroachdb": _cockroachdb, "yugabytedb": _yugabytedb}


def _dialect(name: str) -> Dialect:
    """``postgresql``'s dialect for ``pg``, else the database's own dialect class
    from its package (the ``distributed`` extra: it builds psycopg2-yugabytedb
    from source, so the test extra leaves it out)."""
    if name == "pg":
        return postgresql.dialect()
    try:
        return _VARIANTS[name]()
    except ImportError as error:
        reason = (
            f"{name}'s SQLAlchemy dialect is not installed (pip install"
            f" 'sqla-ids[distributed]', needs pg_config and a C compiler): {error}"
        )
        if os.environ.get("SQLA_IDS_REQUIRE_DIALECTS", "") not in ("", "0", "false", "no"):
            pytest.fail(f"SQLA_IDS_REQUIRE_DIALECTS is set and {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture
def cockroach() -> Dialect:
    return _dialect("cockroachdb")


@pytest.fixture
def yugabyte() -> Dialect:
    return _dialect("yugabytedb")


def _ddl(model: type[Any], dialect: Dialect) -> str:
    return str(CreateTable(model.__table__).compile(dialect=dialect))


def _create_all_sql(dialect_name: str, *models: type[Any]) -> list[str]:
    """Every statement ``create_all`` sends for ``models`` (sequences, comments,
    tables), compiled by the dialect behind ``dialect_name://``, none executed."""
    sent: list[str] = []

    def record(sql: Any, *multiparams: Any, **params: Any) -> None:
        sent.append(str(sql.compile(dialect=engine.dialect)).strip())

    engine = sa.create_mock_engine(f"{dialect_name}://", record)
    Base.metadata.create_all(
        cast(Any, engine), tables=[m.__table__ for m in models], checkfirst=False
    )
    return sent


def _refused(pattern: str) -> Any:
    return pytest.raises(UnsupportedDialectError, match=pattern)


# --- the registry --------------------------------------------------------------------


def test_each_variant_has_its_database_class_inheriting_postgresql(
    cockroach: Dialect, yugabyte: Dialect
) -> None:
    assert type(for_dialect(cockroach)) is CockroachDB
    assert type(for_dialect(yugabyte)) is YugabyteDB
    assert issubclass(CockroachDB, PostgreSQL) and issubclass(YugabyteDB, PostgreSQL)
    assert {"cockroachdb", "yugabytedb"} <= set(registered())
    # Capabilities are documented attributes, as for every database.
    assert not CockroachDB.range_partitions and YugabyteDB.range_partitions
    assert CockroachDB.alter_table_add_check and YugabyteDB.alter_table_add_check


# --- keys ----------------------------------------------------------------------------------


# Ids without "postgresql": these compile only, they never reach the server.
@pytest.mark.parametrize("name", ["pg", "cockroachdb", "yugabytedb"])
def test_client_made_keys_need_nothing_on_the_cluster(name: str) -> None:
    ddl = _ddl(Order, _dialect(name))
    assert "id UUID NOT NULL" in ddl and "PRIMARY KEY (id)" in ddl
    assert "DEFAULT" not in ddl  # no function, sequence or trigger to install


def test_server_made_keys_on_yugabytedb_are_postgresql_functions(yugabyte: Dialect) -> None:
    assert "id UUID DEFAULT sqla_ids_uuid7() NOT NULL" in _ddl(Event, yugabyte)
    (function,) = uuid7_function_create_sql(yugabyte)
    # PostgreSQL's, without the advisory lock (recent in YugabyteDB, an error before).
    (postgresql,) = uuid7_function_create_sql("postgresql")
    lock = "  PERFORM pg_advisory_xact_lock(1936813153, hashtext(s));\n"
    assert lock in postgresql and function == postgresql.replace(lock, "")
    # A DO block, set_config and gen_random_uuid(): PostgreSQL's PL/pgSQL, which YSQL runs.
    assert function.startswith("DO $do$") and "set_config" in function
    assert "gen_random_uuid()" in function


def test_server_made_keys_are_refused_by_name_on_cockroachdb(cockroach: Dialect) -> None:
    with _refused("server-side UUIDv7 function is not supported on CockroachDB .*uuid7_pk"):
        _ddl(Event, cockroach)
    with _refused("server-side UUIDv7 function is not supported on CockroachDB"):
        uuid7_function_create_sql(cockroach)


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("cockroachdb", "needs a server-side UUIDv7 function, which CockroachDB lacks"),
        ("yugabytedb", "caches sequence values per connection .*ysql_sequence_cache_minval"),
    ],
)
def test_serial_keys_are_refused_by_name_before_any_change(name: str, pattern: str) -> None:
    dialect = _dialect(name)
    executed: list[Any] = []
    connection = SimpleNamespace(dialect=dialect, exec_driver_sql=executed.append)
    with _refused(pattern):
        install_uuid7_function(cast(Connection, connection), serial=True)
    assert executed == []
    with _refused("UUIDv7 function is not supported on"):
        uuid7_function_create_sql(dialect, serial=True)


# --- order numbers ---------------------------------------------------------------------


def test_order_numbers_on_yugabytedb_are_postgresql_sequences_and_checks(
    yugabyte: Dialect,
) -> None:
    sent = _create_all_sql("yugabytedb", Receipt)
    assert sent[0] == "CREATE SEQUENCE IF NOT EXISTS receipts_seq START WITH 1"
    # The tables it numbers, recorded in the sequence's comment (offline form).
    assert sent[1].startswith("DO $") and "COMMENT ON SEQUENCE receipts_seq IS" in sent[1]
    assert "number VARCHAR(26) NOT NULL" in sent[2] and "CHECK (number ~ '^(" in sent[2]
    assert sent[1:] == _create_all_sql("postgresql", Receipt)[1:]


def test_order_numbers_on_cockroachdb_keep_the_check_and_refuse_the_sequence(
    cockroach: Dialect,
) -> None:
    ddl = _ddl(Ticket, cockroach)
    assert "number VARCHAR(26) NOT NULL" in ddl and "CHECK (number ~ '^(" in ddl
    assert _create_all_sql("cockroachdb", Ticket) == [ddl.strip()]
    with _refused("order-number sequences is not supported on CockroachDB .*COMMENT ON SEQ"):
        _create_all_sql("cockroachdb", Receipt)


# --- other types and partitions ------------------------------------------------------------


# Ids without "postgresql": these compile only, they never reach the server.
@pytest.mark.parametrize("name", ["pg", "cockroachdb", "yugabytedb"])
def test_uuid192_is_bytes(name: str) -> None:
    assert "key BYTEA NOT NULL" in _ddl(Routed, _dialect(name))


def test_month_partitions_are_postgresql_declarative_partitions(
    cockroach: Dialect, yugabyte: Dialect
) -> None:
    (statement,) = month_partition_ddl("events", date(2026, 1, 1), 1)
    (month,) = month_partitions(date(2026, 1, 1), 1)
    assert month.low == lowest_uuid7(datetime(2026, 1, 1, tzinfo=UTC))
    assert statement == (
        'CREATE TABLE IF NOT EXISTS "events_p2026_01" PARTITION OF "events" '
        f"FOR VALUES FROM ('{month.low}') TO ('{month.high}')"
    )
    yugabyte_db = for_dialect(yugabyte)
    made = yugabyte_db.uuid7_month_partition_sql(
        "events", None, "events_p2026_01", month.low, month.high
    )
    assert made == statement
    with _refused("UUIDv7 range partitions is not supported on CockroachDB"):
        for_dialect(cockroach).uuid7_month_partition_sql("events", None, "p", month.low, month.high)


# --- what is refused, by name ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "pattern"),
    [
        ("cockroachdb", "CockroachDB .*autocommit_before_ddl"),
        ("yugabytedb", "YugabyteDB .*ysql_yb_ddl_transaction_block_enabled"),
    ],
)
def test_the_key_migration_is_refused_by_name_before_touching_the_database(
    name: str, pattern: str
) -> None:
    dialect = _dialect(name)
    # The refusal comes before the first statement: an object with only a
    # dialect stands for the connection (no server of either kind here).
    connection = cast(Connection, SimpleNamespace(dialect=dialect))
    with _refused(f"migrating keys to UUIDv7 is not supported on {pattern}"):
        migrate_pk_to_uuid7(connection, "orders")


@pytest.mark.parametrize("name", ["cockroachdb", "yugabytedb"])
def test_the_insert_benchmark_is_refused_by_name(name: str) -> None:
    dialect = _dialect(name)
    with _refused("insert benchmark is not supported on .*LSM"):
        for_dialect(dialect).bench()


# --- YugabyteDB's SQL is PostgreSQL's: it runs on the PostgreSQL server here ----------


def test_yugabytedb_ddl_runs_on_postgresql(
    postgresql_private_engine: Engine, yugabyte: Dialect
) -> None:
    """Sequence, comment, CHECK and the UUIDv7 function as compiled for YugabyteDB,
    executed on PostgreSQL (YSQL's parser and PL/pgSQL are PostgreSQL's)."""
    statements = [
        *uuid7_function_create_sql(yugabyte),
        *_create_all_sql("yugabytedb", Receipt, Event),
    ]
    with postgresql_private_engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement)
        key = conn.execute(sa.text("INSERT INTO events DEFAULT VALUES RETURNING id")).scalar_one()
        comment = conn.execute(sa.text("SELECT obj_description('receipts_seq'::regclass)")).scalar()
        with pytest.raises(sa.exc.IntegrityError), conn.begin_nested():  # the CHECK holds
            conn.execute(
                sa.text("INSERT INTO receipts (id, number) VALUES (:i, '12-3')"),
                {"i": uuid.uuid4()},
            )
    assert uuid.UUID(str(key)).version == 7
    assert comment is not None and "receipts" in comment


# --- no foreign keys (TiDB before 6.6, Vitess/PlanetScale) ----------------------------


def _shop_without_foreign_keys(conn: Connection) -> None:
    names = conn.dialect.identifier_preparer
    if conn.dialect.name == "postgresql":
        key = "BIGINT GENERATED BY DEFAULT AS IDENTITY"
    else:
        key = "BIGINT AUTO_INCREMENT"
    conn.exec_driver_sql(f"CREATE TABLE {names.quote('shop orders')} (id {key} PRIMARY KEY)")
    # Both hold order keys; neither declares it (no FOREIGN KEY anywhere).
    conn.exec_driver_sql("CREATE TABLE line (id BIGINT PRIMARY KEY, order_id BIGINT NOT NULL)")
    conn.exec_driver_sql("CREATE TABLE audit (id BIGINT PRIMARY KEY, order_ref BIGINT)")
    for n in range(1, 6):
        conn.exec_driver_sql(f"INSERT INTO {names.quote('shop orders')} (id) VALUES ({n})")
        conn.exec_driver_sql(f"INSERT INTO line (id, order_id) VALUES ({n}, {n})")
        conn.exec_driver_sql(f"INSERT INTO audit (id, order_ref) VALUES ({n}, {6 - n})")


@pytest.mark.parametrize("engine_fixture", ["postgresql_private_engine", "mariadb_private_engine"])
def test_without_foreign_keys_only_the_named_references_are_converted(
    engine_fixture: str, request: pytest.FixtureRequest
) -> None:
    """docs/distributed.md: with no foreign key to find, the migration converts the
    columns named in ``extra_references``; the others keep the old integers,
    which still match ``id_old``."""
    engine: Engine = request.getfixturevalue(engine_fixture)
    with engine.begin() as conn:
        _shop_without_foreign_keys(conn)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop orders", extra_references=[("line", "order_id")])
        conn.commit()
    orders = sa.table("shop orders", sa.column("id"), sa.column("id_old"))
    line = sa.table("line", sa.column("id"), sa.column("order_id"))
    audit = sa.table("audit", sa.column("id"), sa.column("order_ref"))
    with engine.connect() as conn:
        by_key = dict(conn.execute(sa.select(orders.c.id, orders.c.id_old)).all())
        lines = dict(conn.execute(sa.select(line.c.id, line.c.order_id)).all())
        audits = dict(conn.execute(sa.select(audit.c.id, audit.c.order_ref)).all())
        columns = {c["name"]: c["type"] for c in sa.inspect(conn).get_columns("audit")}
    assert {by_key[key] for key in lines.values()} == set(range(1, 6))  # converted, same rows
    assert all(by_key[lines[n]] == n for n in range(1, 6))
    assert audits == {n: 6 - n for n in range(1, 6)}  # untouched: old integers
    assert set(audits.values()) <= set(by_key.values())  # which match id_old
    assert isinstance(columns["order_ref"], sa.BigInteger)
