"""Online key migration while an application keeps writing, on every database
with an online mode (tests/requirements.py: PostgreSQL and MariaDB).

Each scenario is written once and runs on each of them (the ``online_shop``
fixture of tests/conftest.py). A writer thread inserts parents and children,
moves children to other parents, changes an old key (ON UPDATE CASCADE) and
deletes parents (ON DELETE CASCADE / SET NULL) during every phase; its
statements never name a key's type, so they work before and after the swap,
as application code must (docs/migration.md). At the end every relationship
the writer made is checked under the new keys. What only one database has
(MariaDB's buffer pool, metadata locks, ``LOCK TABLES`` retries...) is in
tests/test_migration_online_mariadb.py.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
from dbsnapshot import rows, schema
from online_app import (
    SHOPS,
    TEMP_KEY,
    Flood,
    Writer,
    alembic_project,
    check_changing_batch_sizes,
    check_new_keys,
    key_types,
    migrate_online,
    quoted,
    run_with_writer,
    seeded_keys,
)
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration import online as online_module
from sqla_ids.migration.core.state import steps

# --- what each database's catalog must show after every phase ----------------------


@contextmanager
def _postgresql_kept(engine: Engine) -> Iterator[None]:
    """The key's comment, the constraints' and index's names, no column left over."""
    yield
    with engine.connect() as conn:
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


@contextmanager
def _mariadb_kept(engine: Engine, writer: Writer) -> Iterator[None]:
    """Columns, comments, keys and constraint names as they were; ``ON UPDATE
    CURRENT_TIMESTAMP`` values kept through every write; only the new key's
    default trigger left."""
    with engine.connect() as conn:
        before = dict(conn.exec_driver_sql("SELECT name, touched FROM `shop s`").all())
    yield
    with engine.connect() as conn:
        create = conn.exec_driver_sql("SHOW CREATE TABLE item").one()[1]
        assert "`shop_id` uuid NOT NULL COMMENT 'whose item'" in create
        assert "KEY `item_shop` (`shop_id`,`label`)" in create
        assert (
            "CONSTRAINT `item's shop` FOREIGN KEY (`shop_id`) REFERENCES `shop s` (`id`)" in create
        )
        assert "sqla_ids" not in create
        shops = conn.exec_driver_sql("SHOW CREATE TABLE `shop s`").one()[1]
        assert "`id` uuid NOT NULL DEFAULT" in shops and "COMMENT 'the shop''s key'" in shops
        assert "PRIMARY KEY (`id`)" in shops
        review = conn.exec_driver_sql("SHOW CREATE TABLE review").one()[1]
        assert "`shop_id` uuid DEFAULT NULL" in review
        # ON UPDATE CURRENT_TIMESTAMP columns kept their values through every write.
        after = dict(conn.exec_driver_sql("SELECT name, touched FROM `shop s`").all())
        for name, touched in before.items():
            if name in after and name not in writer.rekeyed and after[name] != touched:
                pytest.fail(f"{name}: touched changed from {touched} to {after[name]}")
        triggers = (
            conn.exec_driver_sql(
                "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
                " WHERE TRIGGER_SCHEMA = DATABASE()"
            )
            .scalars()
            .all()
        )
        assert triggers == ["shop s_id_uuid7"]


KEPT: dict[str, Callable[[Engine, Writer], Any]] = {
    "postgresql": lambda engine, writer: _postgresql_kept(engine),
    "mariadb": _mariadb_kept,
}
"""Per database: a context whose end checks, in the catalog's own words, that
the migrated tables kept their names, comments, keys and indexes."""


