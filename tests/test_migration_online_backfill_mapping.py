"""PostgreSQL online backfill: set-wise mapping rows, quiet sync triggers.

The parent backfill writes its batch's mapping rows itself (one statement) and
its UPDATEs do not fire the sync triggers. A mapping row the application wrote
first -- a child inserted before its parent had a key, the "mapping-first"
rule of the triggers -- must be kept: children point at its key already.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
from sqla_ids.migration.backends.postgresql import online as pg_online
from sqla_ids.migration.backends.postgresql.online import PostgreSQLOnline

PARENT = 'pa"rent ü'
CHILD = "ch`ild's"


def _q(engine: Engine, name: str) -> str:
    return str(engine.dialect.identifier_preparer.quote(name))


def _schema(engine: Engine) -> None:
    p, c = _q(engine, PARENT), _q(engine, CHILD)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigint PRIMARY KEY, name text)")
        conn.exec_driver_sql(
            f"CREATE TABLE {c} (id bigint PRIMARY KEY, {_q(engine, 'pa rent')} bigint"
            f" REFERENCES {p} (id) DEFERRABLE INITIALLY DEFERRED)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {p} SELECT g, 'p' || g FROM generate_series(1, 300) g WHERE g <> 150"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c} SELECT g, 1 + mod(g, 140) FROM generate_series(1, 500) g"
        )


@pytest.mark.slow
def test_backfill_keeps_a_mapping_row_the_application_wrote_first(
    postgresql_private_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = postgresql_private_engine
    _schema(engine)
    p, c = _q(engine, PARENT), _q(engine, CHILD)
    mapping = _q(engine, f"{PARENT}_uuid7_map")
    original = pg_online.ParentKeys.start
    seen: dict[str, Any] = {}

    def start(self: pg_online.ParentKeys, connection: sa.Connection) -> int:
        if not seen:
            # The application, between the expand and the backfill: a child of
            # parent 150, which does not exist yet, chooses its key in the
            # mapping; then parent 299 (not backfilled) takes the key 150.
            tmp = _q(engine, self.plan.temp_column(CHILD, "pa rent"))
            with engine.begin() as app:
                app.exec_driver_sql(
                    f"INSERT INTO {c} (id, {_q(engine, 'pa rent')}) VALUES (9001, 150)"
                )
                seen["chosen"] = app.exec_driver_sql(
                    f"SELECT {tmp} FROM {c} WHERE id = 9001"
                ).scalar_one()
                app.exec_driver_sql(f"UPDATE {p} SET id = 150 WHERE id = 299")
        return original(self, connection)

    monkeypatch.setattr(pg_online.ParentKeys, "start", start)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(
            conn, PARENT, PkMigrationOptions(online=True, batch_size=7), phase="prepare"
        )
    chosen = seen["chosen"]
    assert isinstance(chosen, uuid.UUID)
    with engine.connect() as conn:
        tmp = conn.exec_driver_sql(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %(t)s"
            " AND column_name LIKE 'sqla_ids_tmp_%%'",
            {"t": PARENT},
        ).scalar_one()
        keys = dict(conn.exec_driver_sql(f"SELECT id, {_q(engine, tmp)} FROM {p}").all())
        mapped = dict(conn.exec_driver_sql(f"SELECT old_key, new_key FROM {mapping}").all())
        # The application's choice kept, in the parent and in the mapping.
        assert keys[150] == chosen and mapped[150] == chosen
        # Every parent has its key, the mapping says the same, nothing more.
        assert mapped == keys and None not in keys.values()
        # The backfilled keys sort like the old keys.
        backfilled = [keys[k] for k in sorted(keys) if k != 150]
        assert backfilled == sorted(backfilled) and chosen > backfilled[-1]
        # Children follow their parents' new keys.
        child_tmp = conn.exec_driver_sql(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = %(t)s"
            " AND column_name LIKE 'sqla_ids_tmp_%%'",
            {"t": CHILD},
        ).scalar_one()
        wrong = conn.exec_driver_sql(
            f"SELECT count(*) FROM {c} JOIN {p} ON {p}.id = {c}.{_q(engine, 'pa rent')}"
            f" WHERE {c}.{_q(engine, child_tmp)} IS DISTINCT FROM {p}.{_q(engine, tmp)}"
        ).scalar_one()
        assert wrong == 0


def test_sync_triggers_skip_only_the_backfill_sessions(postgresql_private_engine: Engine) -> None:
    """After the expand, an application session's writes are followed; a session
    with the backfill's setting is not (it writes the mapping itself)."""
    engine = postgresql_private_engine
    _schema(engine)
    p = _q(engine, PARENT)
    mapping = _q(engine, f"{PARENT}_uuid7_map")
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, PkMigrationOptions(online=True), phase="prepare")
    with engine.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO {p} (id) VALUES (5001)")
        conn.exec_driver_sql(f"SET LOCAL {pg_online.BACKFILL_SETTING} = on")
        conn.exec_driver_sql(f"INSERT INTO {p} (id) VALUES (5002)")
    with engine.connect() as conn:
        mapped = set(
            conn.exec_driver_sql(f"SELECT old_key FROM {mapping} WHERE old_key > 5000").scalars()
        )
    assert mapped == {5001}


@pytest.mark.parametrize(
    ("seconds", "expected"), [(0, "0"), (0.0001, "1ms"), (0.2, "200ms"), (5, "500ms")]
)
def test_lock_timeout_is_capped_at_half_the_deadlock_timeout(
    postgresql_private_engine: Engine, seconds: float, expected: str
) -> None:
    with postgresql_private_engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL deadlock_timeout = '1s'")
        PostgreSQLOnline().set_lock_timeout(conn, seconds, local=True)
        assert conn.exec_driver_sql("SHOW lock_timeout").scalar_one() == expected
        conn.exec_driver_sql("SET LOCAL deadlock_timeout = 3000")  # milliseconds
        PostgreSQLOnline().set_lock_timeout(conn, 2, local=True)
        assert conn.exec_driver_sql("SHOW lock_timeout").scalar_one() == "1500ms"
