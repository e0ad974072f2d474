"""An online key migration killed for real (SIGKILL) in each phase, then resumed.

The migration runs in a process of its own while the application writes; when
the database shows it has reached a phase (parent backfill half done, child
backfill half done, prepare started, swap about to start), the process is
killed with SIGKILL: its connections die with whatever they held open. The
same migration is then run again to the end with the application still
writing, and every relationship is checked, with nothing of the migration
left behind (no temporary column, invalid index or trigger).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
from online_app import SHOPS, Writer, check_relations, quoted
from sqlalchemy.engine import Connection, Engine
from test_migration_online_link_tables import DETAIL, TAG, _links

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
from sqla_ids.migration.core.state import steps

pytestmark = pytest.mark.slow

# The migration, alone in its process; the URL comes through the environment.
_MIGRATION = """
import json, os, sqlalchemy as sa
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
engine = sa.create_engine(os.environ["SQLA_IDS_KILL_URL"])
target = json.loads(os.environ["SQLA_IDS_KILL_TARGET"])
with engine.connect() as conn:
    migrate_pk_to_uuid7(conn, "shop s",
        PkMigrationOptions(online=True, batch_size=20, batch_pause=0.02, **target), phase="all")
"""

TARGETS: dict[str, dict[str, str]] = {
    "uuid7": {},
    # UUID192 keys segmented by an expression of the row.
    "uuid192": {"target": "uuid192", "segment_sql": "LENGTH(name)"},
}
"""The migration's options per target."""


def _temp_filled(conn: Connection, table: str) -> tuple[int, int]:
    """Rows of ``table`` whose migration column is filled, and all its rows."""
    quote = conn.dialect.identifier_preparer.quote
    columns = [
        c["name"]
        for c in sa.inspect(conn).get_columns(table)
        if str(c["name"]).startswith("sqla_ids_tmp_")
    ]
    if not columns:
        return 0, 0
    filled, total = conn.exec_driver_sql(
        f"SELECT count({quote(columns[0])}), count(*) FROM {quote(table)}"
    ).one()
    return int(filled), int(total)


def _step(conn: Connection) -> str:
    try:
        return steps(conn).get("shop s", "")
    except sa.exc.DBAPIError:  # no state table yet
        conn.rollback()
        return ""


def _half(table: str) -> Callable[[Connection], bool]:
    def reached(conn: Connection) -> bool:
        filled, total = _temp_filled(conn, table)
        return _step(conn) == "online:expanded" and 0 < filled < total

    return reached


def _step_is(step: str) -> Callable[[Connection], bool]:
    return lambda conn: _step(conn) == step


def _mid_swap(conn: Connection) -> bool:
    """The swap has begun (the old key has its new name) and is not recorded yet."""
    names = {c["name"] for c in sa.inspect(conn).get_columns("shop s")}
    return _step(conn) == "online:prepared" and "id_old" in names


KILL_POINTS: dict[str, Callable[[Connection], bool]] = {
    "parent backfill": _half("shop s"),
    "child backfill": _half("review"),
    "link table backfill": _half(TAG),
    "prepare": _step_is("online:backfilled"),
    "swap": _step_is("online:prepared"),
    # Only where DDL commits statement by statement (requires.commits_each_ddl):
    # a kill there leaves half a swap until the migration runs again.
    "mid-swap": _mid_swap,
}


