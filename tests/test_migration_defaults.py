"""The migrated key's server default: UUIDv7 from the server after the upgrade, the
original identity/serial/auto_increment after the downgrade.

Rows are inserted with plain SQL that leaves the key out, as any other client
(a psql session, a reporting job) would.
"""

from __future__ import annotations

import logging
import secrets
import uuid
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.migration import migrate_pk_to_uuid7, plan_pk_migration, restore_pk_from_uuid7


def _setup(engine: Engine, p: str, key: sa.Column[Any]) -> sa.MetaData:
    metadata = sa.MetaData()
    parent = sa.Table(f"{p}parent", metadata, key, sa.Column("name", sa.String(20)))
    sa.Table(
        f"{p}child",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey(parent.c.id), nullable=False),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        for name in ("a", "b", "c"):  # keys 1, 2, 3 from the key's own default
            conn.exec_driver_sql(f"INSERT INTO {p}parent (name) VALUES ('{name}')")
        conn.exec_driver_sql(f"INSERT INTO {p}child (id, parent_id) VALUES (1, 1), (2, 3)")
    return metadata


def _insert_without_key(engine: Engine, p: str, *names: str) -> list[Any]:
    """Insert rows leaving the key out; return their keys in insertion order."""
    with engine.begin() as conn:
        for name in names:
            conn.exec_driver_sql(f"INSERT INTO {p}parent (name) VALUES ('{name}')")
        rows = dict(conn.exec_driver_sql(f"SELECT name, id FROM {p}parent").all())
    return [rows[n] for n in names]


def _as_uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))


KEYS = {
    "postgresql-serial": ("postgresql", lambda: sa.Column("id", sa.Integer, primary_key=True)),
    "postgresql-identity": (
        "postgresql",
        lambda: sa.Column("id", sa.Integer, sa.Identity(always=True), primary_key=True),
    ),
    "mariadb-auto_increment": (
        "mariadb",
        lambda: sa.Column("id", sa.Integer, primary_key=True),
    ),
}


# quick cover: the [postgresql-identity] and [postgresql-serial] cases (the
# default's swap and return are the engine's own); MariaDB's AUTO_INCREMENT key
# migrated and back: tests/test_migration_views.py::
#   test_mariadb_interrupted_swap_with_views_resumes[swap:1], and
#   tests/test_migration_mariadb_offline.py::test_backtick_in_key_name_round_trip_keeps_everything
@pytest.mark.slow_on("mariadb")
@pytest.mark.parametrize("case", sorted(KEYS))
def test_server_fills_uuid7_then_the_old_default_returns(
    request: pytest.FixtureRequest, case: str
) -> None:
    dialect, key = KEYS[case]
    engine: Engine = request.getfixturevalue(f"{dialect}_engine")
    p = f"d{secrets.token_hex(2)}_"
    metadata = _setup(engine, p, key())
    try:
        with engine.connect() as conn:
            plan = migrate_pk_to_uuid7(conn, f"{p}parent", seed=5)
            conn.commit()
        assert plan.new_default.kind == "uuid7_function"
        with engine.connect() as conn:
            migrated = [
                _as_uuid(v) for v in conn.exec_driver_sql(f"SELECT id FROM {p}parent").scalars()
            ]
        first, second = map(_as_uuid, _insert_without_key(engine, p, "new1", "new2"))
        assert first.version == second.version == 7
        assert max(migrated) < first < second
        with engine.begin() as conn:  # the new key is usable as a reference at once
            conn.exec_driver_sql(f"INSERT INTO {p}child (id, parent_id) VALUES (3, '{second}')")
        if not requires.function_in_default(engine):  # a BEFORE INSERT trigger fills the key
            with engine.connect() as conn:
                assert (
                    conn.exec_driver_sql(
                        "SELECT count(*) FROM information_schema.TRIGGERS"
                        f" WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = '{p}parent'"
                    ).scalar()
                    == 1
                )

        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
        # The rows created meanwhile got keys 4 and 5; the default continues after them.
        assert _insert_without_key(engine, p, "after") == [6]
        with engine.connect() as conn:
            keys = dict(conn.exec_driver_sql(f"SELECT name, id FROM {p}parent").all())
            assert keys == {"a": 1, "b": 2, "c": 3, "new1": 4, "new2": 5, "after": 6}
            children = sorted(conn.exec_driver_sql(f"SELECT id, parent_id FROM {p}child").all())
            assert children == [(1, 1), (2, 3), (3, 5)]
            if not requires.function_in_default(engine):  # the trigger went with it
                assert not conn.exec_driver_sql(
                    "SELECT count(*) FROM information_schema.TRIGGERS"
                    f" WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = '{p}parent'"
                ).scalar()
            # The shared function stays: other tables may use it.
            assert conn.exec_driver_sql("SELECT sqla_ids_uuid7()").scalar() is not None
    finally:
        metadata.drop_all(engine)


def test_explicit_or_no_default(postgresql_engine: Engine) -> None:
    engine = postgresql_engine
    p = f"d{secrets.token_hex(2)}_"
    metadata = _setup(engine, p, sa.Column("id", sa.Integer, primary_key=True))
    try:
        with engine.connect() as conn:
            with pytest.raises(ValueError, match="server_default must be True"):
                plan_pk_migration(conn, f"{p}parent", server_default=None)  # type: ignore[arg-type]
            plan = migrate_pk_to_uuid7(conn, f"{p}parent", server_default="gen_random_uuid()")
            conn.commit()
        assert (plan.new_default.kind, plan.new_default.sql) == ("expression", "gen_random_uuid()")
        (key,) = _insert_without_key(engine, p, "explicit")
        assert _as_uuid(key).version == 4  # the caller's expression won
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
            plan = migrate_pk_to_uuid7(conn, f"{p}parent", server_default=False)
            conn.commit()
        assert plan.new_default.kind == "none"
        with pytest.raises(sa.exc.IntegrityError):
            _insert_without_key(engine, p, "refused")
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
    finally:
        metadata.drop_all(engine)


def test_sqlite_gets_no_server_default_and_says_so(
    sqlite_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    engine = sqlite_engine
    p = f"d{secrets.token_hex(2)}_"
    metadata = _setup(engine, p, sa.Column("id", sa.Integer, primary_key=True))
    try:
        with engine.connect() as conn, caplog.at_level(logging.WARNING):
            plan = migrate_pk_to_uuid7(conn, f"{p}parent")
            conn.commit()
        assert plan.new_default.kind == "none"
        assert "uuid7_pk()" in caplog.text and f"{p}parent.id gets no server default" in caplog.text
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
            # An explicit expression is written into the rebuilt table.
            migrate_pk_to_uuid7(conn, f"{p}parent", server_default="lower(hex(randomblob(16)))")
            conn.commit()
        (key,) = _insert_without_key(engine, p, "explicit")
        assert len(key) == 32
        with engine.connect() as conn:
            conn.exec_driver_sql(f"DELETE FROM {p}parent WHERE name = 'explicit'")
            restore_pk_from_uuid7(conn, f"{p}parent")
            conn.commit()
        assert _insert_without_key(engine, p, "after") == [4]
    finally:
        metadata.drop_all(engine)
