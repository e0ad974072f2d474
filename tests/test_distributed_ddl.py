"""What sqla_ids emits for CockroachDB, YugabyteDB and Citus (docs/distributed.md).

None of these databases is available to the test suite: the DDL is compiled,
never run, with SQLAlchemy's ``postgresql`` dialect (what YugabyteDB and
Citus are spoken to with) and, when ``sqlalchemy-cockroachdb`` is installed,
its ``cockroachdb`` dialect (the package requires SQLAlchemy < 2.1 from its
2.0.4 on, so on SQLAlchemy 2.1 those tests are skipped).
"""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.schema import CreateTable

from sqla_ids import FormattedOrderNumber, UUID192Type, uuid7_pk
from sqla_ids.dialects import UnsupportedDialectError
from sqla_ids.identifiers import lowest_uuid7, month_partitions
from sqla_ids.types import month_partition_ddl, uuid7_function_create_sql


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[uuid.UUID] = uuid7_pk()
    customer: Mapped[str] = mapped_column(sa.String(100))


class Outbox(Base):
    __tablename__ = "outbox"
    id: Mapped[uuid.UUID] = uuid7_pk(server_default="serial")


class Receipt(Base):
    __tablename__ = "receipts"
    id: Mapped[uuid.UUID] = uuid7_pk()
    number: Mapped[str] = mapped_column(FormattedOrderNumber("shop", sequence="receipts_seq"))


class Routed(Base):
    __tablename__ = "routed"
    key = mapped_column(UUID192Type(), primary_key=True)


def _ddl(model: type[Any], dialect: Dialect) -> str:
    return str(CreateTable(model.__table__).compile(dialect=dialect))


def _cockroach() -> Dialect:
    base = pytest.importorskip("sqlalchemy_cockroachdb.base")
    dialect: Dialect = base.CockroachDBDialect()
    return dialect


def test_client_made_keys_need_nothing_on_the_cluster() -> None:
    ddl = _ddl(Order, postgresql.dialect())
    assert "id UUID NOT NULL" in ddl and "PRIMARY KEY (id)" in ddl
    assert "DEFAULT" not in ddl  # no function, sequence or trigger to install


def test_client_made_keys_compile_with_the_cockroachdb_dialect() -> None:
    ddl = _ddl(Order, _cockroach())
    assert "id UUID NOT NULL" in ddl and "PRIMARY KEY (id)" in ddl and "DEFAULT" not in ddl


def test_server_made_keys_emit_postgresql_functions() -> None:
    assert "DEFAULT sqla_ids_uuid7_serial()" in _ddl(Outbox, postgresql.dialect())
    (function,) = uuid7_function_create_sql("postgresql")
    # A DO block and set_config: PostgreSQL's dialect of PL/pgSQL, never run elsewhere.
    assert function.startswith("DO $do$") and "set_config" in function
    serial = uuid7_function_create_sql("postgresql", serial=True)
    assert any("CREATE SEQUENCE" in s and "CACHE 1" in s for s in serial)


def test_order_numbers_and_uuid192_on_postgresql() -> None:
    receipt = _ddl(Receipt, postgresql.dialect())
    assert "number VARCHAR(26) NOT NULL" in receipt and "CHECK (number ~ '^(" in receipt
    assert "key BYTEA NOT NULL" in _ddl(Routed, postgresql.dialect())


@pytest.mark.parametrize("model", [Outbox, Receipt, Routed], ids=lambda m: m.__name__)
def test_registry_types_are_refused_by_name_on_the_cockroachdb_dialect(model: type[Any]) -> None:
    # Our database registry has no CockroachDB entry: a clear error, not wrong SQL.
    with pytest.raises(UnsupportedDialectError, match="'cockroachdb' is not supported"):
        _ddl(model, _cockroach())


def test_month_partitions_are_postgresql_declarative_partitions() -> None:
    (statement,) = month_partition_ddl("events", date(2026, 1, 1), 1)
    (month,) = month_partitions(date(2026, 1, 1), 1)
    assert month.low == lowest_uuid7(datetime(2026, 1, 1, tzinfo=UTC))
    assert statement == (
        'CREATE TABLE IF NOT EXISTS "events_p2026_01" PARTITION OF "events" '
        f"FOR VALUES FROM ('{month.low}') TO ('{month.high}')"
    )


def test_a_shard_prefix_is_plain_composite_key_ddl() -> None:
    # docs/distributed.md's recipe: YugabyteDB reads PRIMARY KEY (shard, id) as
    # ((shard) HASH, id ASC); CockroachDB and PostgreSQL as a composite key.
    table = sa.Table(
        "readings",
        sa.MetaData(),
        sa.Column("id", uuid7_pk().column.type, nullable=False),
        sa.Column("shard", sa.SmallInteger, nullable=False),
        sa.PrimaryKeyConstraint("shard", "id"),
    )
    ddl = str(CreateTable(table).compile(dialect=postgresql.dialect()))
    assert "PRIMARY KEY (shard, id)" in ddl
