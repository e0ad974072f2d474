"""Online key migration on a real PostgreSQL while an application keeps writing.

A writer thread inserts parents and children, moves children to other parents,
changes an old key (ON UPDATE CASCADE) and deletes parents (ON DELETE CASCADE /
SET NULL) during every phase; its statements never name a key's type, so they
work before and after the swap, as application code must (docs/migration.md).
At the end every relationship the writer made is checked under the new keys.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from online_app import (
    SHOPS,
    Flood,
    Writer,
    alembic_project,
    check_changing_batch_sizes,
    check_relations,
    postgresql_schema,
)
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration import online as online_module
from sqla_ids.migration.model import TEMP_PREFIX, name_suffix
from sqla_ids.migration.state import steps

TEMP_KEY = f"{TEMP_PREFIX}{name_suffix('shop s')}_0"
"""The new key's column before the swap."""


@pytest.fixture
def pg(postgresql_private_engine: Engine) -> Engine:
    postgresql_schema(postgresql_private_engine)
    return postgresql_private_engine


def _check(engine: Engine, writer: Writer) -> None:
    """Every relationship holds under the new keys, which are PostgreSQL uuids."""
    check_relations(engine, writer)
    with engine.connect() as conn:
        types = dict(
            conn.exec_driver_sql(
                "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND column_name IN ('id', 'shop_id')"
            ).all()
        )
    assert types["shop s.id"] == "uuid" and types["item.shop_id"] == "uuid"
    assert types["review.shop_id"] == "uuid"


def _run_with_writer(engine: Engine, key_updates: bool, *phases: str, **options: Any) -> Writer:
    writer = Writer(engine, key_updates)
    writer.start()
    try:
        time.sleep(0.2)
        for phase in phases:
            with engine.connect() as conn:
                migrate_pk_to_uuid7(
                    conn,
                    "shop s",
                    PkMigrationOptions(online=True, batch_size=97, **options),
                    phase=phase,  # type: ignore[arg-type]
                )
            time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    return writer


def test_every_phase_with_the_application_writing(pg: Engine) -> None:
    writer = Writer(pg, key_updates=True)
    writer.start()
    try:
        time.sleep(0.2)
        with pg.connect() as conn:
            migrate_pk_to_uuid7(
                conn, "shop s", PkMigrationOptions(online=True, batch_size=97), phase="prepare"
            )
        time.sleep(0.2)
        writer.key_updates = False  # after the swap the key is a UUID: no arithmetic on it
        with pg.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="swap")
            assert steps(conn)["shop s"] == "online:swapped"
        time.sleep(0.3)
        with pg.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="contract")
            assert steps(conn)["shop s"] == "done"
        time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    _check(pg, writer)
    with pg.connect() as conn:
        comment = conn.exec_driver_sql(
            "SELECT col_description('\"shop s\"'::regclass, attnum) FROM pg_attribute"
            " WHERE attrelid = '\"shop s\"'::regclass AND attname = 'id'"
        ).scalar()
        assert comment == "the shop's key"
        names = {
            row[0]
            for row in conn.exec_driver_sql(
                "SELECT conname FROM pg_constraint WHERE conrelid IN"
                " ('item'::regclass, 'review'::regclass, '\"shop s\"'::regclass)"
            )
        }
        assert {"item_shop_id_fkey", "review_shop_id_fkey", "shop s_pkey"} <= names
        assert not [n for n in names if n.startswith("sqla_ids_")]
        indexes = {r[0] for r in conn.exec_driver_sql("SELECT indexname FROM pg_indexes")}
        assert "item_shop" in indexes
        cols = {
            r[0]
            for r in conn.exec_driver_sql(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'item'"
                " AND table_schema = current_schema()"
            )
        }
        assert cols == {"id", "shop_id", "label"}
        # New rows get their key from the server; the old key keeps numbering.
        new = conn.exec_driver_sql(
            "INSERT INTO \"shop s\" (name) VALUES ('after') RETURNING id, id_old"
        ).one()
        assert new[0].version == 7 and new[1] is not None