def _kill_when(
    engine: Engine,
    reached: Callable[[Connection], bool],
    count: Callable[[], int] = lambda: 0,
    target: str = "uuid7",
) -> tuple[str, int]:
    """Start the migration in its own process and SIGKILL it once ``reached``.
    Returns the step it was killed at, and ``count()`` as the last poll saw
    ``reached`` not yet true (the application's transactions begun by then: a
    machine under load polls slowly, and the point is reached before it is
    seen)."""
    env = dict(
        os.environ,
        SQLA_IDS_KILL_URL=engine.url.render_as_string(hide_password=False),
        SQLA_IDS_KILL_TARGET=json.dumps(TARGETS[target]),
    )
    process = subprocess.Popen([sys.executable, "-c", _MIGRATION], env=env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            before = count()
            with engine.connect() as conn:
                if reached(conn):
                    process.send_signal(signal.SIGKILL)
                    process.wait()
                    return _step(conn), before
            time.sleep(0.005)
        pytest.fail(f"the migration ended ({process.returncode}) before the kill point")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


LEFTOVERS = {
    "postgresql": [
        # Invalid indexes (a CREATE INDEX CONCURRENTLY killed half-way) and triggers.
        "SELECT indexrelid::regclass::text FROM pg_index i JOIN pg_class c"
        " ON c.oid = i.indexrelid WHERE NOT i.indisvalid"
        " AND c.relnamespace = quote_ident(current_schema())::regnamespace",
        "SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
        " WHERE NOT t.tgisinternal"
        " AND c.relnamespace = quote_ident(current_schema())::regnamespace",
    ],
    "mariadb": [
        # Triggers, but the new key's default: a BEFORE INSERT trigger where a
        # column default cannot call a function (requires.function_in_default).
        "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
        " WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME <> 'shop s_id_uuid7'",
    ],
}
"""Per database: the catalog's queries for what a finished migration must not leave."""


def _leftovers(conn: Connection) -> list[Any]:
    """Objects of the migration still there after it finished."""
    found: list[Any] = []
    for table in ("shop s", "item", "review", TAG, DETAIL):
        found += [
            f"{table}.{c['name']}"
            for c in sa.inspect(conn).get_columns(table)
            if str(c["name"]).startswith("sqla_ids_")
        ]
    for sql in LEFTOVERS[requires.database_name(conn)]:
        found += conn.exec_driver_sql(sql).all()
    return found


@pytest.mark.parametrize(
    ("point", "target"),
    [
        *((point, "uuid7") for point in KILL_POINTS),
        *((point, "uuid192") for point in KILL_POINTS),
    ],
)
def test_killed_then_resumed_with_the_application_writing(
    online_shop: Engine, point: str, target: str
) -> None:
    engine, shops = online_shop, quoted(online_shop)
    if point == "mid-swap":  # (elsewhere the swap is one transaction: no half swap to kill)
        requires.commits_each_ddl.skip_unless(engine)
    _links(engine, pairs=False)  # link tables keyed by the reference (cascading)
    with engine.connect() as conn:
        links = _links_by_shop(conn)
    writer = Writer(engine, key_updates=False, shops=shops)
    writer.start()
    try:
        time.sleep(0.1)
        killed_at, killed = _kill_when(engine, KILL_POINTS[point], lambda: writer.n, target)
        time.sleep(0.1)
        assert killed_at != "done"
        options = PkMigrationOptions(online=True, batch_size=97, **TARGETS[target])
        # UUID192 keys have no server default: after the contract the
        # application makes them, so it stops writing before it.
        phase = "swap" if target == "uuid192" else "all"
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop s", options, phase=phase)
        resumed = writer.n
        time.sleep(0.1)
    finally:
        writer.stop.set()
        writer.join()
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", options, phase="contract")
    if requires.commits_each_ddl(engine) and point in ("swap", "mid-swap"):
        # Until the migration runs again, the application sees half a swap (some
        # columns already UUIDs): its statements may fail then, and only then.
        # A kill at "swap" may land inside it too: the process may have begun
        # its first ALTER when the database showed the step before.
        numbers = [int(failure.split(":")[0]) for failure in writer.failures]
        outside = [n for n in numbers if not killed - 1 <= n <= resumed + 1]
        assert outside == [], (killed, resumed, writer.failures[:5])
        writer.failures.clear()
    check_relations(engine, writer)
    with engine.connect() as conn:
        assert steps(conn)["shop s"] == "done"
        assert _leftovers(conn) == []
        kept = conn.exec_driver_sql(f"SELECT count(*) FROM {shops} WHERE id_old <= {SHOPS}")
        assert kept.scalar_one() == SHOPS - len(writer.deleted)  # every old key kept
        # Every link of a shop still there, with its shop (the keys moved to
        # the new column, every row walked by its two-column key).
        wanted = {k: v for k, v in links.items() if k[1] not in writer.deleted}
        assert _links_by_shop(conn) == wanted


def _links_by_shop(conn: Connection) -> dict[tuple[str, str], str]:
    """(link table, shop name) -> what the link says, over every link row
    (joined through the key: a row whose shop is gone would be missing)."""
    q = conn.dialect.identifier_preparer.quote
    found: dict[tuple[str, str], str] = {}
    rows = conn.exec_driver_sql(
        f"SELECT 't', s.name, t.tag FROM {q(TAG)} t JOIN {q('shop s')} s ON s.id = t.shop_id"
        f" UNION ALL SELECT 'd', s.name, d.detail FROM {q(DETAIL)} d"
        f" JOIN {q('shop s')} s ON s.id = d.shop_id"
    ).all()
    for kind, shop, value in rows:
        key = (f"{kind}:{value}" if kind == "t" else "d", str(shop))
        found[key] = str(value)
    count = sum(
        int(conn.exec_driver_sql(f"SELECT count(*) FROM {q(table)}").scalar_one())
        for table in (TAG, DETAIL)
    )
    assert count == len(rows) == len(found)
    return found


def test_a_parent_deleted_while_its_mapping_row_stayed_does_not_fail_the_contract(
    online_shop: Engine,
) -> None:
    """A parent deleted when no trigger watched (MariaDB's swap killed between two
    of its statements, each committed): its children's new references were set
    NULL by the foreign key, their old values still name it, and its mapping row
    stayed. The contract's check read that as a lost reference (CI, a kill
    mid-swap: "4 review.shop_id rows whose new value is not their parent's new
    key"); a parent that is gone says nothing about its children."""
    engine = online_shop
    q = engine.dialect.identifier_preparer.quote
    shop, mapping = quoted(engine), q("shop s_uuid7_map")
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="swap")
    with engine.begin() as conn:
        old_key, new_key = conn.execute(
            sa.text(f"SELECT id_old, id FROM {shop} WHERE name = 's7'")
        ).one()
        reviews = conn.execute(
            sa.text("SELECT count(*) FROM review WHERE shop_id = :k"), {"k": new_key}
        ).scalar_one()
        assert reviews > 0
        conn.execute(sa.text(f"DELETE FROM {shop} WHERE name = 's7'"))
        # What the turned-round triggers would have removed, had they been there.
        conn.execute(
            sa.text(f"INSERT INTO {mapping} (old_key, new_key) VALUES (:o, :n)"),
            {"o": old_key, "n": new_key},
        )
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="contract")
        assert steps(conn)["shop s"] == "done"
