"""UUID192 column type, its leading-UUID SQL expression, partition keys, PG month partitions."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, date, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids import UUID192Type, UUIDv7
from sqla_ids.dialects import UnsupportedDialectError
from sqla_ids.dialects.sql import execute_sql, quoter
from sqla_ids.identifiers import UUID192, partition_bucket, uuid7_from_timestamp
from sqla_ids.types import (
    create_month_partitions,
    month_partition_ddl,
    uuid7_partition_key,
    uuid192_uuid,
)


def test_uuid192_round_trip_and_join(engine: Engine, metadata: sa.MetaData) -> None:
    orders = sa.Table("t192_orders", metadata, sa.Column("id", UUIDv7(), primary_key=True))
    refs = sa.Table(
        "t192_refs",
        metadata,
        sa.Column("key", UUID192Type(), primary_key=True),
        sa.Column("note", sa.String(10)),
    )
    metadata.create_all(engine)
    order_ids = [uuid7_from_timestamp(t) for t in (1_000, 2_000, 3_000)]
    keys = [UUID192(order_ids[0], 42), UUID192(order_ids[1]), UUID192(order_ids[1], 2**64 - 1)]
    with engine.begin() as conn:
        conn.execute(orders.insert(), [{"id": i} for i in order_ids])
        conn.execute(refs.insert(), [{"key": k, "note": str(n)} for n, k in enumerate(keys)])
        stored = conn.execute(sa.select(refs.c.key).order_by(refs.c.key)).scalars().all()
        leading = (
            conn.execute(sa.select(uuid192_uuid(refs.c.key)).order_by(refs.c.note)).scalars().all()
        )
        joined = conn.execute(
            sa.select(orders.c.id, refs.c.note)
            .join(refs, refs.c.key.uuid() == orders.c.id)
            .order_by(refs.c.note)
        ).all()
        by_text = conn.execute(sa.select(refs.c.note).where(refs.c.key == str(keys[2]))).scalar()
    assert stored == sorted(keys)
    assert leading == [k.uuid for k in keys]
    assert [(row.id, row.note) for row in joined] == [(k.uuid, str(n)) for n, k in enumerate(keys)]
    assert by_text == "2"


def test_uuid192_rejects_other_values() -> None:
    type_ = UUID192Type()
    with pytest.raises(TypeError, match="UUID192"):
        type_.process_bind_param(uuid.uuid4(), sa.create_engine("sqlite://").dialect)
    assert repr(type_) == "UUID192Type()"


@pytest.mark.parametrize("bucket_bits", [0, 20, 31])
def test_partition_key_matches_python(
    engine: Engine, metadata: sa.MetaData, bucket_bits: int
) -> None:
    table = sa.Table("t_part_key", metadata, sa.Column("id", UUIDv7(), primary_key=True))
    metadata.create_all(engine)
    values = [
        uuid7_from_timestamp(t) for t in (0, 1, 2**31 - 1, 2**31, 1_750_000_000_123, 2**48 - 1)
    ]
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": v} for v in values])
        rows = conn.execute(
            sa.select(table.c.id, uuid7_partition_key(table.c.id, bucket_bits))
        ).all()
    assert {row[0]: int(row[1]) for row in rows} == {
        v: partition_bucket(v, bucket_bits) for v in values
    }


def test_partition_key_rejects_bad_width() -> None:
    with pytest.raises(ValueError, match="bucket_bits"):
        uuid7_partition_key(sa.column("id"), 48)


@pytest.mark.parametrize(
    "table, schema",
    [("t_events", None), ("t ev'\"%s :x ü", "sqla_ids_t sch%(y)s :s ü")],
    ids=["plain", "hostile"],
)
def test_month_partitions_on_postgresql(
    postgresql_engine: Engine, table: str, schema: str | None
) -> None:
    # Names are data: a % (a placeholder to psycopg) and :x (a parameter to text()).
    q = quoter(postgresql_engine.dialect)
    if schema is not None:
        schema = f"{schema} {secrets.token_hex(3)}"  # the run's own
    target = q(table) if schema is None else f"{q(schema)}.{q(table)}"
    with postgresql_engine.begin() as conn:
        if schema is not None:
            execute_sql(conn, f"CREATE SCHEMA {q(schema)}")
        execute_sql(
            conn, f"CREATE TABLE {target} (id uuid PRIMARY KEY, n int) PARTITION BY RANGE (id)"
        )
        try:
            statements = create_month_partitions(conn, table, date(2025, 11, 1), 3, schema=schema)
            assert len(statements) == 3
            create_month_partitions(conn, table, date(2025, 11, 1), 3, schema=schema)  # idempotent
            times = [
                datetime(2025, 11, 1, tzinfo=UTC),
                datetime(2025, 11, 30, 23, 59, 59, 999000, tzinfo=UTC),
                datetime(2025, 12, 1, tzinfo=UTC),
                datetime(2026, 1, 31, 12, tzinfo=UTC),
            ]
            rows = sa.table(
                table,
                sa.column("id", sa.Uuid()),
                sa.column("n"),
                sa.column("tableoid"),
                schema=schema,
            )
            conn.execute(
                rows.insert(),
                [{"id": uuid7_from_timestamp(t), "n": n} for n, t in enumerate(times)],
            )
            pg_class = sa.table("pg_class", sa.column("oid"), sa.column("relname"))
            placed = conn.execute(
                sa.select(rows.c.n, pg_class.c.relname)
                .join_from(rows, pg_class, pg_class.c.oid == rows.c.tableoid)
                .order_by(rows.c.n)
            ).all()
            assert [p for _, p in placed] == [
                f"{table}_p2025_11",
                f"{table}_p2025_11",
                f"{table}_p2025_12",
                f"{table}_p2026_01",
            ]
            outside = uuid7_from_timestamp(datetime(2026, 2, 1, tzinfo=UTC))
            with pytest.raises(sa.exc.DBAPIError, match="no partition"), conn.begin_nested():
                conn.execute(rows.insert(), {"id": outside, "n": 9})
        finally:
            execute_sql(conn, f"DROP TABLE {target}")
            if schema is not None:
                execute_sql(conn, f"DROP SCHEMA {q(schema)}")


def test_month_partitions_need_postgresql(sqlite_engine: Engine) -> None:
    assert "PARTITION OF" in month_partition_ddl("t", date(2025, 1, 1), 1)[0]
    with sqlite_engine.connect() as conn, pytest.raises(UnsupportedDialectError):
        create_month_partitions(conn, "t", date(2025, 1, 1), 1)
