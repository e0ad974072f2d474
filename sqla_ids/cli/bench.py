"""``sqla-ids bench --url URL``: the insert benchmark on the user's own database.

Compares ``bigint``, UUIDv4 and our UUIDv7 with each requested layout at each
rows-per-millisecond rate (and our server function where it can be
installed), so the counter can be sized and a layout chosen by measurement
(docs/uuid7.md). It works in a throw-away schema/database/file and drops it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from sqla_ids.cli.database import add_url_argument, parse_url, url_error
from sqla_ids.errors import CommandError, SqlaIdsError

if TYPE_CHECKING:
    from sqla_ids.tools.layout_benchmark import LayoutBenchmark

# SQLAlchemy is imported inside ``run``: building the parser stays light.


def register(subparsers: Any) -> None:
    """Add ``bench`` to the command line."""
    parser = subparsers.add_parser(
        "bench",
        help="insert benchmark on your database: bigint vs UUIDv4 vs UUIDv7 layouts",
        description=(
            "Insert rows with bigint, UUIDv4 and UUIDv7 keys (each layout, at each rate of "
            "rows per millisecond, and with concurrent writers) into a throw-away "
            "schema/database that is dropped afterwards; print rows/s, primary-key size and "
            "leaf density as ratios to bigint, and recommend a layout."
        ),
    )
    add_url_argument(parser)
    parser.add_argument("--rows", type=int, default=20_000, help="rows per run (20,000)")
    parser.add_argument(
        "--rates", default="1,64,512,4096", help="rows per millisecond to simulate (1,64,512,4096)"
    )
    parser.add_argument(
        "--writers", type=int, default=4, help="concurrent writer processes; 1 skips (4)"
    )
    parser.add_argument(
        "--layouts",
        default="default,cpython314,no-counter",
        help="UUIDv7 layout presets to compare (default,cpython314,no-counter)",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(handler=run)


def _integers(option: str, text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(
            f"{option} must be comma-separated whole numbers, got {text!r}"
        ) from None


def run(args: argparse.Namespace) -> int:
    """Run the benchmark in a scratch area and print the table or JSON."""
    import sqlalchemy as sa

    from sqla_ids.dialects import for_dialect
    from sqla_ids.tools.layout_benchmark import check_options, run_layout_benchmark

    rates = _integers("--rates", args.rates)
    layouts = [name.strip() for name in args.layouts.split(",") if name.strip()]
    url = parse_url(args.url)
    try:
        check_options(args.rows, rates, args.writers, layouts)
        for_dialect(url.get_backend_name()).bench()  # unsupported database: before connecting
    except (ValueError, SqlaIdsError) as error:
        raise CommandError(str(error)) from None
    show_progress = sys.stderr.isatty()

    def progress(step: str) -> None:
        print(f"\r\033[Kmeasuring {step}", end="", file=sys.stderr, flush=True)

    try:
        report = run_layout_benchmark(
            url,
            rows=args.rows,
            rates=rates,
            writers=args.writers,
            layouts=layouts,
            progress=progress if show_progress else None,
        )
    except (sa.exc.NoSuchModuleError, ImportError, sa.exc.DBAPIError) as error:
        raise url_error(error, args.url) from None
    finally:
        if show_progress:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_benchmark(report))
    return 0


def _cell(value: float | None, suffix: str = "", digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}{suffix}"


def format_benchmark(report: LayoutBenchmark) -> str:
    """The results as a text table, then what was skipped and the recommendation."""
    from sqla_ids.tools.report import format_table

    rows: list[list[object]] = [
        [
            row.key,
            "-" if row.rows_per_ms is None else row.rows_per_ms,
            row.writers,
            row.rows_per_second,
            _cell(row.time_ratio, "x"),
            "n/a" if row.index_bytes is None else f"{row.index_bytes / 1024:,.0f}",
            _cell(row.size_ratio, "x"),
            _cell(row.leaf_density, "%", 1),
            _cell(row.wal_ratio, "x"),
            "-" if row.clock_drift_ms is None else row.clock_drift_ms,
        ]
        for row in report.results
    ]
    header = [
        "key",
        "rows/ms",
        "writers",
        "rows/s",
        "time",
        "PK KiB",
        "PK size",
        "leaf dens.",
        "WAL",
        "drift ms",
    ]
    title = (
        f"{report.dialect}: {report.rows:,} rows per run in scratch {report.scratch!r} "
        "(keys made beforehand; ratios to bigint with the same writers)"
    )
    table = format_table(header, rows, title=title, numbers=True)
    notes = [f"skipped: {reason}" for reason in report.skipped]
    return "\n".join(["", table, "", *notes, f"recommendation: {report.recommendation}"])
