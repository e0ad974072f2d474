"""``sqla-ids generate`` and ``sqla-ids inspect``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sqla_ids.errors import CommandError
from sqla_ids.identifiers import (
    UUIDFormatError,
    is_uuid7,
    parse_uuid,
    sqlserver_sort_key,
    to_base32,
    uuid7_batch,
    uuid7_counter,
    uuid7_datetime,
)
from sqla_ids.identifiers.encoding import FORMATTERS

MAX_GENERATE = 10_000_000


def register(subparsers: Any) -> None:
    """Add ``generate`` and ``inspect`` to the command line."""
    generate = subparsers.add_parser(
        "generate", help="print new UUIDv7 values", description="Print new UUIDv7 values."
    )
    generate.add_argument("-n", type=int, default=1, help="how many (default 1)")
    generate.add_argument(
        "--format", choices=sorted(FORMATTERS), default="canonical", help="text form"
    )
    generate.set_defaults(handler=run_generate)

    inspect = subparsers.add_parser(
        "inspect",
        help="explain a UUID value",
        description="Show version, variant, timestamp, counter, Base32 and SQL Server sort key.",
    )
    inspect.add_argument("value", help="a UUID: canonical, 32 hex digits, or Crockford Base32")
    inspect.add_argument("--json", action="store_true", help="print JSON")
    inspect.set_defaults(handler=run_inspect)


def run_generate(args: argparse.Namespace) -> int:
    """Print ``-n`` UUIDv7 values, one per line."""
    if not 1 <= args.n <= MAX_GENERATE:
        raise CommandError(f"-n must be between 1 and {MAX_GENERATE:,}, got {args.n}")
    formatter = FORMATTERS[args.format]
    sys.stdout.write("\n".join(map(formatter, uuid7_batch(args.n))) + "\n")
    return 0


def describe(value: str) -> dict[str, Any]:
    """Return the facts ``inspect`` prints about a UUID given as text."""
    try:
        uuid = parse_uuid(value)
    except UUIDFormatError as error:
        raise CommandError(str(error)) from None
    facts: dict[str, Any] = {
        "canonical": str(uuid),
        "hex": uuid.hex,
        "base32": to_base32(uuid),
        "version": uuid.version,
        "variant": uuid.variant,
        "sqlserver_sort_key": sqlserver_sort_key(uuid).hex(),
    }
    if is_uuid7(uuid):
        facts["timestamp"] = uuid7_datetime(uuid).isoformat(timespec="milliseconds")
        facts["unix_ms"] = uuid.int >> 80
        facts["counter"] = uuid7_counter(uuid)
    return facts


def run_inspect(args: argparse.Namespace) -> int:
    """Print what a UUID value holds."""
    facts = describe(args.value)
    if args.json:
        print(json.dumps(facts, indent=2))
    else:
        width = max(map(len, facts))
        for key, value in facts.items():
            print(f"{key:<{width}}  {value}")
        if "timestamp" not in facts:
            print(f"{'note':<{width}}  not a UUIDv7: no timestamp to decode")
    return 0
