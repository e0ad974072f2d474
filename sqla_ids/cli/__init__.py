"""The ``sqla-ids`` command line.

Each sub-command lives in its own module exposing ``register(subparsers)``;
this module only assembles them, so adding a command never touches another.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import sys
from collections.abc import Sequence

from sqla_ids import __version__
from sqla_ids.cli.database import scrub
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
    ".migrate",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every sub-command registered."""
    parser = argparse.ArgumentParser(
        prog="sqla-ids",
        description="UUIDv7 keys, order numbers and key migrations for SQLAlchemy.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
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
        # Every command words its own errors; this is the last guard for secrets.
        message = scrub(str(error), getattr(args, "url", None))
        print(f"sqla-ids {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"sqla-ids {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader left (`sqla-ids generate -n 1000000 | head`): stop quietly,
        # with the status a shell gives a writer stopped by SIGPIPE.
        _discard_stdout()
        return 141
    return status


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so flushing it at exit does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):  # not a real file (tests)
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
