"""``sqla-ids generate`` and ``sqla-ids inspect``."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import RFC_4122, UUID

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
from sqla_ids.identifiers.inspection import variant_name

MAX_GENERATE = 10_000_000
GENERATE_CHUNK = 65_536
"""Values made and written at a time: memory stays flat whatever ``-n`` is."""


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
    write = sys.stdout.write
    left = args.n
    while left:
        # One generator for every chunk: the values stay strictly increasing.
        size = min(left, GENERATE_CHUNK)
        write("\n".join(map(formatter, uuid7_batch(size))) + "\n")
        left -= size
    return 0


_GREGORIAN_EPOCH = datetime(1582, 10, 15, tzinfo=UTC)

# What each RFC 9562 version holds, for the note on a UUID that is not a UUIDv7.
_VERSION_NOTES = {
    1: "a UUIDv1 with Gregorian time (100 ns steps since 1582-10-15, shown to the microsecond) "
    "and a node id; no counter",
    2: "a UUIDv2 (DCE security), part of its time replaced by a local id, not decoded",
    3: "a UUIDv3, an MD5 hash of a name; no timestamp",
    4: "a UUIDv4, random; no timestamp",
    5: "a UUIDv5, a SHA-1 hash of a name; no timestamp",
    6: "a UUIDv6, UUIDv1's Gregorian time reordered to sort (100 ns steps since 1582-10-15, "
    "shown to the microsecond); no counter",
    8: "a UUIDv8, a custom layout; no standard timestamp to decode",
}


def _gregorian_ticks(uuid: UUID) -> int:
    """The 60-bit count of 100 ns since 1582-10-15 held by a UUIDv1 or UUIDv6."""
    value = uuid.int
    high, middle, low = value >> 96, (value >> 80) & 0xFFFF, (value >> 64) & 0x0FFF
    if uuid.version == 1:  # time_low, time_mid, time_high
        return (low << 48) | (middle << 32) | high
    return (high << 28) | (middle << 12) | low  # UUIDv6: most significant first


def describe(value: str) -> dict[str, Any]:
    """Return the facts ``inspect`` prints about a UUID given as text.

    A UUID that is not a UUIDv7 gets a ``note`` saying what it is instead.
    """
    try:
        uuid = parse_uuid(value)
    except UUIDFormatError as error:
        raise CommandError(str(error)) from None
    rfc = uuid.variant == RFC_4122
    facts: dict[str, Any] = {
        "canonical": str(uuid),
        "hex": uuid.hex,
        "base32": to_base32(uuid),
        "version": uuid.version if rfc else None,
        "variant": variant_name(uuid),
        "sqlserver_sort_key": sqlserver_sort_key(uuid).hex(),
    }
    if is_uuid7(uuid):
        facts["timestamp"] = uuid7_datetime(uuid).isoformat(timespec="milliseconds")
        facts["unix_ms"] = uuid.int >> 80
        facts["counter"] = uuid7_counter(uuid)
        return facts
    if uuid.version in (1, 6) and rfc:
        when = _GREGORIAN_EPOCH + timedelta(microseconds=_gregorian_ticks(uuid) // 10)
        facts["timestamp"] = when.isoformat(timespec="microseconds")
    if uuid.int == 0:
        what = "the nil UUID (all 128 bits zero, RFC 9562 §5.9): a placeholder, not an id"
    elif uuid.int == (1 << 128) - 1:
        what = "the max UUID (all 128 bits one, RFC 9562 §5.10): a placeholder, not an id"
    elif not rfc:
        what = (
            "not an RFC 9562 UUID either: its variant bits are reserved, so it has no "
            "version and no timestamp to decode"
        )
    else:
        version = uuid.version or 0
        what = _VERSION_NOTES.get(
            version, f"version {version}, which RFC 9562 does not define; no timestamp"
        )
    facts["note"] = f"not a UUIDv7: {what}"
    return facts


def run_inspect(args: argparse.Namespace) -> int:
    """Print what a UUID value holds."""
    facts = describe(args.value)
    if args.json:
        print(json.dumps(facts, indent=2))
    else:
        width = max(map(len, facts))
        for key, value in facts.items():
            print(f"{key:<{width}}  {'-' if value is None else value}")
    return 0