def test_every_phase_with_the_application_writing(online_shop: Engine) -> None:
    engine = online_shop
    writer = Writer(engine, key_updates=True, shops=quoted(engine))
    reached: dict[str, str] = {}
    with KEPT[requires.database_name(engine)](engine, writer):
        writer.start()
        try:
            time.sleep(0.2)
            for phase in ("prepare", "swap", "contract"):
                if phase == "swap":
                    writer.key_updates = False  # the key is a UUID now: no arithmetic on it
                migrate_online(engine, phase)
                with engine.connect() as conn:
                    reached[phase] = steps(conn)["shop s"]
                time.sleep(0.2)
        finally:
            writer.stop.set()
            writer.join()
        assert reached["swap"] == "online:swapped"
        assert reached["contract"] == "done"
        check_new_keys(engine, writer)
    # New rows get their key from the server; the old key keeps numbering.
    shops = sa.table("shop s", sa.column("name"), sa.column("id"), sa.column("id_old"))
    with engine.begin() as conn:
        conn.execute(shops.insert().values(name="after"))
        key, old = conn.execute(
            sa.select(shops.c.id, shops.c.id_old).where(shops.c.name == "after")
        ).one()
    assert uuid.UUID(str(key)).version == 7 and old is not None


@pytest.mark.slow
@pytest.mark.parametrize(("batch_size", "killed_at"), [(50, 3), (100, 2)])
def test_killed_during_backfill_then_resumed(
    online_shop: Engine, monkeypatch: pytest.MonkeyPatch, batch_size: int, killed_at: int
) -> None:
    engine = online_shop
    calls = {"n": 0}
    original = online_module.OnlineRun.pause

    def crash(self: online_module.OnlineRun) -> None:
        calls["n"] += 1
        if calls["n"] == killed_at:
            raise KeyboardInterrupt("killed")
        original(self)

    monkeypatch.setattr(online_module.OnlineRun, "pause", crash)
    with pytest.raises(KeyboardInterrupt), engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True, batch_size=batch_size))
    with engine.connect() as conn:
        assert steps(conn)["shop s"] == "online:expanded"
        half = conn.exec_driver_sql(
            f"SELECT count(*) FROM {quoted(engine)} WHERE {TEMP_KEY} IS NOT NULL"
        ).scalar_one()
        assert 0 < half < SHOPS
    monkeypatch.setattr(online_module.OnlineRun, "pause", original)
    writer = run_with_writer(engine, False, "all")
    check_new_keys(engine, writer)
    # Every seeded shop left (half of them at least), in old-key order.
    seeded = seeded_keys(engine)
    assert len(seeded) >= SHOPS // 2
    assert seeded == sorted(seeded)  # backfilled keys follow the old key order


