"""Primary-key choices under insert load: bigint vs UUIDv4 vs UUIDv7 (ours and others).

For each database (PostgreSQL, MariaDB, SQLite) and each key kind, insert N
rows into a fresh two-column table and report rows/s, the primary-key index
size and, on PostgreSQL, ``pgstatindex`` leaf density and fragmentation and
the WAL bytes written -- all as ratios to ``bigint`` measured in the same run.

Key kinds: ``bigint`` identity/auto-increment; UUIDv4 (client); UUIDv7 from
sqla_ids (client, keys generated beforehand); UUIDv7 from our server
function ``sqla_ids_uuid7()``; PostgreSQL's ``gen_random_uuid()``; uuid6's
and uuid_utils' UUIDv7; a UUIDv7 stored as text. Methods: SQLAlchemy Core
bulk insert (10,000-row executemany chunks), psycopg ``COPY`` and, with
``--methods orm``, the ORM: ``Session.add_all`` + ``commit`` of objects of a
model declaring the key as an application would (``uuid7_pk()``,
``uuid7_pk(server_default="serial")``, an identity ``bigint`` …), keys made at
flush.

Two more PostgreSQL tables: leaf density when R rows share each millisecond
(ours vs a UUIDv7 whose bits after the millisecond are random), and W
processes inserting into one table at once. The measuring lives in
``sqla_ids.tools.insert_benchmark`` (also behind ``sqla-ids bench``). Run::

    python benchmarks/insert_keys.py                       # 1M rows on PostgreSQL
    python benchmarks/insert_keys.py --rows 200000 --dialects postgresql,mariadb,sqlite
    python benchmarks/insert_keys.py --quick               # a few seconds
    python benchmarks/insert_keys.py --methods orm --rows 200000 --dialects postgresql \
        --skip-rates --skip-concurrent --repeat 3           # ORM inserts only
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from sqla_ids.dialects import for_dialect
from sqla_ids.tools.insert_benchmark import (
    concurrent_table,
    insert_table,
    rate_table,
    scratch_area,
)
from sqla_ids.tools.report import print_table

DEFAULT_URLS = {
    "postgresql": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "mariadb": "mysql+pymysql://root@127.0.0.1:3306/test",
    "sqlite": "sqlite:///insert_keys_bench.sqlite3",
}


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per run")
    parser.add_argument("--dialects", default="postgresql", help="postgresql,mariadb,sqlite")
    parser.add_argument(
        "--methods", default="core,COPY", help="core, COPY (PostgreSQL) and/or orm (add_all)"
    )
    parser.add_argument("--rates", default="1,64,512,4096", help="rows per millisecond")
    parser.add_argument("--writers", type=int, default=4, help="concurrent processes")
    parser.add_argument("--repeat", type=int, default=1, help="interleaved rounds, best kept")
    parser.add_argument("--skip-rates", action="store_true")
    parser.add_argument("--skip-concurrent", action="store_true")
    parser.add_argument("--quick", action="store_true", help="a small run (2,000 rows, 2 writers)")
    for dialect, default in DEFAULT_URLS.items():
        parser.add_argument(f"--{dialect}-url", default=default)
    args = parser.parse_args(argv)
    rows = 2_000 if args.quick else args.rows
    if args.quick:
        args.rates, args.writers = "1,512", 2
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for dialect in [d.strip() for d in args.dialects.split(",") if d.strip()]:
        if dialect not in DEFAULT_URLS:
            parser.error(f"unknown dialect {dialect!r} (choose from {', '.join(DEFAULT_URLS)})")
        with scratch_area(getattr(args, f"{dialect}_url")) as scratch:
            usable = (*for_dialect(scratch.engine.dialect).bench().methods, "orm")
            chosen = [m for m in methods if m in usable]
            print_table(*insert_table(dialect, scratch, rows, chosen, max(1, args.repeat)))
            # Leaf density needs pgstatindex: these two tables are PostgreSQL's.
            if dialect == "postgresql" and not args.skip_rates:
                rates = [int(r) for r in args.rates.split(",")]
                print_table(*rate_table(dialect, scratch.engine, rows, rates))
            if dialect == "postgresql" and not args.skip_concurrent:
                print_table(*concurrent_table(dialect, scratch, rows, args.writers))


if __name__ == "__main__":
    main()
