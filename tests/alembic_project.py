"""A throw-away Alembic project for tests: Alembic's own ``script.py.mako`` and an
``env.py`` that takes its connection, metadata and ``context.configure``
arguments from ``config.attributes`` (so a test chooses the hooks)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import alembic
import sqlalchemy as sa
from alembic.config import Config

ENV_PY = """\
from alembic import context

config = context.config
context.configure(
    connection=config.attributes["connection"],
    target_metadata=config.attributes["metadata"],
    **config.attributes["configure"],
)
with context.begin_transaction():
    context.run_migrations()
"""


def project(
    tmp_path: Path, connection: sa.Connection, metadata: sa.MetaData, **configure: Any
) -> Config:
    """An Alembic ``Config`` whose ``env.py`` runs on ``connection`` with ``configure``."""
    location = tmp_path / "migrations"
    (location / "versions").mkdir(parents=True)
    template = Path(alembic.__file__).parent / "templates" / "generic" / "script.py.mako"
    shutil.copy(template, location / "script.py.mako")
    (location / "env.py").write_text(ENV_PY)
    config = Config()
    config.set_main_option("script_location", str(location))
    config.attributes.update(connection=connection, metadata=metadata, configure=configure)
    return config


def revision_text(config: Config, rev_id: str, **kwargs: Any) -> str:
    """Autogenerate revision ``rev_id`` and return its file's text."""
    from alembic import command

    script = command.revision(config, message=rev_id, autogenerate=True, rev_id=rev_id, **kwargs)
    assert script is not None and not isinstance(script, list)
    return Path(script.path).read_text()
