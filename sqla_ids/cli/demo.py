"""``sqla-ids demo``: a one-minute tour on a SQLite file (or ``--url``).

A small shop with ``bigint`` keys is created, migrated by a real Alembic
migration to UUIDv7 keys (old keys kept) with customer-facing order numbers,
used through the ORM, and shown before and after.
"""

from __future__ import annotations

import argparse
from typing import Any

import sqlalchemy as sa

from sqla_ids.cli.database import display_url, parse_url, url_error
from sqla_ids.errors import CommandError

DEFAULT_URL = "sqlite:///sqla_ids_demo.sqlite3"


def register(subparsers: Any) -> None:
    """Add ``demo`` to the command line."""
    demo = subparsers.add_parser(
        "demo",
        help="a short tour: a shop migrated from bigint to UUIDv7 keys, with order numbers",
        description=(
            "A one-minute tour on a SQLite file (or --url): a small shop with bigint keys is "
            "created, migrated by a real Alembic migration to UUIDv7 keys (old keys kept) "
            "with customer-facing order numbers, used through the ORM, and shown before and "
            "after. Running it again starts over. The shop stays in the database for you to "
            "look at; --clean removes it."
        ),
    )
    demo.add_argument("--url", default=DEFAULT_URL, help=f"database URL (default {DEFAULT_URL})")
    demo.add_argument(
        "--clean",
        action="store_true",
        help="remove what the demo left in the database (its tables, mapping tables, "
        "sequence, Alembic version table, migration records, and the UUIDv7 function "
        "unless something else uses it), and run no tour",
    )
    demo.add_argument("--customers", type=int, default=20, help="customers (default 20)")
    demo.add_argument("--orders", type=int, default=200, help="orders (default 200)")
    demo.set_defaults(handler=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Run the tour (or ``--clean``); database problems become one clear error line."""
    from sqla_ids.demo.tour import clean_up, run_tour  # SQLAlchemy/Alembic only when used

    if not 1 <= args.customers <= 100_000 or not 1 <= args.orders <= 1_000_000:
        raise CommandError("--customers must be 1…100,000 and --orders 1…1,000,000")
    url = parse_url(args.url)
    try:
        if args.clean:
            engine = sa.create_engine(url)
            try:
                print(f"sqla-ids demo --clean ({display_url(engine.url)}):")
                clean_up(engine, print)
            finally:
                engine.dispose()
            return 0
        run_tour(url, customers=args.customers, orders=args.orders)
    except (
        sa.exc.ArgumentError,
        sa.exc.NoSuchModuleError,
        sa.exc.OperationalError,
        ImportError,
    ) as error:
        raise url_error(error, args.url) from None
    again = "sqla-ids demo" + ("" if args.url == DEFAULT_URL else " --url URL")
    print(
        "\nDone. Try `sqla-ids inspect <id>` on an id above. The shop stays in the database"
        f" to look at: `{again}` starts over, `{again} --clean` removes it."
    )
    return 0