@pytest.mark.slow
def test_killed_during_backfill_then_resumed(pg: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    original = online_module.OnlineRun.pause

    def crash(self: online_module.OnlineRun) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")
        original(self)

    monkeypatch.setattr(online_module.OnlineRun, "pause", crash)
    with pytest.raises(KeyboardInterrupt), pg.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True, batch_size=50))
    with pg.connect() as conn:
        assert steps(conn)["shop s"] == "online:expanded"
        half = conn.exec_driver_sql(
            f'SELECT count(*) FROM "shop s" WHERE {TEMP_KEY} IS NOT NULL'
        ).scalar_one()
        assert 0 < half < SHOPS
    monkeypatch.setattr(online_module.OnlineRun, "pause", original)
    writer = _run_with_writer(pg, False, "all")
    _check(pg, writer)
    with pg.connect() as conn:
        keys = [r[0] for r in conn.exec_driver_sql('SELECT id FROM "shop s" ORDER BY id_old')]
        seeded = keys[: SHOPS // 2]
        assert seeded == sorted(seeded)  # backfilled keys follow the old key order


@pytest.mark.slow
def test_batches_of_changing_sizes_with_the_application_writing(
    pg: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def migrate() -> None:
        _check(pg, _run_with_writer(pg, False, "all"))

    check_changing_batch_sizes(pg, migrate, monkeypatch, caplog)


@pytest.mark.slow
def test_backfill_ends_while_the_application_inserts_faster_than_it(
    pg: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each pause between two batches brings more new children than a batch
    # takes: the child backfill must stop at the rows there were when it began.
    flood = Flood(pg, per_pause=98, shops='"shop s"')
    monkeypatch.setattr(online_module.OnlineRun, "pause", flood.pause)
    with pg.connect() as conn:
        migrate_pk_to_uuid7(
            conn, "shop s", PkMigrationOptions(online=True, batch_size=97, batch_time=0)
        )
    assert flood.pauses < 80  # about 2,400 items, 1,000 reviews, 300 shops by 97
    flood.check()


@pytest.mark.slow
def test_swap_waits_for_locks_then_retries(pg: Engine, caplog: pytest.LogCaptureFixture) -> None:
    with pg.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="prepare")
    blocker = pg.connect()
    blocker.begin()
    blocker.exec_driver_sql('SELECT count(*) FROM "shop s"').all()  # holds ACCESS SHARE
    release = threading.Timer(1.5, blocker.close)
    release.start()
    caplog.set_level(logging.INFO, logger="alembic.sqla_ids.migration")
    started = time.monotonic()
    with pg.connect() as conn:
        migrate_pk_to_uuid7(
            conn,
            "shop s",
            PkMigrationOptions(online=True, lock_timeout=0.2, swap_attempts=30),
            phase="swap",
        )
    release.join()
    assert time.monotonic() - started >= 1.0
    assert "swap could not get its locks in time (attempt 1/30)" in caplog.text
    with pg.connect() as conn:
        assert steps(conn)["shop s"] == "online:swapped"


@pytest.mark.slow
def test_swap_gives_up_cleanly_when_locks_never_come(pg: Engine) -> None:
    with pg.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="prepare")
    with pg.connect() as blocker, blocker.begin():
        blocker.exec_driver_sql('SELECT count(*) FROM "shop s"').all()
        with (
            pytest.raises(online_module.LockTimeoutError, match="changed nothing"),
            pg.connect() as conn,
        ):
            migrate_pk_to_uuid7(
                conn,
                "shop s",
                PkMigrationOptions(online=True, lock_timeout=0.1, swap_attempts=2),
                phase="swap",
            )
    with pg.connect() as conn:
        assert steps(conn)["shop s"] == "online:prepared"
        assert (
            conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.columns"
                " WHERE table_name = 'shop s' AND column_name = 'id'"
                " AND table_schema = current_schema()"
            ).scalar()
            == "bigint"
        )
    writer = _run_with_writer(pg, False, "all")  # and it finishes when run again
    _check(pg, writer)


def test_abort_before_the_swap_puts_everything_back(pg: Engine) -> None:
    from tests.dbsnapshot import rows, schema

    with pg.connect() as conn:
        before = (schema(conn), rows(conn))
        conn.commit()
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="prepare")
        restore_pk_from_uuid7(conn, "shop s")
        assert (schema(conn), rows(conn)) == before
        assert "shop s" not in steps(conn)


def test_offline_restore_after_the_online_migration(pg: Engine) -> None:
    with pg.connect() as conn:
        before = conn.exec_driver_sql(
            'SELECT i.label, s.name FROM item i JOIN "shop s" s ON s.id = i.shop_id ORDER BY 1'
        ).all()
        conn.commit()
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True))
    with pg.begin() as conn:
        restore_pk_from_uuid7(conn, "shop s")
    with pg.connect() as conn:
        after = conn.exec_driver_sql(
            'SELECT i.label, s.name FROM item i JOIN "shop s" s ON s.id = i.shop_id ORDER BY 1'
        ).all()
        assert after == before
        assert (
            conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.columns"
                " WHERE table_name = 'item' AND column_name = 'shop_id'"
                " AND table_schema = current_schema()"
            ).scalar()
            == "bigint"
        )


