"""Migrating a bigint key to UUIDv7 on PostgreSQL: sqla_ids vs hand-written SQL.

A parent table (default 1M rows) with two children (default 2M rows each, FK
and index on the reference) is migrated twice on identical fresh data:

* ``sqla_ids``: ``migrate_pk_to_uuid7`` -- mapping table, batched fills, checks,
  old keys kept, UUIDs ordered like the old keys;
* ``hand-written SQL``: the one-shot script people write -- add columns,
  ``UPDATE`` everything with an SQL UUIDv7 expression, swap, recreate keys --
  in one transaction, without checks, mapping table or order guarantee.

Reported: total time, rows/s (parent + children rows), peak lock time (how
long ``ACCESS EXCLUSIVE`` on the parent is held: from the first
``ALTER TABLE`` to the commit) and the ratio to the baseline. Run::

    python benchmarks/pk_migration.py             # 1M parents, 2 x 2M children
    python benchmarks/pk_migration.py --quick     # 20k / 40k, a few seconds
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sqla_ids.migration import migrate_pk_to_uuid7
from sqla_ids.tools.report import print_table

DEFAULT_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

# An SQL UUIDv7 from created_at: 48-bit ms timestamp over a random v4, version 7.
SQL_UUID7 = (
    "encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) placing"
    " substring(int8send(floor(extract(epoch FROM created_at) * 1000)::bigint) FROM 3)"
    " FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid"
)


def load(conn: Connection, parents: int, children: int) -> None:
    """Create and fill ``parent``, ``child_a`` and ``child_b`` (server-side, fast)."""
    conn.exec_driver_sql(
        "CREATE TABLE parent (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL,"
        " payload text)"
    )
    conn.exec_driver_sql(
        "INSERT INTO parent (created_at, payload) SELECT"
        " timestamptz '2024-01-01' + g * interval '1 second', md5(g::text)"
        f" FROM generate_series(1, {parents}) g"
    )
    for child in ("child_a", "child_b"):
        conn.exec_driver_sql(
            f"CREATE TABLE {child} (id bigserial PRIMARY KEY, parent_id bigint NOT NULL"
            f" CONSTRAINT {child}_parent_fk REFERENCES parent (id) ON DELETE CASCADE,"
            " amount int)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {child} (parent_id, amount)"
            f" SELECT (g::bigint * 7919) %% {parents} + 1, g %% 100"
            f" FROM generate_series(1, {children}) g"
        )
        conn.exec_driver_sql(f"CREATE INDEX {child}_parent_ix ON {child} (parent_id)")
    conn.exec_driver_sql("ANALYZE")


def hand_written(conn: Connection, batch_size: int) -> None:
    """The one-shot migration script a user would write by hand (one transaction)."""
    statements = [
        "ALTER TABLE parent ADD COLUMN new_id uuid",
        f"UPDATE parent SET new_id = {SQL_UUID7}",
    ]
    for child in ("child_a", "child_b"):
        statements += [
            f"ALTER TABLE {child} ADD COLUMN new_parent_id uuid",
            f"UPDATE {child} c SET new_parent_id = p.new_id FROM parent p WHERE p.id = c.parent_id",
            f"ALTER TABLE {child} DROP CONSTRAINT {child}_parent_fk",
        ]
    statements += [
        "ALTER TABLE parent DROP CONSTRAINT parent_pkey",
        "ALTER TABLE parent RENAME COLUMN id TO id_old",
        "ALTER TABLE parent ALTER COLUMN id_old DROP DEFAULT",
        "ALTER TABLE parent RENAME COLUMN new_id TO id",
        "ALTER TABLE parent ADD PRIMARY KEY (id)",
    ]
    for child in ("child_a", "child_b"):
        statements += [
            f"ALTER TABLE {child} DROP COLUMN parent_id",
            f"ALTER TABLE {child} RENAME COLUMN new_parent_id TO parent_id",
            f"ALTER TABLE {child} ALTER COLUMN parent_id SET NOT NULL",
            f"CREATE INDEX {child}_parent_ix ON {child} (parent_id)",
            f"ALTER TABLE {child} ADD CONSTRAINT {child}_parent_fk FOREIGN KEY (parent_id)"
            " REFERENCES parent (id) ON DELETE CASCADE",
        ]
    for statement in statements:
        conn.exec_driver_sql(statement)


def with_sqla_ids(conn: Connection, batch_size: int) -> None:
    """The plugin's operation, timestamps from ``created_at``."""
    migrate_pk_to_uuid7(conn, "parent", timestamp_column="created_at", batch_size=batch_size)


def measure(
    engine: Engine,
    schema: str,
    migrate: Callable[[Connection, int], None],
    parents: int,
    children: int,
    batch_size: int,
) -> tuple[float, float]:
    """(total seconds, seconds ACCESS EXCLUSIVE was held) for one migration on fresh data."""
    with engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        conn.exec_driver_sql(f'SET search_path TO "{schema}"')
        load(conn, parents, children)
    first_alter: list[float] = []

    def on_execute(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not first_alter and statement.lstrip().upper().startswith("ALTER TABLE"):
            first_alter.append(time.perf_counter())

    sa.event.listen(engine, "before_cursor_execute", on_execute)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql(f'SET search_path TO "{schema}"')
            conn.commit()
            started = time.perf_counter()
            with conn.begin():
                migrate(conn, batch_size)
            ended = time.perf_counter()
    finally:
        sa.event.remove(engine, "before_cursor_execute", on_execute)
    return ended - started, ended - (first_alter[0] if first_alter else started)


def main(argv: list[str] | None = None) -> int:
    """Run both migrations and print the comparison table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--url", default=DEFAULT_URL, help=f"PostgreSQL URL (default {DEFAULT_URL})"
    )
    parser.add_argument("--parents", type=int, help="parent rows (1M; --quick: 20k)")
    parser.add_argument("--children", type=int, help="rows per child (2M; --quick: 40k)")
    parser.add_argument("--batch-size", type=int, default=50_000, help="sqla_ids batch (50k)")
    parser.add_argument("--quick", action="store_true", help="20k parents, 40k per child")
    args = parser.parse_args(argv)
    if args.parents is None:
        args.parents = 20_000 if args.quick else 1_000_000
    if args.children is None:
        args.children = 2 * args.parents
    engine = sa.create_engine(args.url)
    if engine.dialect.name != "postgresql":
        parser.error("the benchmark's baseline is PostgreSQL SQL: give a PostgreSQL --url")
    schema = f"bench_pk_{secrets.token_hex(3)}"
    rows = args.parents + 2 * args.children
    results = {}
    try:
        for name, migrate in (("hand-written SQL", hand_written), ("sqla_ids", with_sqla_ids)):
            results[name] = measure(
                engine, schema, migrate, args.parents, args.children, args.batch_size
            )
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()
    base_total, base_lock = results["hand-written SQL"]
    print_table(
        f"PK migration to UUIDv7: {args.parents:,} parents + 2 x {args.children:,} children",
        ["approach", "total s", "rows/s", "peak lock s", "time ratio", "lock ratio"],
        [
            [name, total, rows / total, lock, total / base_total, lock / base_lock]
            for name, (total, lock) in results.items()
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
