"""The Alembic side: ``sqla-ids alembic init``, ``op.migrate_pk_to_uuid7`` through
``alembic upgrade``/``downgrade``, offline mode, and the autogenerate rewriter."""

from __future__ import annotations

import secrets
import textwrap
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import produce_migrations, render_python_code
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Engine

from sqla_ids.alembic.rewriter import rewrite_pk_migrations
from sqla_ids.cli import main
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.types.uuid7 import UUIDv7
from sqla_ids.types.uuid192 import UUID192Type


def _tables(metadata: sa.MetaData, p: str, key_type: sa.types.TypeEngine[object]) -> None:
    parent = sa.Table(
        f"{p}orders",
        metadata,
        sa.Column("id", key_type, primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True)),
    )
    sa.Table(
        f"{p}items",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("order_id", key_type, sa.ForeignKey(parent.c.id), nullable=False),
    )


@pytest.fixture
def project(engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Config:
    """An Alembic project made by ``sqla-ids alembic init``, pointing at ``engine``."""
    monkeypatch.chdir(tmp_path)
    assert main(["alembic", "init", "migrations"]) == 0
    env = (tmp_path / "migrations" / "env.py").read_text()
    assert "rewrite_pk_migrations" in env and "render_item" in env
    config = Config(str(tmp_path / "alembic.ini"))
    url = engine.url.render_as_string(hide_password=False)
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@pytest.mark.parametrize(
    "target",
    [
        "",
        # (UUID192 keys through the operation: the MariaDB case with the slow tests)
        pytest.param(
            ', target="uuid192", segment_sql="id % 4"', marks=pytest.mark.slow_on("mariadb")
        ),
    ],
    ids=["uuid7", "uuid192"],
)
def test_upgrade_and_downgrade_through_alembic(
    engine: Engine, metadata: sa.MetaData, project: Config, tmp_path: Path, target: str
) -> None:
    p = f"a{secrets.token_hex(2)}_"
    _tables(metadata, p, sa.Integer())
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(metadata.tables[f"{p}orders"].insert(), [{"id": i} for i in range(1, 51)])
        conn.execute(
            metadata.tables[f"{p}items"].insert(),
            [{"id": i, "order_id": i % 50 + 1} for i in range(1, 121)],
        )
    (tmp_path / "migrations" / "versions" / "0001_uuid.py").write_text(
        textwrap.dedent(
            f"""
            from alembic import op

            revision = "0001"
            down_revision = None
            branch_labels = None
            depends_on = None


            def upgrade():
                op.migrate_pk_to_uuid7("{p}orders", batch_size=16, seed="alembic"{target})


            def downgrade():
                op.restore_pk_from_uuid7("{p}orders")
            """
        )
    )
    with pytest.raises(MigrationRefusedError, match="offline --sql mode"):
        command.upgrade(project, "head", sql=True)
    command.upgrade(project, "head")
    inspector = sa.inspect(engine)
    columns = {c["name"]: c for c in inspector.get_columns(f"{p}orders")}
    assert "id_old" in columns
    assert not isinstance(columns["id"]["type"], sa.Integer)
    with engine.connect() as conn:
        pairs = conn.exec_driver_sql(
            f"SELECT i.id, o.id_old FROM {p}items i JOIN {p}orders o ON o.id = i.order_id"
        ).all()
    assert sorted(pairs) == [(i, i % 50 + 1) for i in range(1, 121)]
    command.downgrade(project, "base")
    inspector = sa.inspect(engine)
    columns = {c["name"]: c for c in inspector.get_columns(f"{p}orders")}
    assert set(columns) == {"id", "created_at"}
    assert isinstance(columns["id"]["type"], sa.Integer)
    with engine.connect() as conn:
        pairs = conn.exec_driver_sql(f"SELECT id, order_id FROM {p}items").all()
    assert sorted(pairs) == [(i, i % 50 + 1) for i in range(1, 121)]


@pytest.mark.parametrize(
    ("key_type", "rendered"),
    [(UUIDv7, ""), (UUID192Type, ", target='uuid192'")],
    ids=["UUIDv7", "UUID192Type"],
)
def test_autogenerate_rewrites_key_change_into_the_operation(
    sqlite_engine: Engine, key_type: type[sa.types.TypeEngine[object]], rendered: str
) -> None:
    p = f"g{secrets.token_hex(2)}_"
    database = sa.MetaData()
    _tables(database, p, sa.Integer())
    database.create_all(sqlite_engine)
    model = sa.MetaData()
    _tables(model, p, key_type())
    try:
        with sqlite_engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            script = produce_migrations(context, model)
            assert "alter_column" in render_python_code(script.upgrade_ops)
            rewrite_pk_migrations(context, None, [script])
            code = render_python_code(script.upgrade_ops)
            down = render_python_code(script.downgrade_ops)
    finally:
        database.drop_all(sqlite_engine)
    assert f"op.migrate_pk_to_uuid7('{p}orders'{rendered})" in code
    assert "alter_column" not in code
    assert f"op.restore_pk_from_uuid7('{p}orders')" in down
    assert "alter_column" not in down


def test_autogenerate_rewrites_the_key_change_with_a_backtick_in_the_tables_names(
    engine: Engine,
) -> None:
    """On every database. MariaDB: SQLAlchemy's reflection leaves out a foreign
    key whose line in ``SHOW CREATE TABLE`` holds a backtick (2.1.9: here the
    names made from the tables'), so the referencing column was not known to
    follow the key: its ``alter_column`` stayed beside ``migrate_pk_to_uuid7``.
    (A backtick in a column's name: Alembic's comparison itself reads the
    doubled name SQLAlchemy reflects, and proposes a new column.)"""
    p = f"g{secrets.token_hex(2)}`x_"
    database = sa.MetaData()
    _tables(database, p, sa.Integer())
    database.create_all(engine)
    model = sa.MetaData()
    _tables(model, p, UUIDv7())
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            script = produce_migrations(context, model)
            rewrite_pk_migrations(context, None, [script])
            code = render_python_code(script.upgrade_ops)
    finally:
        database.drop_all(engine)
    assert f"op.migrate_pk_to_uuid7('{p}orders')" in code
    assert "alter_column" not in code, code


def test_autogenerate_leaves_old_keys_and_mapping_alone(
    engine: Engine, metadata: sa.MetaData, project: Config, tmp_path: Path
) -> None:
    """After a migration, autogenerate proposes neither dropping the old-key column nor
    the mapping table -- custom names included (read from the state table)."""
    p = f"g{secrets.token_hex(2)}_"
    _tables(metadata, p, sa.Integer())
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(metadata.tables[f"{p}orders"].insert(), [{"id": i} for i in range(1, 6)])
    from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7

    with engine.connect() as conn:
        migrate_pk_to_uuid7(
            conn, f"{p}orders", old_column=f"{p}legacy", mapping_table=f"{p}keys_backup"
        )
        conn.commit()
    try:
        models = f"models_{p}"
        (tmp_path / f"{models}.py").write_text(
            textwrap.dedent(
                f"""
                import sqlalchemy as sa
                from sqla_ids.types.uuid7 import UUIDv7

                metadata = sa.MetaData()
                orders = sa.Table(
                    "{p}orders", metadata,
                    sa.Column("id", UUIDv7(), primary_key=True),
                    sa.Column("created_at", sa.DateTime(timezone=True)),
                )
                sa.Table(
                    "{p}items", metadata,
                    sa.Column("id", sa.Integer, primary_key=True),
                    sa.Column("order_id", UUIDv7(), sa.ForeignKey(orders.c.id), nullable=False),
                )
                """
            )
        )
        env = tmp_path / "migrations" / "env.py"
        env.write_text(
            env.read_text().replace(
                "target_metadata = None",
                f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
                f"from {models} import metadata as target_metadata",
            )
        )
        command.revision(project, message="check", autogenerate=True, rev_id="0009")
        script = next((tmp_path / "migrations" / "versions").glob("0009_*.py")).read_text()
        assert f"{p}legacy" not in script
        assert f"{p}keys_backup" not in script
    finally:
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}orders")
            conn.commit()
