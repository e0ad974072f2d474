"""Autovacuum made to hold tables during a test (PostgreSQL servers running it:
CI's throw-away PostgreSQL 14, 16, 17 and 18 clusters, ``.ci/run``:
``autovacuum_naptime=1``; a server with it off skips such tests, saying so)."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

#: Seconds autovacuum gets to start on a table (it wakes every autovacuum_naptime).
START_WITHIN = 60


def _q(conn: Connection, name: str) -> str:
    return str(conn.dialect.identifier_preparer.quote(name))


def require_autovacuum(engine: Engine) -> None:
    """Skip unless the server runs autovacuum at least every 5 s."""
    with engine.connect() as conn:
        on = conn.exec_driver_sql("SHOW autovacuum").scalar_one()
        nap = conn.exec_driver_sql(
            "SELECT extract(epoch FROM CAST(current_setting('autovacuum_naptime') AS interval))"
        ).scalar_one()
    if on != "on":
        pytest.skip(
            "autovacuum is off on this server (CI's PostgreSQL 14/16/17/18 clusters run it"
            " every second, and these tests there)"
        )
    if float(nap) > 5:
        pytest.skip(f"autovacuum_naptime is {nap} s on this server: these tests need <= 5 s")


def crawling(conn: Connection, tables: list[str], dead: str = "note = note || '.'") -> None:
    """Every row of ``tables`` dead once (``UPDATE ... SET <dead>``), and
    autovacuum slowed to a page per 100 ms on them: it takes them soon, and
    keeps them for the whole test (``tables``: leaf tables; a partitioned
    table has no storage to vacuum). Never an autovacuum ANALYZE: unlike a
    VACUUM, it holds a snapshot, which every ``CREATE INDEX CONCURRENTLY`` in
    the database waits for (crawling, it held the other tests' index builds
    for a minute)."""
    for table in tables:
        t = _q(conn, table)
        conn.exec_driver_sql(f"UPDATE {t} SET {dead}")
        conn.exec_driver_sql(
            f"ALTER TABLE {t} SET (autovacuum_vacuum_threshold = 0,"
            " autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_cost_delay = 100,"
            " autovacuum_vacuum_cost_limit = 1, autovacuum_analyze_threshold = 2000000000)"
        )


def vacuumed(engine: Engine, tables: list[str]) -> None:
    """Wait until an autovacuum worker holds a lock on one of ``tables``."""
    deadline = time.monotonic() + START_WITHIN
    with engine.connect() as conn:
        names = [_q(conn, table) for table in tables]
        while time.monotonic() < deadline:
            held = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
                    " WHERE l.locktype = 'relation' AND l.granted"
                    " AND a.backend_type = 'autovacuum worker' AND l.relation IN"
                    " (SELECT CAST(to_regclass(n) AS oid) FROM unnest(CAST(:n AS text[])) n)"
                ),
                {"n": names},
            ).scalar_one()
            conn.rollback()
            if held:
                return
            time.sleep(0.2)
    pytest.fail(f"autovacuum did not start on {tables} within {START_WITHIN} s")
