"""Autovacuum holding a table the online steps must lock (PostgreSQL).

After a backfill has rewritten every row of a table, autovacuum comes for it,
and its ``SHARE UPDATE EXCLUSIVE`` lock conflicts with every DDL of the
migration. PostgreSQL cancels an autovacuum for a session that has waited
``deadlock_timeout``; the migration's waits give up at half that (so that an
application transaction is never the deadlock victim), so each attempt failed
for as long as the vacuum ran: a 1M-row benchmark's contract retried 7 times
(13 s), and a table whose vacuum runs longer than the attempts last stopped
the migration. Now a step that met a lock timeout while autovacuum held one
of its tables waits once past the deadlock check, at once, and goes on.

Autovacuum is made to crawl over the tables (a cost delay per page), so it
holds them for the whole run, starting again after each cancellation. The
tests need a server running autovacuum often: CI's throw-away PostgreSQL 14,
16, 17 and 18 clusters (``.ci/run``: ``autovacuum_naptime=1``); a server with
it off (the system one on CI's machine) skips them, saying so.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from autovacuum import crawling, require_autovacuum, vacuumed
from sqlalchemy.engine import Connection, Engine

from sqla_ids.migration import PkMigrationOptions, add_uuid7_key, migrate_pk_to_uuid7
from sqla_ids.migration.backends import add_key as add_key_steps

PARENT = 'av "parent" ü'
CHILD = "av child's"
LOOSE = "av `loose`"
PARENTS = 20_000


def _q(conn: Connection, name: str) -> str:
    return str(conn.dialect.identifier_preparer.quote(name))


def _vacuum_messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    messages = [record.getMessage() for record in caplog.records]
    return [message for message in messages if "being vacuumed by the server" in message]


def test_the_online_migration_outlasts_autovacuum(postgresql_private_engine: Engine) -> None:
    """Autovacuum crawling over the parent and its child from before the expand
    to the contract (each would take it about 20 s): each step meeting it
    waits past the deadlock check -- in its lock block, or on its next attempt
    (logged, naming the table) -- and with three attempts per step, which
    autovacuum outlasted before (the expand gave up in under a second), the
    migration completes, every child still under its parent."""
    engine = postgresql_private_engine
    require_autovacuum(engine)
    with engine.begin() as conn:
        p, c = _q(conn, PARENT), _q(conn, CHILD)
        conn.exec_driver_sql(f"CREATE TABLE {p} (id bigserial PRIMARY KEY, note text NOT NULL)")
        conn.exec_driver_sql(
            f"CREATE TABLE {c} (id bigserial PRIMARY KEY, note text NOT NULL,"
            f" parent_id bigint NOT NULL REFERENCES {p} (id) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {p} (note) SELECT 'p' || g FROM generate_series(1, {PARENTS}) g"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {c} (note, parent_id) SELECT 'c' || g, 1 + (g * 7919) %% {PARENTS}"
            f" FROM generate_series(1, {2 * PARENTS}) g"
        )
        crawling(conn, [PARENT, CHILD])
    vacuumed(engine, [PARENT, CHILD])
    options = PkMigrationOptions(online=True, lock_timeout=0.2, swap_attempts=3)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, options)
    with engine.connect() as conn:
        p, c = _q(conn, PARENT), _q(conn, CHILD)
        # Every child's parent is the one its old reference named ('p<n>' for old key n).
        wrong = conn.exec_driver_sql(
            f"SELECT count(*) FROM {c} r JOIN {p} x ON x.id = r.parent_id"
            " WHERE x.note <> 'p' || (1 + (CAST(rtrim(substr(r.note, 2), '.') AS bigint)"
            f" * 7919) %% {PARENTS}) || '.'"
        ).scalar_one()
        joined = conn.exec_driver_sql(
            f"SELECT count(*) FROM {c} r JOIN {p} x ON x.id = r.parent_id"
        ).scalar_one()
        kind = conn.execute(
            sa.text(
                "SELECT data_type FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = :t AND column_name = 'id'"
            ),
            {"t": PARENT},
        ).scalar_one()
    assert (kind, joined, wrong) == ("uuid", 2 * PARENTS, 0)


def test_an_online_key_addition_outlasts_autovacuum(
    postgresql_database_engine: Engine,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same for ``add_uuid7_key(online=True)``'s steps, with three attempts
    each instead of twenty -- in a database of its own: its ``CREATE INDEX
    CONCURRENTLY`` waits for every older transaction of its database, the
    other tests' applications (another schema, the same database) included."""
    engine = postgresql_database_engine
    require_autovacuum(engine)
    monkeypatch.setattr(add_key_steps, "STEP_ATTEMPTS", 3)
    with engine.begin() as conn:
        t = _q(conn, LOOSE)
        conn.exec_driver_sql(f"CREATE TABLE {t} (n bigint NOT NULL UNIQUE, note text NOT NULL)")
        conn.exec_driver_sql(
            f"INSERT INTO {t} SELECT g, 'r' || g FROM generate_series(1, {2 * PARENTS}) g"
        )
        crawling(conn, [LOOSE])
    vacuumed(engine, [LOOSE])
    with caplog.at_level("INFO", logger="alembic.sqla_ids.migration"), engine.connect() as conn:
        add_uuid7_key(conn, LOOSE, column="k", online=True, order_by="n", lock_timeout=0.2)
    assert _vacuum_messages(caplog)
    with engine.connect() as conn:
        assert sa.inspect(conn).get_pk_constraint(LOOSE)["constrained_columns"] == ["k"]
        t = _q(conn, LOOSE)
        rows, keys = conn.exec_driver_sql(f"SELECT count(*), count(DISTINCT k) FROM {t}").one()
    assert rows == keys == 2 * PARENTS
