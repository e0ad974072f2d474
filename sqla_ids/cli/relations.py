"""``sqla-ids relations --url URL``: infer keys among UUID columns and draw them."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from sqla_ids.cli.database import add_url_argument, check_schema, open_engine, url_error
from sqla_ids.errors import CommandError, SqlaIdsError


def register(subparsers: Any) -> None:
    """Add ``relations`` to the command line."""
    parser = subparsers.add_parser(
        "relations",
        help="infer primary/foreign keys among UUID columns; Mermaid/DOT ER diagram",
        description=(
            "Measure every column holding UUIDs, infer primary-key and foreign-key "
            "candidates from the data (uniqueness, value containment, names) with a "
            "confidence score, and print them as a table, JSON, Mermaid or DOT."
        ),
    )
    add_url_argument(parser)
    parser.add_argument("--schema", help="schema/database to analyse (default: the URL's)")
    parser.add_argument("--table", action="append", dest="tables", help="only this table (repeat)")
    parser.add_argument(
        "--column",
        metavar="TABLE.COLUMN",
        help="instead: list the columns related to this one by name or shared values",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--mermaid", action="store_true", help="print a Mermaid erDiagram")
    output.add_argument("--dot", action="store_true", help="print Graphviz DOT")
    output.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--min-confidence", type=float, default=0.5, help="hide weaker references (0.5)"
    )
    parser.add_argument("--timeout", type=float, default=None, help="time budget in seconds")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Analyse the database and print the result."""
    import sqlalchemy as sa

    if args.timeout is not None and args.timeout <= 0:
        raise CommandError(f"--timeout must be positive seconds, got {args.timeout}")
    engine = open_engine(args.url)
    try:
        check_schema(engine, args.schema, args.url)
        if args.column:
            return _related(engine, args)
        from sqla_ids.tools.diagram import to_dot, to_mermaid
        from sqla_ids.tools.relations import infer_relations

        report = infer_relations(
            engine,
            schema=args.schema,
            tables=args.tables,
            min_confidence=args.min_confidence,
            timeout=args.timeout,
        )
    except (ValueError, SqlaIdsError) as error:  # bad input, unsupported dialect
        raise CommandError(str(error)) from None
    except sa.exc.DBAPIError as error:
        raise url_error(error, args.url) from None
    finally:
        engine.dispose()
    if args.mermaid:
        print(to_mermaid(report), end="")
    elif args.dot:
        print(to_dot(report), end="")
    elif args.json:
        print(report.to_json())
    else:
        print(format_relations(report))
    return 130 if report.interrupted else 0


def _related(engine: Any, args: argparse.Namespace) -> int:
    from sqla_ids.tools.relations import related_columns

    table, dot, column = args.column.partition(".")
    if not dot or not table or not column:
        raise CommandError(f"--column must be TABLE.COLUMN, got {args.column!r}")
    related = related_columns(engine, table, column, schema=args.schema, timeout=args.timeout)
    if args.json:
        print(json.dumps([asdict(r) for r in related], indent=2))
        return 0
    print(f"columns related to {args.column}:")
    for r in related:
        why = ", ".join(
            part
            for part in ("same name" if r.same_name else "", f"{r.shared} shared value(s)")
            if part
        )
        print(f"  {r.table}.{r.column}: {why} ({r.overlap:.0%} of {args.column})")
    if not related:
        print("  none")
    return 0


def format_relations(report: Any) -> str:
    """The report as plain text."""
    lines = [f"UUID columns in schema {report.schema or '(default)'}:"]
    for c in report.columns:
        lines.append(
            f"  {c.name}  {c.type_name}  rows={c.rows} values={c.values} distinct={c.distinct}"
        )
    lines.append("primary-key candidates:")
    lines += [
        f"  {k.table}.{k.column}  {k.confidence:.2f}  ({', '.join(k.reasons)})"
        for k in report.primary_keys
    ] or ["  none"]
    lines.append("references:")
    lines += [
        f"  {r.table}.{r.column} -> {r.target_table}.{r.target_column}  "
        f"{r.confidence:.2f}  ({'; '.join(r.reasons)})"
        for r in report.references
    ] or ["  none"]
    if report.left_out:
        lines.append(
            "left out (sqla_ids' own tables; --table NAME analyses one): "
            + ", ".join(report.left_out)
        )
    if report.skipped:
        lines.append("not checked: " + "; ".join(report.skipped))
    if report.interrupted:
        lines.append("INTERRUPTED: the analysis is partial")
    return "\n".join(lines)
