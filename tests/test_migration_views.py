"""``recreate_views=True``: views over the migrated columns are dropped before the
change and recreated from their own definitions after it, on upgrade and downgrade.

The views are compared through names and values, never through keys (which
change type and value).
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import (
    migrate_pk_to_uuid7,
    plan_pk_migration,
    restore_pk_from_uuid7,
)
from sqla_ids.migration.core import state
from sqla_ids.migration.core.phases import Reached, Recorded


def _schema(engine: Engine, metadata: sa.MetaData, p: str) -> list[str]:
    """Parent and child, a view joining them and a view over that view; their names."""
    parent = sa.Table(
        f"{p}parent",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(20), nullable=False),
    )
    sa.Table(
        f"{p}child",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey(parent.c.id, name=f"{p}fk")),
        sa.Column("label", sa.String(20), nullable=False),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"INSERT INTO {p}parent (id, name) VALUES (1, 'ann'), (2, 'bob'), (3, 'cy')"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {p}child (id, parent_id, label) VALUES"
            " (1, 1, 'x'), (2, 1, 'y'), (3, 3, 'z'), (4, NULL, 'orphan')"
        )
        conn.exec_driver_sql(
            f"CREATE VIEW {p}family AS SELECT pa.id AS parent_key, pa.name, c.label"
            f" FROM {p}child c JOIN {p}parent pa ON pa.id = c.parent_id"
        )
        conn.exec_driver_sql(
            f"CREATE VIEW {p}names AS SELECT name, count(*) AS n FROM {p}family GROUP BY name"
        )
    return [f"{p}family", f"{p}names"]


def _rows(engine: Engine, p: str) -> dict[str, list[Any]]:
    with engine.connect() as conn:
        return {
            "family": sorted(conn.exec_driver_sql(f"SELECT name, label FROM {p}family").all()),
            "names": sorted(conn.exec_driver_sql(f"SELECT name, n FROM {p}names").all()),
            # The key column of the view follows the parent's key.
            "keys": sorted(
                conn.exec_driver_sql(
                    f"SELECT f.label FROM {p}family f JOIN {p}parent pa ON pa.id = f.parent_key"
                ).all()
            ),
        }


# quick cover: tests/test_migration_mariadb_offline.py::test_views_over_views_recreated_bases_first
@pytest.mark.slow_on("mariadb")
def test_views_recreated_on_upgrade_and_downgrade(engine: Engine, metadata: sa.MetaData) -> None:
    p = f"v{secrets.token_hex(2)}_"
    views = _schema(engine, metadata, p)
    try:
        before = _rows(engine, p)
        assert before["family"] == [("ann", "x"), ("ann", "y"), ("cy", "z")]
        with engine.connect() as conn:
            plan = plan_pk_migration(conn, f"{p}parent", recreate_views=True)
            conn.rollback()
        listed = [v.name for v in plan.views]
        # PostgreSQL tracks view-on-view dependencies; MariaDB and SQLite resolve a
        # view's views at query time, so only the view naming the tables is rebuilt.
        assert listed == (views if requires.view_dependencies(engine) else views[:1])
        assert f"{p}family (depends on " in plan.describe()
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, f"{p}parent", recreate_views=True, seed=3)
            conn.commit()
        assert _rows(engine, p) == before
        key_type = {c["name"]: c["type"] for c in sa.inspect(engine).get_columns(f"{p}family")}
        assert not isinstance(key_type["parent_key"], sa.Integer)
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
        assert _rows(engine, p) == before
        key_type = {c["name"]: c["type"] for c in sa.inspect(engine).get_columns(f"{p}family")}
        assert isinstance(key_type["parent_key"], sa.Integer)
    finally:
        with engine.begin() as conn:
            for view in reversed(views):
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {view}")


def test_postgresql_view_keeps_grants_and_comment(postgresql_engine: Engine) -> None:
    engine = postgresql_engine
    p = f"v{secrets.token_hex(2)}_"
    metadata = sa.MetaData()
    views = _schema(engine, metadata, p)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"GRANT SELECT ON {p}family TO PUBLIC")
            conn.exec_driver_sql(
                f"COMMENT ON VIEW {p}family IS 'who''s whose (100%%)'"
            )  # driver escape

        def extras() -> tuple[Any, ...]:
            with engine.connect() as conn:
                return tuple(
                    conn.exec_driver_sql(
                        "SELECT relacl::text, obj_description(oid, 'pg_class') FROM pg_class"
                        f" WHERE oid = '{p}family'::regclass"
                    ).one()
                )

        before = extras()
        assert before[1] == "who's whose (100%)"
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, f"{p}parent", recreate_views=True)
            conn.commit()
        assert extras() == before
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
        assert extras() == before
    finally:
        with engine.begin() as conn:
            for view in reversed(views):
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {view}")
        metadata.drop_all(engine)


def test_downgrade_refuses_a_new_view_unless_asked(engine: Engine, metadata: sa.MetaData) -> None:
    """A view created over the UUID key after the upgrade blocks the downgrade, by name,
    unless the upgrade was made with ``recreate_views=True``."""
    p = f"v{secrets.token_hex(2)}_"
    views = _schema(engine, metadata, p)
    try:
        with engine.begin() as conn:
            for view in reversed(views):
                conn.exec_driver_sql(f"DROP VIEW {view}")
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, f"{p}parent")
            conn.commit()
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE VIEW {p}late AS SELECT id, name FROM {p}parent")
        with engine.connect() as conn:
            try:
                restore_pk_from_uuid7(conn, f"{p}parent")
            except MigrationRefusedError as error:
                assert f"{p}late depends on " in str(error)
                assert "nothing was changed" in str(error)
            else:
                raise AssertionError("the downgrade should have been refused")
            conn.rollback()
            conn.exec_driver_sql(f"DROP VIEW {p}late")
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP VIEW IF EXISTS {p}late")


@pytest.mark.parametrize(
    "stop_at",
    [
        "swap:1",
        # Stopped after the parent's swap: with the slow tests (the quick loop
        # resumes the views at swap:1, and a MariaDB swap stopped after the
        # parent's in test_migration_crash.py, swap:2).
        pytest.param("swap:4", marks=pytest.mark.slow),
    ],
)
def test_mariadb_interrupted_swap_with_views_resumes(
    mariadb_engine: Engine, monkeypatch: pytest.MonkeyPatch, stop_at: str
) -> None:
    """MariaDB commits each DDL: a run stopped after the view was dropped (swap:1) or
    after the parent's swap and its trigger (swap:4) is finished by a re-run."""
    engine = mariadb_engine
    p = f"v{secrets.token_hex(2)}_"
    metadata = sa.MetaData()
    views = _schema(engine, metadata, p)
    try:
        before = _rows(engine, p)
        original_save = state.save

        def save(connection: Any, plan: Any, step: Recorded) -> None:
            if step.encode() == stop_at:
                raise RuntimeError("simulated crash")
            original_save(connection, plan, step)

        monkeypatch.setattr(state, "save", save)
        with engine.connect() as conn, pytest.raises(RuntimeError, match="simulated crash"):
            migrate_pk_to_uuid7(conn, f"{p}parent", recreate_views=True)
        monkeypatch.undo()
        with engine.connect() as conn:
            recorded = state.load(conn, f"{p}parent")
            assert recorded is not None and recorded[0].phase is Reached.SWAPPING
            migrate_pk_to_uuid7(conn, f"{p}parent")
        assert _rows(engine, p) == before
        with engine.connect() as conn:
            conn.exec_driver_sql(f"INSERT INTO {p}parent (name) VALUES ('dee')")
            key = conn.exec_driver_sql(f"SELECT id FROM {p}parent WHERE name = 'dee'").scalar()
            assert uuid.UUID(str(key)).version == 7
            restore_pk_from_uuid7(conn, f"{p}parent")
        assert _rows(engine, p) == before
    finally:
        with engine.begin() as conn:
            for view in reversed(views):
                conn.exec_driver_sql(f"DROP VIEW IF EXISTS {view}")
        metadata.drop_all(engine)
