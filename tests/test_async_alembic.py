"""Issue 32, item 6: async applications.

* ``register_uuid7_function`` accepts an ``AsyncEngine`` (aiosqlite: the function
  exists on its connections, also on a pool that had connected before);
* ``sqla-ids alembic init --url <async driver>`` writes Alembic's async ``env.py``,
  and a project made that way autogenerates, upgrades, checks and downgrades
  through aiosqlite, asyncpg, psycopg's async mode and aiomysql on the real servers.
"""

from __future__ import annotations

import asyncio
import importlib
import secrets
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from sqla_ids import register_uuid7_function
from sqla_ids.cli import main
from sqla_ids.order_numbers import default_keyring, register_key


def test_register_uuid7_function_accepts_an_async_engine(tmp_path: Path) -> None:
    async def run() -> list[Any]:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'a.sqlite3'}")
        async with engine.connect() as conn:  # a pooled connection made before
            await conn.exec_driver_sql("SELECT 1")
        register_uuid7_function(engine)
        async with engine.connect() as conn:
            rows = (
                await conn.exec_driver_sql("SELECT sqla_ids_uuid7(), sqla_ids_uuid7_serial()")
            ).all()
        await engine.dispose()
        return list(rows[0])

    first, serial = asyncio.run(run())
    assert len(first) == 32 and first[12] == "7" and serial > first


def test_register_uuid7_function_async_engine_elsewhere_is_a_no_op(postgresql_url: URL) -> None:
    async def run() -> None:
        engine = create_async_engine(postgresql_url.set(drivername="postgresql+psycopg_async"))
        register_uuid7_function(engine)  # nothing to register: the server has the function
        await engine.dispose()

    asyncio.run(run())


ASYNC_URLS = [
    "sqlite+aiosqlite",
    "postgresql+asyncpg",
    "postgresql+psycopg_async",
    "mysql+aiomysql",
]


@pytest.fixture
def async_url(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[str, dict[str, Any]]]:
    """(URL, asyncpg's server_settings) of the run's database for one async driver."""
    drivername: str = request.param
    module = {"sqlite": "aiosqlite", "postgresql": "asyncpg", "mysql": "aiomysql"}[
        drivername.split("+")[0]
    ]
    if drivername.endswith("psycopg_async"):
        module = "psycopg"
    importlib.import_module(module)
    if drivername.startswith("sqlite"):
        yield f"{drivername}:///{tmp_path / 'shop.sqlite3'}", {}
        return
    backend = "postgresql" if drivername.startswith("postgresql") else "mariadb"
    url: URL = request.getfixturevalue(f"{backend}_url").set(drivername=drivername)
    settings: dict[str, Any] = {}
    options = url.query.get("options")
    if isinstance(options, str):  # the run's PostgreSQL schema
        schema = options.removeprefix("-csearch_path=")
        url = url.difference_update_query(["options"])
        settings = (
            {"server_settings": {"search_path": schema}}
            if drivername.endswith("asyncpg")
            else {"options": options}
        )
    yield url.render_as_string(hide_password=False), settings


@pytest.mark.parametrize("async_url", ASYNC_URLS, indirect=True)
def test_alembic_init_async_project(
    async_url: tuple[str, dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, connect_args = async_url
    p = f"as{secrets.token_hex(2)}_"
    monkeypatch.chdir(tmp_path)
    assert main(["alembic", "init", "migrations", "--url", url]) == 0
    env = tmp_path / "migrations" / "env.py"
    text = env.read_text()
    assert "async_engine_from_config" in text and "run_sync(do_run_migrations)" in text
    (tmp_path / f"{p}models.py").write_text(
        textwrap.dedent(
            f"""
            import uuid
            from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
            from sqla_ids import FormattedOrderNumber, uuid7_pk

            class Base(DeclarativeBase):
                pass

            class Order(Base):
                __tablename__ = "{p}orders"
                id: Mapped[uuid.UUID] = uuid7_pk()
                number: Mapped[str] = mapped_column(
                    FormattedOrderNumber("async", sequence="{p}numbers")
                )
            """
        )
    )
    env.write_text(
        text.replace(
            "target_metadata = None",
            f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
            f"from {p}models import Base\ntarget_metadata = Base.metadata",
        )
        .replace(
            "target_metadata=target_metadata,",
            f"target_metadata=target_metadata, version_table='{p}version', "
            # only this test's tables: other tests' share the database
            f"include_name=lambda n, t, _: t != 'table' or n.startswith('{p}'),",
        )
        .replace(
            "poolclass=pool.NullPool,", f"poolclass=pool.NullPool, connect_args={connect_args!r},"
        )
    )
    config = Config(str(tmp_path / "alembic.ini"))
    command.revision(config, message="orders", autogenerate=True, rev_id="0001")
    script = next((tmp_path / "migrations" / "versions").glob("0001_*.py")).read_text()
    assert "sqla_ids.UUIDv7()" in script and "import sqla_ids\n" in script
    command.upgrade(config, "head")
    models = importlib.import_module(f"{p}models")
    register_key("async", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")

    async def insert() -> list[str]:
        engine = create_async_engine(url, connect_args=connect_args)
        async with AsyncSession(engine) as session:
            session.add_all([models.Order(), models.Order()])
            await session.commit()
            numbers = (await session.execute(sa.select(models.Order.number))).scalars().all()
        await engine.dispose()
        return list(numbers)

    try:
        assert len(set(asyncio.run(insert()))) == 2
    finally:
        default_keyring.forget("async")
        sys.modules.pop(f"{p}models", None)
    command.check(config)
    command.downgrade(config, "base")

    async def tables() -> list[str]:
        engine = create_async_engine(url, connect_args=connect_args)
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: sa.inspect(c).get_table_names())
        await engine.dispose()
        return [n for n in names if n.startswith(p)]

    assert asyncio.run(tables()) == [f"{p}version"]