@pytest.mark.slow
def test_online_downgrade_after_the_swap_with_the_application_writing(pg: Engine) -> None:
    from tests.dbsnapshot import schema

    with pg.connect() as conn:
        before = schema(conn)
    first = _run_with_writer(pg, False, "swap")
    _check(pg, first)
    writer = Writer(pg, key_updates=False, prefix="down")
    # The same application: it knows which shops it deleted (a fresh writer
    # would insert children of a deleted shop, NULL keys its own fault).
    writer.deleted |= first.deleted
    writer.start()
    try:
        time.sleep(0.2)
        with pg.connect() as conn:
            restore_pk_from_uuid7(conn, "shop s")
        time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.failures == []
    with pg.connect() as conn:
        assert "shop s" not in steps(conn)
        types = dict(
            conn.exec_driver_sql(
                "SELECT table_name || '.' || column_name, data_type"
                " FROM information_schema.columns WHERE table_schema = current_schema()"
                " AND column_name IN ('id', 'shop_id')"
            ).all()
        )
        assert set(types.values()) == {"bigint"}
        orphans = conn.exec_driver_sql(
            'SELECT count(*) FROM item i WHERE NOT EXISTS (SELECT 1 FROM "shop s" s'
            " WHERE s.id = i.shop_id)"
        ).scalar_one()
        assert orphans == 0
        for label, shop in writer.item_shop.items():
            if shop not in writer.deleted:
                assert (
                    conn.execute(
                        sa.text(
                            'SELECT s.name FROM item i JOIN "shop s" s ON s.id = i.shop_id'
                            " WHERE i.label = :l"
                        ),
                        {"l": label},
                    ).scalar()
                    == shop
                )
        after = schema(conn)
    # The same tables, columns, keys, indexes and constraints as before (column
    # positions aside: the key column now comes last).
    assert sorted(_no_positions(after)) == sorted(_no_positions(before))


def test_online_is_refused_on_sqlite(sqlite_engine: Engine) -> None:
    with sqlite_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE online_p (id INTEGER PRIMARY KEY)")
    with (
        pytest.raises(
            MigrationRefusedError,
            match="cannot migrate online on SQLite: the online mode needs PostgreSQL or MariaDB",
        ),
        sqlite_engine.connect() as conn,
    ):
        migrate_pk_to_uuid7(conn, "online_p", PkMigrationOptions(online=True))
    with sqlite_engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE online_p")


def _no_positions(lines: list[str]) -> list[str]:

    # Sequences moved on: the writer inserted rows meanwhile.
    lines = [
        re.sub(r", '\d+'\)$", ")", line) if line.startswith("sequence:") else line for line in lines
    ]
    return [re.sub(r"\b(attnum|ordinal_position|position)[=: ]*\d+", "", line) for line in lines]


def test_through_alembic_across_two_revisions(
    pg: Engine, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Revision 1 prepares while the old application runs; revision 2 swaps and
    contracts; downgrading both puts the old keys back -- the writer never stops."""
    from alembic import command

    monkeypatch.chdir(tmp_path)
    up = 'op.migrate_pk_to_uuid7("shop s", online=True, batch_size=97, phase="{}")'
    down = 'op.restore_pk_from_uuid7("shop s")'
    config = alembic_project(
        pg, tmp_path, [(up.format("prepare"), down), (up.format("swap"), down)]
    )
    writer = Writer(pg, key_updates=False, prefix="alembic")
    writer.start()
    try:
        time.sleep(0.2)
        command.upgrade(config, "0001")
        with pg.connect() as conn:
            assert steps(conn)["shop s"] == "online:prepared"
        command.upgrade(config, "0002")
        with pg.connect() as conn:
            assert steps(conn)["shop s"] == "online:swapped"
        time.sleep(0.2)
        command.downgrade(config, "0001")  # undo the swap, online
        with pg.connect() as conn:
            assert "shop s" not in steps(conn)
        command.downgrade(config, "base")  # nothing left for revision 1 to undo
        time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.failures == [], writer.failures[:5]
    with pg.connect() as conn:
        assert (
            conn.exec_driver_sql(
                "SELECT data_type FROM information_schema.columns WHERE table_name = 'item'"
                " AND column_name = 'shop_id' AND table_schema = current_schema()"
            ).scalar()
            == "bigint"
        )
        for label, shop in writer.item_shop.items():
            if shop not in writer.deleted:
                found = conn.execute(
                    sa.text(
                        'SELECT s.name FROM item i JOIN "shop s" s ON s.id = i.shop_id'
                        " WHERE i.label = :l"
                    ),
                    {"l": label},
                ).scalar()
                assert found == shop, label
