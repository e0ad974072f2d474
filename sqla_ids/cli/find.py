"""``sqla-ids find VALUE --url URL``: where does this UUID occur?"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sqla_ids.cli.database import add_url_argument, check_schema, open_engine, url_error
from sqla_ids.errors import CommandError, SqlaIdsError
from sqla_ids.identifiers import UUIDFormatError, parse_uuid

# SQLAlchemy is imported inside the functions: building the command-line
# parser should not load it for commands that do not use a database.


def register(subparsers: Any) -> None:
    """Add ``find`` to the command line."""
    parser = subparsers.add_parser(
        "find",
        help="find a UUID in every table and column of a database",
        description=(
            "Search every UUID, text, binary, JSON and array column of a schema for a UUID "
            "given in any spelling (canonical, 32 hex digits, braced, Crockford Base32). "
            "Exit status: 0 found, 1 not found, 130 interrupted."
        ),
    )
    parser.add_argument("value", help="the UUID to look for")
    add_url_argument(parser)
    parser.add_argument("--schema", help="schema/database to scan (default: the URL's)")
    parser.add_argument("--table", action="append", dest="tables", help="only this table (repeat)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--limit-rows", type=int, default=10, help="rows fetched per column (default 10)"
    )
    parser.add_argument(
        "--timeout", type=float, default=None, help="time budget in seconds for the whole scan"
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="list every scanned column and its status"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Search the database and print the report."""
    import sqlalchemy as sa

    from sqla_ids.tools.find import find_uuid, format_report

    try:
        value = parse_uuid(args.value)
    except UUIDFormatError as error:
        raise CommandError(str(error)) from None
    if args.limit_rows < 1:
        raise CommandError(f"--limit-rows must be at least 1, got {args.limit_rows}")
    if args.timeout is not None and args.timeout <= 0:
        raise CommandError(f"--timeout must be positive seconds, got {args.timeout}")
    engine = open_engine(args.url)
    show_progress = sys.stderr.isatty()  # a live counter for people, nothing for pipes
    scanned = 0

    def progress(column: Any) -> None:
        nonlocal scanned
        scanned += 1
        line = f"scanned {scanned} column(s): {column.table}.{column.column} {column.status}"
        print(f"\r\033[K{line[:100]}", end="", file=sys.stderr, flush=True)

    try:
        check_schema(engine, args.schema, args.url)
        report = find_uuid(
            engine,
            value,
            schema=args.schema,
            tables=args.tables,
            limit_rows=args.limit_rows,
            timeout=args.timeout,
            progress=progress if show_progress else None,
        )
    except (ValueError, SqlaIdsError) as error:  # bad input, unsupported dialect
        raise CommandError(str(error)) from None
    except sa.exc.DBAPIError as error:
        raise url_error(error, args.url) from None
    finally:
        engine.dispose()
        if show_progress:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
    print(report.to_json() if args.json else format_report(report, verbose=args.verbose))
    if report.interrupted:
        print("sqla-ids find: interrupted; the report above is partial", file=sys.stderr)
        return 130
    return 0 if report.matches else 1