@pytest.mark.slow
def test_batches_of_changing_sizes_with_the_application_writing(
    online_shop: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def migrate() -> None:
        check_new_keys(online_shop, run_with_writer(online_shop, False, "all"))

    check_changing_batch_sizes(online_shop, migrate, monkeypatch, caplog)


@pytest.mark.slow
def test_backfill_ends_while_the_application_inserts_faster_than_it(
    online_shop: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each pause between two batches brings more new children than a batch
    # takes: the child backfill must stop at the rows there were when it began.
    flood = Flood(online_shop, per_pause=98, shops=quoted(online_shop))
    monkeypatch.setattr(online_module.OnlineRun, "pause", flood.pause)
    with online_shop.connect() as conn:
        migrate_pk_to_uuid7(
            conn, "shop s", PkMigrationOptions(online=True, batch_size=97, batch_time=0)
        )
    assert flood.pauses < 80  # about 2,400 items, 1,000 reviews, 300 shops by 97
    flood.check()


# The application's open transaction the swap meets: on the parent (PostgreSQL:
# an ACCESS SHARE lock) or on a child (MariaDB: its metadata lock), with the
# swap's lock options.
BLOCKED_SWAPS = {
    "parent": ("shop s", {"lock_timeout": 0.2, "swap_attempts": 30}, 1.5),
    "child": ("item", {}, 1.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("blocked", list(BLOCKED_SWAPS))
def test_swap_waits_for_the_application_then_retries(
    online_shop: Engine, caplog: pytest.LogCaptureFixture, blocked: str
) -> None:
    engine = online_shop
    table, options, hold = BLOCKED_SWAPS[blocked]
    # Attempts in all, as the backend's retry policy makes them of swap_attempts
    # (PostgreSQL: as many; MariaDB, whose DDL never waits for a metadata lock:
    # many short waits).
    strategy = requires.backend(engine).online
    assert strategy is not None
    attempts = options.get("swap_attempts", PkMigrationOptions().swap_attempts)
    attempts = len(strategy.retry_delays(attempts)) + 1
    migrate_online(engine, "prepare")
    blocker = engine.connect()
    blocker.begin()
    blocker.exec_driver_sql(f"SELECT count(*) FROM {quoted(engine, table)}").all()

    def release() -> None:
        blocker.rollback()
        blocker.close()

    timer = threading.Timer(hold, release)
    timer.start()
    caplog.set_level(logging.INFO, logger="alembic.sqla_ids")
    started = time.monotonic()
    with engine.connect() as conn:
        migrate_pk_to_uuid7(
            conn, "shop s", PkMigrationOptions(online=True, **options), phase="swap"
        )
    timer.join()
    assert time.monotonic() - started >= 1.0
    assert f"swap could not get its locks in time (attempt 1/{attempts})" in caplog.text
    with engine.connect() as conn:
        assert steps(conn)["shop s"] == "online:swapped"


# A transaction that never ends, on the parent or on a child, and the swap's
# lock options.
NEVER_RELEASED = {
    "parent": ("shop s", {"lock_timeout": 0.1, "swap_attempts": 2}),
    "child": ("review", {"swap_attempts": 1}),
}


@pytest.mark.slow
@pytest.mark.parametrize("blocked", list(NEVER_RELEASED))
def test_swap_gives_up_cleanly_when_locks_never_come(online_shop: Engine, blocked: str) -> None:
    engine = online_shop
    table, options = NEVER_RELEASED[blocked]
    migrate_online(engine, "prepare")
    with engine.connect() as blocker, blocker.begin():
        blocker.exec_driver_sql(f"SELECT count(*) FROM {quoted(engine, table)}").all()
        with (
            pytest.raises(online_module.LockTimeoutError, match="changed nothing"),
            engine.connect() as conn,
        ):
            migrate_pk_to_uuid7(
                conn, "shop s", PkMigrationOptions(online=True, **options), phase="swap"
            )
    with engine.connect() as conn:
        assert steps(conn)["shop s"] == "online:prepared"
        review = {c["name"]: c for c in sa.inspect(conn).get_columns("review")}["shop_id"]
    types = key_types(engine)
    assert types["shop s.id"] == types["item.shop_id"] == types["review.shop_id"] == "bigint"
    # As it was (MariaDB: `shop_id` bigint(20) DEFAULT NULL): signed, nullable, no default.
    assert isinstance(review["type"], sa.BigInteger)
    assert not getattr(review["type"], "unsigned", False)
    assert review["nullable"] and review["default"] is None
    writer = run_with_writer(engine, False, "all")  # and it finishes when run again
    check_new_keys(engine, writer)


# The quick loop: PostgreSQL here; MariaDB's online undo before the swap puts
# everything back in test_migration_uuid192_online_mariadb.py (undo from
# prepare) and test_migration_online_versions_mariadb.py (the grants' test, undone
# from prepare).
@pytest.mark.slow_on("mariadb")
def test_abort_before_the_swap_puts_everything_back(online_shop: Engine) -> None:
    with online_shop.connect() as conn:
        before = (schema(conn), rows(conn))
        conn.commit()
    migrate_online(online_shop, "prepare")
    with online_shop.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
        now = schema(conn)
        assert sorted(set(now) ^ set(before[0])) == []
        assert (now, rows(conn)) == before
        assert "shop s" not in steps(conn)


def _items(engine: Engine) -> list[Any]:
    """Every item's label and its shop's name."""
    with engine.connect() as conn:
        return conn.exec_driver_sql(
            f"SELECT i.label, s.name FROM item i JOIN {quoted(engine)} s ON s.id = i.shop_id"
            " ORDER BY 1"
        ).all()


@pytest.mark.slow
def test_offline_restore_after_the_online_migration(online_shop: Engine) -> None:
    engine = online_shop
    before = _items(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True))
    with engine.connect() as conn:  # (as docs/migration.md: MariaDB commits each step)
        restore_pk_from_uuid7(conn, "shop s")
        conn.commit()
    assert _items(engine) == before
    assert key_types(engine)["item.shop_id"] == "bigint"


def _moved_on(lines: list[str]) -> list[str]:
    """Schema lines without what the application's inserts move on (sequences'
    last values, MariaDB's ``AUTO_INCREMENT=``) or column positions."""
    lines = [
        re.sub(r", '\d+'\)$", ")", line) if line.startswith("sequence:") else line for line in lines
    ]
    lines = [re.sub(r" AUTO_INCREMENT=\d+", "", line) for line in lines]
    return [re.sub(r"\b(attnum|ordinal_position|position)[=: ]*\d+", "", line) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("phases", [("swap",), ("prepare", "swap")], ids="-then-".join)
def test_online_downgrade_after_the_swap_with_the_application_writing(
    online_shop: Engine, phases: tuple[str, ...]
) -> None:
    engine = online_shop
    shops = quoted(engine)
    with engine.connect() as conn:
        before = schema(conn)
        seed = rows(conn)
        conn.commit()
    first = run_with_writer(engine, False, *phases)
    check_new_keys(engine, first)
    writer = Writer(engine, key_updates=False, prefix="down", shops=shops)
    # The same application: it knows which shops it deleted (a fresh writer
    # would insert children of a deleted shop, NULL keys its own fault).
    writer.deleted |= first.deleted
    writer.start()
    try:
        time.sleep(0.2)
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, "shop s")
        time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.failures == []
    assert set(key_types(engine).values()) == {"bigint"}
    with engine.connect() as conn:
        assert "shop s" not in steps(conn)
        orphans = conn.exec_driver_sql(
            f"SELECT count(*) FROM item i WHERE NOT EXISTS (SELECT 1 FROM {shops} s"
            " WHERE s.id = i.shop_id)"
        ).scalar_one()
        assert orphans == 0
        for label, shop in writer.item_shop.items():
            if shop not in writer.deleted:
                found = conn.execute(
                    sa.text(
                        f"SELECT s.name FROM item i JOIN {shops} s ON s.id = i.shop_id"
                        " WHERE i.label = :l"
                    ),
                    {"l": label},
                ).scalar()
                assert found == shop, label
        after = schema(conn)
        now = rows(conn)
    # The same tables, columns, keys, indexes, comments and constraints as
    # before (counters moved on: the application wrote).
    assert sorted(_moved_on(after)) == sorted(_moved_on(before))
    # Every seed shop still there has its old key, name and values, byte for byte.
    gone = first.deleted | writer.deleted
    kept = [row for row in seed["shop s"] if row[1].strip("'") not in gone]
    assert len(kept) >= SHOPS // 2
    current = {row[1]: row for row in now["shop s"]}
    assert [(row, current.get(row[1])) for row in kept if row not in now["shop s"]][:3] == []


def test_online_is_refused_on_sqlite(sqlite_engine: Engine) -> None:
    assert not requires.online(sqlite_engine)
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


@pytest.mark.slow
def test_through_alembic_across_two_revisions(
    online_shop: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Revision 1 prepares while the old application runs; revision 2 swaps and
    contracts; downgrading both puts the old keys back -- the writer never stops."""
    from alembic import command

    engine = online_shop
    monkeypatch.chdir(tmp_path)
    up = 'op.migrate_pk_to_uuid7("shop s", online=True, batch_size=97, phase="{}")'
    down = 'op.restore_pk_from_uuid7("shop s")'
    config = alembic_project(
        engine, tmp_path, [(up.format("prepare"), down), (up.format("swap"), down)]
    )
    writer = Writer(engine, key_updates=False, prefix="alembic", shops=quoted(engine))
    writer.start()
    try:
        time.sleep(0.2)
        command.upgrade(config, "0001")
        with engine.connect() as conn:
            assert steps(conn)["shop s"] == "online:prepared"
        command.upgrade(config, "0002")
        with engine.connect() as conn:
            assert steps(conn)["shop s"] == "online:swapped"
        time.sleep(0.2)
        command.downgrade(config, "0001")  # undo the swap, online
        with engine.connect() as conn:
            assert "shop s" not in steps(conn)
        command.downgrade(config, "base")  # nothing left for revision 1 to undo
        time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.failures == [], writer.failures[:5]
    assert key_types(engine)["item.shop_id"] == "bigint"
    found = dict(_items(engine))
    for label, shop in writer.item_shop.items():
        if shop not in writer.deleted:
            assert found[label] == shop, label
