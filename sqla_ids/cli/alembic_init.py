"""``sqla-ids alembic init DIR``: an Alembic environment wired for sqla_ids.

Alembic's own ``init -t NAME`` only looks in Alembic's template folder, so this
command points Alembic at the templates shipped with sqla_ids (the approach
of Flask-Migrate: override ``Config.get_template_directory``). For a URL with
an async driver (``postgresql+asyncpg://``, ``sqlite+aiosqlite://``…) the
``env.py`` is Alembic's async form (an ``AsyncEngine`` whose connection runs
the migrations through ``run_sync``); a sync ``env.py`` would fail there with
``MissingGreenlet``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sqla_ids.errors import CommandError

TEMPLATE = "sqla_ids"
ASYNC_ENV = "sqla_ids_async_env.py"


def templates_directory() -> Path:
    """The folder holding sqla_ids' Alembic templates, installed or in a source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_migrations_templates", package.parent / "migrations_templates"):
        if (candidate / TEMPLATE / "env.py").is_file():
            return candidate
    raise CommandError(f"sqla_ids' Alembic templates are missing (looked next to {package})")


def register(subparsers: Any) -> None:
    """Add ``alembic init`` to the command line."""
    alembic = subparsers.add_parser(
        "alembic",
        help="Alembic helpers",
        description="Alembic helpers for projects using sqla_ids.",
    )
    commands = alembic.add_subparsers(dest="alembic_command", required=True, metavar="COMMAND")
    init = commands.add_parser(
        "init",
        help="create an Alembic environment wired for sqla_ids",
        description=(
            "Create an Alembic environment whose env.py imports sqla_ids' operations,"
            " renders its types and rewrites key changes to op.migrate_pk_to_uuid7."
        ),
    )
    init.add_argument("directory", help="folder to create (must not exist or be empty)")
    init.add_argument(
        "-c", "--config", default="alembic.ini", help="path of the ini file (default alembic.ini)"
    )
    init.add_argument(
        "--url",
        help="sqlalchemy.url to write into the ini file (an async driver gets an async env.py)",
    )
    init.set_defaults(handler=run_init)


def _is_async(url: str) -> bool:
    """Whether ``url`` names an async driver (its SQLAlchemy dialect says so)."""
    import sqlalchemy as sa

    try:
        dialect = sa.engine.make_url(url).get_dialect()
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as error:
        raise CommandError(f"--url: {error}") from None
    return bool(dialect.is_async)


def run_init(args: argparse.Namespace) -> int:
    """Create the environment in ``args.directory``."""
    from alembic import command
    from alembic.config import Config
    from alembic.util import CommandError as AlembicCommandError

    directory = templates_directory()
    asynchronous = bool(args.url) and _is_async(args.url)

    class _Config(Config):
        def get_template_directory(self) -> str:
            return str(directory)

    ini = Path(args.config)
    if ini.exists():
        raise CommandError(f"{ini} already exists; choose another with --config")
    config = _Config(str(ini))
    try:
        command.init(config, args.directory, template=TEMPLATE)
    except AlembicCommandError as error:
        raise CommandError(str(error)) from None
    if asynchronous:
        env = Path(args.directory) / "env.py"
        env.write_text((directory / ASYNC_ENV).read_text(encoding="utf-8"), encoding="utf-8")
    if args.url:
        text = ini.read_text(encoding="utf-8")
        ini.write_text(
            text.replace(
                "sqlalchemy.url = driver://user:pass@localhost/dbname",
                f"sqlalchemy.url = {args.url}",
            ),
            encoding="utf-8",
        )
    return 0
