"""Issue 32, items 7 and 8.

7. After a key migration, every way Alembic users compare -- ``compare_metadata``
   on a bare ``MigrationContext``, ``alembic check`` with an ``env.py`` that has no
   ``include_object``, pytest-alembic's model/DDL check -- finds no difference
   (``<key>_old`` and the mapping table are sqla_ids' own).
8. Autogenerating a key change: the operation names a candidate
   ``timestamp_column`` in a comment, stays out of batch blocks, warns about model
   columns still referencing the key as integers, and on MariaDB several tables
   become one ``op.migrate_pks_to_uuid7([...])``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from requirements import DATABASES
from sqlalchemy.engine import URL, Engine

import sqla_ids.alembic
from sqla_ids import UUIDv7
from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7
from tests.alembic_project import project, revision_text


def _only(prefix: str) -> Any:
    """``include_name`` for this test's tables (other tests' share the database)."""
    return lambda name, type_, parent: type_ != "table" or name.startswith(prefix)


def _schema(
    metadata: sa.MetaData,
    p: str,
    key: sa.types.TypeEngine[object],
    ref: sa.types.TypeEngine[object],
) -> None:
    for parent in (f"{p}orders", f"{p}customers"):
        sa.Table(
            parent,
            metadata,
            sa.Column("id", key, primary_key=True),
            sa.Column("created_at", sa.DateTime()),
        )
    sa.Table(
        f"{p}items",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("order_id", ref, sa.ForeignKey(f"{p}orders.id")),
    )


@pytest.fixture(scope="module", params=DATABASES)
def migrated_tables(request: pytest.FixtureRequest) -> Iterator[tuple[Engine, str]]:
    """An engine (once per database) and the prefix of tables whose
    ``orders``/``customers`` keys were migrated: made once for the three
    comparisons below, which only read them (each test's ``alembic_version``
    is its own and dropped)."""
    url: URL = request.getfixturevalue(f"{request.param}_url")
    engine = sa.create_engine(url)
    p = f"c{secrets.token_hex(2)}_"
    database = sa.MetaData()
    _schema(database, p, sa.Integer(), sa.Integer())
    database.create_all(engine)
    try:
        with engine.begin() as conn:
            conn.execute(database.tables[f"{p}orders"].insert(), [{"id": 1}, {"id": 2}])
            conn.execute(database.tables[f"{p}items"].insert(), [{"id": 1, "order_id": 2}])
        with engine.connect() as conn:
            for table in (f"{p}orders", f"{p}customers"):
                migrate_pk_to_uuid7(conn, table)
                conn.commit()
        yield engine, p
        with engine.connect() as conn:
            for table in (f"{p}customers", f"{p}orders"):
                restore_pk_from_uuid7(conn, table)
                conn.commit()
        database.drop_all(engine)
    finally:
        engine.dispose()


@pytest.fixture
def migrated(migrated_tables: tuple[Engine, str]) -> tuple[str, sa.MetaData]:
    """The migrated tables' prefix and models matching them, new for each test
    (a test may add a table to its models)."""
    p = migrated_tables[1]
    model = sa.MetaData()
    _schema(model, p, UUIDv7(), UUIDv7())
    return p, model


def test_compare_metadata_without_include_object(
    migrated_tables: tuple[Engine, str], migrated: tuple[str, sa.MetaData]
) -> None:
    engine, _ = migrated_tables
    _, model = migrated
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), model)
    mine = [d for d in diffs if migrated[0] in repr(d) or "sqla_ids" in repr(d)]
    assert mine == []


def test_alembic_check_without_include_object(
    migrated_tables: tuple[Engine, str], migrated: tuple[str, sa.MetaData], tmp_path: Path
) -> None:
    engine, _ = migrated_tables
    p, model = migrated
    with engine.connect() as conn:
        command.check(project(tmp_path, conn, model, include_name=_only(p)))


def test_pytest_alembic_model_check(
    migrated_tables: tuple[Engine, str], migrated: tuple[str, sa.MetaData], tmp_path: Path
) -> None:
    engine, _ = migrated_tables
    from pytest_alembic import Config as PytestAlembicConfig
    from pytest_alembic import runner
    from pytest_alembic.tests import test_model_definitions_match_ddl

    p, model = migrated
    with engine.connect() as conn:
        config = project(tmp_path, conn, model, include_name=_only(p))
        # An empty history: the upgrade does nothing, the comparison must find nothing.
        (tmp_path / "migrations" / "versions" / "0001_empty.py").write_text(
            'revision = "0001"\ndown_revision = None\n\n'
            "def upgrade():\n    pass\n\n\ndef downgrade():\n    pass\n"
        )
        with runner(PytestAlembicConfig(alembic_config=config), conn) as alembic_runner:
            test_model_definitions_match_ddl(alembic_runner)
        # The same check does see a real difference.
        sa.Table(f"{p}new", model, sa.Column("id", sa.Integer, primary_key=True))
        with (
            runner(PytestAlembicConfig(alembic_config=config), conn) as alembic_runner,
            pytest.raises(Exception, match="out of sync"),
        ):
            test_model_definitions_match_ddl(alembic_runner)
        conn.rollback()
        conn.exec_driver_sql("DROP TABLE IF EXISTS alembic_version")
        conn.commit()


@pytest.mark.parametrize(
    "render_as_batch",
    [
        pytest.param(True, id="batch"),
        # quick cover: the [mariadb-batch] case (the same comparison and rewrite
        # on MariaDB, rendered for batch mode), and [postgresql-plain]
        pytest.param(False, id="plain", marks=pytest.mark.slow_on("mariadb")),
    ],
)
def test_autogenerated_key_migration(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture, render_as_batch: bool
) -> None:
    p = f"k{secrets.token_hex(2)}_"
    database = sa.MetaData()
    _schema(database, p, sa.Integer(), sa.Integer())
    database.create_all(engine)
    model = sa.MetaData()
    _schema(model, p, UUIDv7(), sa.Integer())  # the references left as integers
    try:
        with engine.connect() as conn:
            config = project(
                tmp_path,
                conn,
                model,
                compare_type=True,
                render_as_batch=render_as_batch,
                include_name=_only(p),
                **sqla_ids.alembic.hooks,
            )
            with caplog.at_level(logging.WARNING, logger="alembic.sqla_ids.autogenerate"):
                text = revision_text(config, "0001")
            conn.rollback()
    finally:
        database.drop_all(engine)
    upgrade, downgrade = text.split("def downgrade")
    assert "alter_column" not in upgrade
    assert f"# {p}orders: timestamp_column='created_at' would take" in upgrade
    if engine.dialect.name in ("mysql", "mariadb"):
        assert (
            f"op.migrate_pks_to_uuid7(['{p}customers', '{p}orders'])" in upgrade
            or f"op.migrate_pks_to_uuid7(['{p}orders', '{p}customers'])" in upgrade
        ), upgrade
        assert "op.restore_pks_from_uuid7([" in downgrade
    else:
        assert f"op.migrate_pk_to_uuid7('{p}orders')" in upgrade
        assert f"op.restore_pk_from_uuid7('{p}orders')" in downgrade
    for line in upgrade.splitlines():  # never inside a batch block
        if "migrate_pk" in line:
            assert line.startswith("    op."), line
    (warning,) = [r for r in caplog.records if "references" in r.getMessage()]
    assert f"{p}items.order_id references {p}orders.id" in warning.getMessage()
