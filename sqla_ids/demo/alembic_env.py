"""A throw-away Alembic environment holding the demo's one migration.

Written to a temporary folder and run with ``alembic.command.upgrade``: the
demo goes through exactly the code path of a user's ``alembic upgrade``.
"""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config

VERSION_TABLE = "sqla_ids_demo_version"

ENV_PY = """
from alembic import context

import sqla_ids.alembic  # registers op.migrate_pk_to_uuid7 and friends

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table="{version_table}")
with context.begin_transaction():
    context.run_migrations()
"""

MIGRATION_PY = '''
"""Shop keys: bigint -> UUIDv7 (old keys kept), plus customer-facing order numbers."""

from alembic import op

from sqla_ids import FormattedOrderNumber

revision = "0001_uuid7_keys"
down_revision = None
ORDER_NUMBER = FormattedOrderNumber("{key_name}", sequence="demo_order_numbers")


def upgrade():
    # Parents first; each call rewrites every foreign key pointing at the table.
    op.migrate_pk_to_uuid7("demo_customers", timestamp_column="created_at", batch_size={batch})
    op.migrate_pk_to_uuid7("demo_orders", timestamp_column="created_at", batch_size={batch})
    op.migrate_pk_to_uuid7("demo_order_lines", batch_size={batch})
    op.add_order_number_column("demo_orders", "number", ORDER_NUMBER, order_by="created_at")


def downgrade():
    op.drop_order_number_column("demo_orders", "number", ORDER_NUMBER)
    op.restore_pk_from_uuid7("demo_order_lines")
    op.restore_pk_from_uuid7("demo_orders")
    op.restore_pk_from_uuid7("demo_customers")
'''


def migration_source(*, key_name: str, batch_size: int) -> str:
    """The text of the demo's migration script."""
    return MIGRATION_PY.format(key_name=key_name, batch=batch_size)


def upgrade_operations(source: str) -> list[str]:
    """The ``op.…`` calls of the migration's ``upgrade()``, one per line, for the tour."""
    body = source.split("def upgrade():", 1)[1].split("def downgrade():", 1)[0]
    return [line.strip() for line in body.splitlines() if line.strip().startswith("op.")]


def write_environment(folder: Path, *, key_name: str, batch_size: int) -> Config:
    """Write env.py and the migration into ``folder``; return the Alembic config."""
    versions = folder / "versions"
    versions.mkdir(parents=True, exist_ok=True)
    (folder / "env.py").write_text(ENV_PY.format(version_table=VERSION_TABLE), encoding="utf-8")
    (folder / "script.py.mako").write_text("", encoding="utf-8")
    (versions / "0001_uuid7_keys.py").write_text(
        migration_source(key_name=key_name, batch_size=batch_size), encoding="utf-8"
    )
    config = Config()
    config.set_main_option("script_location", str(folder))
    return config
