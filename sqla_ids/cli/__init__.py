"""The ``sqla-ids`` command line.

Each sub-command lives in its own module exposing ``register(subparsers)``;
this module only assembles them, so adding a command never touches another.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from sqla_ids.errors import CommandError

# Modules (relative to this package) whose ``register`` adds sub-commands.
COMMAND_MODULES: tuple[str, ...] = (
    ".uuid_commands",
    ".demo",
    ".alembic_init",
    ".order_number",
    ".find",
    ".relations",
    ".identicon",
    ".serve",
    ".bench",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="sqla-ids",
        description="UUIDv7 keys, order numbers and key migrations for SQLAlchemy.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name, __name__).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except CommandError as error:
        print(f"sqla-ids {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sqla-ids {args.command}: interrupted", file=sys.stderr)
        return 130
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
