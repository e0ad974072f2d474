"""On each real database, UUIDv7 keys sort in generation order and time bounds select rows.

Uses SQLAlchemy's plain ``Uuid`` type (native ``uuid`` on PostgreSQL,
``CHAR(32)``/``UUID`` on MariaDB, ``CHAR(32)`` on SQLite) and a 16-byte
binary column, so the pure identifier layer is checked against each server's
own comparison rules.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids import UUIDv7Generator, uuid7_batch, uuid7_bounds
from sqla_ids.identifiers import to_unix_ms


def test_server_order_equals_generation_order(engine: Engine, metadata: sa.MetaData) -> None:
    table = sa.Table(
        "ordered_keys",
        metadata,
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("raw", sa.LargeBinary(16), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
    )
    metadata.create_all(engine)
    values = uuid7_batch(3000)
    rows = [{"id": v, "raw": v.bytes, "position": i} for i, v in enumerate(reversed(values))]
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
        by_id = conn.execute(sa.select(table.c.id).order_by(table.c.id)).scalars().all()
        by_raw = conn.execute(sa.select(table.c.id).order_by(table.c.raw)).scalars().all()
    assert by_id == values
    assert by_raw == values


def test_time_range_bounds_select_through_the_key(engine: Engine, metadata: sa.MetaData) -> None:
    table = sa.Table("events", metadata, sa.Column("id", sa.Uuid, primary_key=True))
    metadata.create_all(engine)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    rows = []
    for day in range(20):
        moment = to_unix_ms(start + timedelta(days=day))
        generator = UUIDv7Generator(clock=lambda ms=moment: ms)
        rows += [{"id": v} for v in generator.batch(25)]
    low, high = uuid7_bounds(start + timedelta(days=5), start + timedelta(days=9, hours=23))
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
        count = conn.execute(
            sa.select(sa.func.count()).where(table.c.id.between(low, high))
        ).scalar_one()
    assert count == 5 * 25
