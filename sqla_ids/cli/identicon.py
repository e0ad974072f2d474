"""``sqla-ids identicon VALUE``: a deterministic SVG picture of a UUID."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from sqla_ids.errors import CommandError
from sqla_ids.identifiers import UUIDFormatError
from sqla_ids.tools.identicon import MAX_SIZE, MIN_SIZE, identicon_svg


def register(subparsers: Any) -> None:
    """Add ``identicon`` to the command line."""
    parser = subparsers.add_parser(
        "identicon",
        help="draw a UUID as a small SVG identicon",
        description="Write a deterministic SVG identicon for a UUID (any spelling).",
    )
    parser.add_argument("value", help="the UUID")
    parser.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")
    parser.add_argument(
        "--size", type=int, default=128, help=f"pixels per side, {MIN_SIZE}-{MAX_SIZE} (128)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print or write the SVG."""
    try:
        svg = identicon_svg(args.value, size=args.size)
    except UUIDFormatError as error:
        raise CommandError(str(error)) from None
    except ValueError as error:
        raise CommandError(f"--size: {error}") from None
    if args.output is None:
        sys.stdout.write(svg)
        return 0
    try:
        args.output.write_text(svg, encoding="utf-8")
    except OSError as error:
        raise CommandError(f"cannot write {args.output}: {error.strerror}") from None
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
