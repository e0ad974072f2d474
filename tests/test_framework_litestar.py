"""Issue 32, item 5: advanced-alchemy's (Litestar's) Alembic template does not know
sqla_ids: it passes ``user_module_prefix="sa."``, so autogenerate writes
``sa.UUIDv7()`` and the upgrade fails. With the two lines of docs/litestar.md
(``import sqla_ids.alembic``; ``render_item=sqla_ids.alembic.render_item``) the
revision says ``sqla_ids.UUIDv7()``, its template's ``${imports}`` brings
``import sqla_ids``, and upgrade, ORM insert, check and downgrade work --
with advanced-alchemy's own ``script.py.mako``, on SQLite, PostgreSQL and MariaDB.
"""

from __future__ import annotations

import secrets
import shutil
import uuid
from importlib.util import find_spec
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from sqlalchemy import orm
from sqlalchemy.engine import Engine

import sqla_ids.alembic
from sqla_ids import UUIDv7, uuid7_pk
from tests.alembic_project import project, revision_text

# Found, not imported: advanced-alchemy's import (half a second) would be paid by
# every pytest-xdist worker's collection, and the test needs only this file.
_ADVANCED_ALCHEMY = find_spec("advanced_alchemy")
if _ADVANCED_ALCHEMY is None or _ADVANCED_ALCHEMY.origin is None:
    raise ImportError("advanced-alchemy is not installed (the framework extras)")
TEMPLATE = (
    Path(_ADVANCED_ALCHEMY.origin).parent / "alembic" / "templates" / "sync" / "script.py.mako"
)


def _models(p: str) -> tuple[sa.MetaData, type]:
    class Base(orm.DeclarativeBase):
        pass

    class Order(Base):
        __tablename__ = f"{p}orders"
        id: orm.Mapped[uuid.UUID] = uuid7_pk()
        ref: orm.Mapped[uuid.UUID | None] = orm.mapped_column(UUIDv7(mariadb_native=False))

    return Base.metadata, Order


@pytest.mark.parametrize("two_lines", [False, True], ids=["template-alone", "two-lines"])
def test_advanced_alchemy_template(engine: Engine, tmp_path: Path, two_lines: bool) -> None:
    p = f"aa{secrets.token_hex(2)}_"
    metadata, order = _models(p)
    hooks = {"render_item": sqla_ids.alembic.render_item} if two_lines else {}
    with engine.connect() as conn:
        config = project(
            tmp_path,
            conn,
            metadata,
            user_module_prefix="sa.",  # what advanced-alchemy's env.py passes
            render_as_batch=True,
            include_name=lambda name, type_, parent: type_ != "table" or name.startswith(p),
            **hooks,
        )
        shutil.copy(TEMPLATE, tmp_path / "migrations" / "script.py.mako")
        text = revision_text(config, "0001")
        conn.commit()  # the template's autocommit_block needs Alembic's own transaction
        try:
            if not two_lines:
                assert "sa.UUIDv7()" in text
                with pytest.raises(AttributeError, match="has no attribute 'UUIDv7'"):
                    command.upgrade(config, "head")
                return
            assert "sqla_ids.UUIDv7()" in text and "import sqla_ids\n" in text
            command.upgrade(config, "head")
            conn.commit()
            with orm.Session(conn) as session:
                session.add(order())
                session.commit()
                assert session.scalars(sa.select(order.id)).one().version == 7
            command.check(config)
            conn.commit()
            command.downgrade(config, "base")
            assert not [n for n in sa.inspect(conn).get_table_names() if n.startswith(p)]
        finally:
            conn.rollback()
            metadata.drop_all(conn)
            conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
            conn.commit()
