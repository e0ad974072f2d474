"""``sqla-ids demo``: a one-minute tour on a SQLite file (or ``--url``)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa

from sqla_ids.errors import CommandError
from sqla_ids.identifiers import (
    UUIDv7Generator,
    to_base32,
    uuid7,
    uuid7_batch,
    uuid7_bounds,
    uuid7_datetime,
)

DEFAULT_URL = "sqlite:///sqla_ids_demo.sqlite3"
DEMO_TABLE = "sqla_ids_demo_events"


def register(subparsers: Any) -> None:
    """Add ``demo`` to the command line."""
    demo = subparsers.add_parser(
        "demo",
        help="a short tour: generate, inspect and query UUIDv7 keys",
        description="Create a small table keyed by UUIDv7, then query it by time range.",
    )
    demo.add_argument("--url", default=DEFAULT_URL, help=f"database URL (default {DEFAULT_URL})")
    demo.add_argument("--rows", type=int, default=1000, help="rows to insert (default 1000)")
    demo.set_defaults(handler=run_demo)


def _section(title: str) -> None:
    print(f"\n== {title}")


def run_demo(args: argparse.Namespace) -> int:
    """Run the tour and print what happens at each step."""
    if not 10 <= args.rows <= 1_000_000:
        raise CommandError(f"--rows must be between 10 and 1,000,000, got {args.rows}")
    _section("1. generate: monotonic UUIDv7 values")
    for value in uuid7_batch(3):
        print(f"  {value}  base32 {to_base32(value)}  created {uuid7_datetime(value):%H:%M:%S.%f}")

    _section("2. inspect: the timestamp is in the key")
    value = uuid7()
    print(f"  {value} -> {uuid7_datetime(value).isoformat(timespec='milliseconds')}")

    _section(f"3. a table keyed by UUIDv7 ({args.url})")
    try:
        engine = sa.create_engine(args.url)
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
    except (sa.exc.ArgumentError, sa.exc.OperationalError, ImportError) as error:
        raise CommandError(f"cannot open {args.url}: {error}") from None
    metadata = sa.MetaData()
    events = sa.Table(
        DEMO_TABLE,
        metadata,
        sa.Column("id", sa.Uuid, primary_key=True),
        sa.Column("day", sa.Integer, nullable=False),
    )
    now = datetime.now(UTC)
    per_day = args.rows // 10
    with engine.begin() as conn:
        existed = sa.inspect(conn).has_table(DEMO_TABLE)
        metadata.drop_all(conn)
        metadata.create_all(conn)
        print(f"  {'replaced the' if existed else 'created'} table {DEMO_TABLE}")
        # Ten days of history: a generator shifted back in time per day.
        for day in range(10, 0, -1):
            generator = UUIDv7Generator(shift=-timedelta(days=day))
            rows = [{"id": key, "day": day} for key in generator.batch(per_day)]
            conn.execute(events.insert(), rows)
        total = conn.execute(sa.select(sa.func.count()).select_from(events)).scalar_one()
        print(f"  inserted {total} rows spread over the last 10 days")

        _section("4. rows created 3 to 5 days ago, found through the primary key")
        low, high = uuid7_bounds(
            now - timedelta(days=5, hours=1), now - timedelta(days=3, hours=-1)
        )
        query = (
            sa.select(events.c.day, sa.func.count(), sa.func.min(events.c.id))
            .where(events.c.id.between(low, high))
            .group_by(events.c.day)
            .order_by(events.c.day.desc())
        )
        print(f"  WHERE id BETWEEN {low} AND {high}")
        for day, count, first in conn.execute(query):
            created = uuid7_datetime(first)
            print(f"  {day} days ago: {count} rows, first {first} ({created:%Y-%m-%d %H:%M})")
    engine.dispose()
    print("\nDone. Run `sqla-ids inspect <uuid>` on any id above.")
    return 0
