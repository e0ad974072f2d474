"""Online key migration on a real MariaDB while an application keeps writing.

The same application as on PostgreSQL (tests/online_app.py): inserts, children
moved to other parents, old keys changed (ON UPDATE CASCADE), parents deleted
(ON DELETE CASCADE / SET NULL: MariaDB fires no trigger for those), in every
phase; then every relationship is checked under the new keys, with the
names, comments and indexes the tables had.
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
    SHOPS_SQL,
    Flood,
    Writer,
    check_changing_batch_sizes,
    check_relations,
    mariadb_schema,
    running,
    seeded_keys,
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
def mdb(mariadb_private_engine: Engine) -> Engine:
    mariadb_schema(mariadb_private_engine)
    return mariadb_private_engine


def _writer(engine: Engine, key_updates: bool) -> Writer:
    return Writer(engine, key_updates, shops=SHOPS_SQL)


def _check(engine: Engine, writer: Writer) -> None:
    """Every relationship holds under the new keys, which are MariaDB UUIDs."""
    check_relations(engine, writer)
    with engine.connect() as conn:
        types = dict(
            conn.exec_driver_sql(
                "SELECT CONCAT(TABLE_NAME, '.', COLUMN_NAME), DATA_TYPE FROM"
                " information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
                " AND COLUMN_NAME IN ('id', 'shop_id')"
            ).all()
        )
    assert types["shop s.id"] == "uuid" and types["item.shop_id"] == "uuid"
    assert types["review.shop_id"] == "uuid"


def _migrate(engine: Engine, phase: str, **options: Any) -> None:
    with engine.connect() as conn:
        migrate_pk_to_uuid7(
            conn,
            "shop s",
            PkMigrationOptions(online=True, batch_size=97, **options),
            phase=phase,  # type: ignore[arg-type]
        )


def _run_with_writer(engine: Engine, key_updates: bool, *phases: str) -> Writer:
    writer = _writer(engine, key_updates)
    writer.start()
    try:
        time.sleep(0.2)
        for phase in phases:
            if phase == "swap":
                writer.key_updates = False  # after the swap the key is a UUID
            _migrate(engine, phase)
            time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    return writer


def test_every_phase_with_the_application_writing(mdb: Engine) -> None:
    with mdb.connect() as conn:
        before = dict(conn.exec_driver_sql("SELECT name, touched FROM `shop s`").all())
    writer = _run_with_writer(mdb, True, "prepare", "swap", "contract")
    _check(mdb, writer)
    with mdb.connect() as conn:
        assert steps(conn)["shop s"] == "done"
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
        # New rows get their key from the server; the old key keeps numbering.
        conn.exec_driver_sql("INSERT INTO `shop s` (name) VALUES ('after')")
        new = conn.exec_driver_sql(
            "SELECT CAST(id AS CHAR), id_old FROM `shop s` WHERE name = 'after'"
        ).one()
        assert new[0][14] == "7" and new[1] is not None
        conn.commit()


@pytest.mark.parametrize(
    ("create", "table", "reason"),
    [
        (
            "CREATE TABLE legacy (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
            "legacy",
            "legacy is not an InnoDB table",
        ),
        # InnoDB has no instant column change for this format: the swap would
        # rebuild the tables while holding them locked.
        (
            "CREATE TABLE `packed ``p``` (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)"
            " ROW_FORMAT=COMPRESSED",
            "packed `p`",
            "packed `p` has ROW_FORMAT=COMPRESSED",
        ),
        (
            "CREATE TABLE `notes ü` (id BIGINT AUTO_INCREMENT PRIMARY KEY, v TEXT,"
            " FULLTEXT KEY (v))",
            "notes ü",
            "notes ü has a FULLTEXT index",
        ),
    ],
)
def test_what_it_cannot_do_is_refused_before_anything_changes(
    mdb: Engine, create: str, table: str, reason: str
) -> None:
    quoted = "`" + table.replace("`", "``") + "`"
    with mdb.begin() as conn:
        conn.exec_driver_sql(create)
        conn.exec_driver_sql(f"INSERT INTO {quoted} VALUES (1, 1)")
    with pytest.raises(MigrationRefusedError, match=reason), mdb.connect() as conn:
        migrate_pk_to_uuid7(conn, table, PkMigrationOptions(online=True))
    with mdb.connect() as conn:
        assert table not in steps(conn)
        columns = conn.exec_driver_sql(f"SHOW COLUMNS FROM {quoted}").scalars().all()
        assert columns == ["id", "v"]


def test_a_small_buffer_pool_is_warned_about_before_the_backfill(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The warning names the server's pool and the tables' size (read from the
    server); the test's tables are tiny, so the share asked for is raised."""
    from sqla_ids.dialects.mysql import online as mariadb_online

    real = mariadb_online.pool_advice
    monkeypatch.setattr(
        mariadb_online, "pool_advice", lambda pool, tables: real(pool, tables, share=1e6)
    )
    with mdb.connect() as conn:
        pool = conn.exec_driver_sql("SELECT @@innodb_buffer_pool_size").scalar_one()
    with caplog.at_level(logging.WARNING, logger="alembic.sqla_ids.migration"):
        _migrate(mdb, "prepare")
    warned = [r.getMessage() for r in caplog.records if "buffer pool" in r.getMessage()]
    assert len(warned) == 1, warned
    assert warned[0].startswith("shop s: the InnoDB buffer pool (")
    assert f"({pool / 1024 / 1024:,.0f} MB)" in warned[0]


def test_a_reference_set_null_after_its_backfill_is_swept_again(mdb: Engine) -> None:
    """The children's foreign keys on the new columns come after their backfill
    (building their indexes then, in one sorted pass, kept a small buffer pool
    from running out). A parent deleted in between sets its ``SET NULL``
    children's old column NULL through the cascade, which fires no trigger:
    their new column, already filled, must be emptied too before the checks."""
    temp = f"{TEMP_PREFIX}{name_suffix('shop s')}_2"  # review.shop_id's new column
    with mdb.connect() as conn:
        shop = conn.exec_driver_sql(
            "SELECT shop_id FROM review GROUP BY shop_id ORDER BY COUNT(*) DESC LIMIT 1"
        ).scalar_one()
        orphans = (
            conn.exec_driver_sql("SELECT id FROM review WHERE shop_id = %s", (shop,))
            .scalars()
            .all()
        )
    seen: list[int] = []  # reviews of the shop backfilled when it was deleted

    class DeleteBeforeTheIndexes(logging.Handler):
        # The step before the first index build (the children are backfilled
        # by then): the application deletes a shop with reviews. (Nothing is
        # asserted in here: logging swallows a handler's exceptions.)
        def emit(self, record: logging.LogRecord) -> None:
            if "index check took" in record.getMessage() and not seen:
                with mdb.begin() as conn:
                    seen.append(
                        conn.exec_driver_sql(
                            f"SELECT COUNT(*) FROM review WHERE shop_id = %s"
                            f" AND `{temp}` IS NOT NULL",
                            (shop,),
                        ).scalar_one()
                    )
                    conn.exec_driver_sql("DELETE FROM `shop s` WHERE id = %s", (shop,))

    handler = DeleteBeforeTheIndexes(logging.DEBUG)
    log = logging.getLogger("alembic.sqla_ids.migration")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        _migrate(mdb, "prepare")
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    assert seen == [len(orphans)]  # every one backfilled before the delete
    with mdb.connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT shop_id, `{temp}` FROM review WHERE id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": orphans},
        ).all()
    assert rows == [(None, None)] * len(orphans)
    _migrate(mdb, "swap")
    with mdb.connect() as conn:
        assert (
            conn.exec_driver_sql(
                "SELECT COUNT(*) FROM review r LEFT JOIN `shop s` s ON s.id = r.shop_id"
                " WHERE r.shop_id IS NOT NULL AND s.id IS NULL"
            ).scalar_one()
            == 0
        )


@pytest.mark.slow
def test_killed_during_backfill_then_resumed(mdb: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = {"n": 0}
    original = online_module.OnlineRun.pause

    def crash(self: online_module.OnlineRun) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt("killed")
        original(self)

    monkeypatch.setattr(online_module.OnlineRun, "pause", crash)
    with pytest.raises(KeyboardInterrupt), mdb.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True, batch_size=100))
    with mdb.connect() as conn:
        assert steps(conn)["shop s"] == "online:expanded"
        half = conn.exec_driver_sql(
            f"SELECT COUNT(*) FROM `shop s` WHERE {TEMP_KEY} IS NOT NULL"
        ).scalar_one()
        assert 0 < half < SHOPS
    monkeypatch.setattr(online_module.OnlineRun, "pause", original)
    writer = _run_with_writer(mdb, False, "all")
    _check(mdb, writer)
    seeded = seeded_keys(mdb)
    assert seeded == sorted(seeded)  # backfilled keys follow the old key order


@pytest.mark.slow
@pytest.mark.parametrize("then", ["resumed", "undone"])
def test_killed_during_expand(mdb: Engine, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    """MariaDB commits each statement of the expand on its own: a run killed
    after the new columns were added and before the triggers is continued by
    the next run -- not refused over the columns it left -- or undone."""
    from dbsnapshot import schema

    from sqla_ids.dialects.mysql.online import MariaDBOnline

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt("killed")

    with mdb.connect() as conn:
        before = schema(conn)
    with monkeypatch.context() as patch:
        patch.setattr(MariaDBOnline, "_sync_triggers", killed)
        with pytest.raises(KeyboardInterrupt), mdb.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True))
    with mdb.connect() as conn:
        columns = conn.exec_driver_sql("SHOW COLUMNS FROM item").scalars().all()
        assert any(c.startswith("sqla_ids_tmp_") for c in columns), columns
        assert steps(conn)["shop s"] == "online:planned"
    if then == "resumed":
        writer = _run_with_writer(mdb, False, "all")
        _check(mdb, writer)
        return
    with mdb.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
        conn.commit()
        assert "shop s" not in steps(conn)
        assert schema(conn) == before


@pytest.mark.slow
def test_batches_of_changing_sizes_with_the_application_writing(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def migrate() -> None:
        _check(mdb, _run_with_writer(mdb, False, "all"))

    check_changing_batch_sizes(mdb, migrate, monkeypatch, caplog)


@pytest.mark.slow
def test_backfill_ends_while_the_application_inserts_faster_than_it(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each pause between two batches brings more new children than a batch
    # takes: the child backfill must stop at the rows there were when it began.
    flood = Flood(mdb, per_pause=98, shops=SHOPS_SQL)
    monkeypatch.setattr(online_module.OnlineRun, "pause", flood.pause)
    with mdb.connect() as conn:
        migrate_pk_to_uuid7(
            conn, "shop s", PkMigrationOptions(online=True, batch_size=97, batch_time=0)
        )
    assert flood.pauses < 80  # about 2,400 items, 1,000 reviews, 300 shops by 97
    flood.check()


@pytest.mark.slow
def test_swap_waits_for_the_application_then_retries(
    mdb: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    _migrate(mdb, "prepare")
    blocker = mdb.connect()
    blocker.begin()
    blocker.exec_driver_sql("SELECT COUNT(*) FROM item").all()  # holds item's metadata lock

    def release() -> None:
        time.sleep(1.0)
        blocker.rollback()
        blocker.close()

    thread = threading.Thread(target=release)
    thread.start()
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="alembic.sqla_ids"), mdb.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True), phase="swap")
    thread.join()
    assert time.monotonic() - started >= 1.0
    assert "swap could not get its locks in time (attempt 1/" in caplog.text
    with mdb.connect() as conn:
        assert steps(conn)["shop s"] == "online:swapped"


@pytest.mark.slow
def test_swap_holds_the_tables_while_a_statement_waits_for_a_lock(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement of the swap failing on a metadata lock after the tables are
    locked (InnoDB's purge thread holds one at times) is retried under the
    lock: the application never sees half a swap (a child's new column renamed
    while its parent's is not, or no trigger)."""
    import pymysql

    from sqla_ids.dialects.mysql import online as mysql_online

    _migrate(mdb, "prepare")
    original = mysql_online.execute_sql
    failed: list[str] = []

    def flaky(connection: Any, sql: str, *args: Any, **kwargs: Any) -> Any:
        if sql.startswith("ALTER TABLE review ") and "RENAME COLUMN" in sql and not failed:
            failed.append(sql)
            time.sleep(0.3)  # the application queues behind the locked tables
            raise sa.exc.OperationalError(
                sql, {}, pymysql.err.OperationalError(1205, "Lock wait timeout exceeded")
            )
        return original(connection, sql, *args, **kwargs)

    monkeypatch.setattr(mysql_online, "execute_sql", flaky)
    writer = _writer(mdb, key_updates=False)
    writer.start()
    try:
        time.sleep(0.2)
        _migrate(mdb, "swap")
        time.sleep(0.3)
    finally:
        writer.stop.set()
        writer.join()
    assert failed  # the parent and item were swapped, review not yet, when it failed
    _check(mdb, writer)
    _migrate(mdb, "contract")  # its check: every row written meanwhile is mapped
    with mdb.connect() as conn:
        assert steps(conn).get("shop s") in (None, "done")


@pytest.mark.slow
def test_swap_gives_up_cleanly_when_locks_never_come(mdb: Engine) -> None:
    _migrate(mdb, "prepare")
    with mdb.connect() as blocker, blocker.begin():
        blocker.exec_driver_sql("SELECT COUNT(*) FROM review").all()
        with (
            pytest.raises(online_module.LockTimeoutError, match="changed nothing"),
            mdb.connect() as conn,
        ):
            migrate_pk_to_uuid7(
                conn, "shop s", PkMigrationOptions(online=True, swap_attempts=1), phase="swap"
            )
    with mdb.connect() as conn:
        assert steps(conn)["shop s"] == "online:prepared"
        create = conn.exec_driver_sql("SHOW CREATE TABLE review").one()[1]
        assert "`shop_id` bigint(20) DEFAULT NULL" in create
    writer = _run_with_writer(mdb, False, "all")  # and it finishes when run again
    _check(mdb, writer)


def _transaction_open_at_the_rebuild(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch, hold: float
) -> threading.Thread:
    """An application transaction on ``shop s`` opened right before the parent's
    primary key moves (an online rebuild), committed ``hold`` seconds later."""
    from sqla_ids.dialects.mysql.online import MariaDBOnline

    original = MariaDBOnline._move_primary_key
    opened = threading.Event()

    def hold_the_table() -> None:
        with mdb.connect() as app, app.begin():
            app.exec_driver_sql(f"SELECT COUNT(*) FROM {SHOPS_SQL}").all()
            opened.set()
            time.sleep(hold)

    holder = threading.Thread(target=hold_the_table)

    def move(self: MariaDBOnline, ctx: Any, sides: Any) -> None:
        if not holder.is_alive() and not opened.is_set():  # the first move only
            holder.start()
            opened.wait()
        original(self, ctx, sides)

    monkeypatch.setattr(MariaDBOnline, "_move_primary_key", move)
    return holder


@pytest.mark.slow
def test_a_rebuild_that_never_finds_its_moment_says_how_to_wait(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = _transaction_open_at_the_rebuild(mdb, monkeypatch, hold=4.0)
    with pytest.raises(online_module.LockTimeoutError, match="metadata_lock_wait=1"):
        _migrate(mdb, "prepare", swap_attempts=1, lock_timeout=1)
    holder.join()
    writer = _run_with_writer(mdb, False, "all")  # and it continues when run again
    _check(mdb, writer)


@pytest.mark.slow
def test_a_rebuild_may_wait_for_its_metadata_lock(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    holder = _transaction_open_at_the_rebuild(mdb, monkeypatch, hold=0.5)
    caplog.set_level(logging.INFO, logger="alembic.sqla_ids.migration")
    _migrate(mdb, "prepare", metadata_lock_wait=1)
    holder.join()
    assert "primary key of shop s could not get its locks" not in caplog.text
    with mdb.connect() as conn:
        assert steps(conn)["shop s"] == "online:prepared"


def test_abort_before_the_swap_puts_everything_back(mdb: Engine) -> None:
    from dbsnapshot import rows, schema

    with mdb.connect() as conn:
        before = (schema(conn), rows(conn))
        conn.commit()
    _migrate(mdb, "prepare")
    with mdb.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
        assert sorted(set(schema(conn)) ^ set(before[0])) == []
        assert rows(conn) == before[1]
        assert "shop s" not in steps(conn)


@pytest.mark.slow
def test_online_downgrade_after_the_swap_with_the_application_writing(mdb: Engine) -> None:
    from dbsnapshot import rows, schema

    with mdb.connect() as conn:
        before = schema(conn)
        seed = rows(conn)
        conn.commit()
    first = _run_with_writer(mdb, False, "prepare", "swap")
    _check(mdb, first)
    writer = Writer(mdb, key_updates=False, prefix="down", shops=SHOPS_SQL)
    writer.deleted |= first.deleted  # the same application: it knows what it deleted
    writer.start()
    try:
        time.sleep(0.2)
        with mdb.connect() as conn:
            restore_pk_from_uuid7(conn, "shop s")
        time.sleep(0.2)
    finally:
        writer.stop.set()
        writer.join()
    assert writer.failures == []
    with mdb.connect() as conn:
        assert "shop s" not in steps(conn)
        after = schema(conn)
        orphans = conn.exec_driver_sql(
            "SELECT COUNT(*) FROM item i WHERE NOT EXISTS (SELECT 1 FROM `shop s` s"
            " WHERE s.id = i.shop_id)"
        ).scalar_one()
        assert orphans == 0
        for label, shop in writer.item_shop.items():
            if shop not in writer.deleted:
                found = conn.execute(
                    sa.text(
                        "SELECT s.name FROM item i JOIN `shop s` s ON s.id = i.shop_id"
                        " WHERE i.label = :l"
                    ),
                    {"l": label},
                ).scalar()
                assert found == shop, label
        # Seed rows nobody touched are back byte for byte, keys included.
        now = rows(conn)
    # The same tables, columns, keys, comments (counters moved on: the application wrote).
    counters = re.compile(r" AUTO_INCREMENT=\d+")
    assert [counters.sub("", line) for line in after] == [counters.sub("", line) for line in before]
    # Every seed shop still there has its old key, name and timestamp, byte for byte.
    gone = first.deleted | writer.deleted
    kept = [row for row in seed["shop s"] if row[1].strip("'") not in gone]
    assert len(kept) >= SHOPS // 2
    current = {row[1]: row for row in now["shop s"]}
    assert [(row, current.get(row[1])) for row in kept if row not in now["shop s"]][:3] == []


class _ShopThenItem(threading.Thread):
    """An application whose every transaction inserts a shop and, a moment later,
    an item of it. Writing a shop takes a metadata lock on ``item`` too (MariaDB
    locks a foreign key's other table), so a DDL statement on ``item`` waiting
    for its metadata lock in between makes MariaDB roll this transaction back
    (error 1213: its deadlock detector always sacrifices the DML)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.items: list[str] = []

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                with self.engine.begin() as conn:
                    conn.execute(
                        sa.text(f"INSERT INTO {SHOPS_SQL} (name) VALUES (:s)"), {"s": f"t{n}"}
                    )
                    time.sleep(0.03)
                    conn.execute(
                        sa.text(
                            f"INSERT INTO item (shop_id, label) VALUES"
                            f" ((SELECT id FROM {SHOPS_SQL} WHERE name = :s), :s)"
                        ),
                        {"s": f"t{n}"},
                    )
                self.items.append(f"t{n}")
            except sa.exc.DBAPIError as error:
                self.failures.append(f"{n}: {str(error.orig).splitlines()[0]}")
            time.sleep(0.002)


def _table_ids(conn: sa.Connection) -> dict[str, int]:
    """InnoDB's id of each child table: a rebuild gives it a new one."""
    return dict(
        conn.exec_driver_sql(
            "SELECT SUBSTRING_INDEX(NAME, '/', -1), TABLE_ID"
            " FROM information_schema.INNODB_SYS_TABLES"
            " WHERE NAME IN (CONCAT(DATABASE(), '/item'), CONCAT(DATABASE(), '/review'))"
        ).all()
    )


@pytest.mark.slow
def test_online_downgrade_rebuilds_no_child_while_shops_and_their_items_are_written(
    mdb: Engine,
) -> None:
    """The downgrade's only statement that waits for a metadata lock
    (``metadata_lock_wait``) is the parent's rebuild: each child keeps its
    ``NOT NULL`` and gets its parked indexes back by renaming, so no child is
    rebuilt or indexed, and no transaction writing a shop then its item is
    rolled back."""

    _migrate(mdb, "prepare", metadata_lock_wait=1)
    _migrate(mdb, "swap", metadata_lock_wait=1)
    with mdb.connect() as conn:
        before = _table_ids(conn)
        create = conn.exec_driver_sql("SHOW CREATE TABLE item").one()[1]
    # Parked next to the old values, which stay NOT NULL (the triggers fill them).
    assert re.search(r"`sqla_ids_old_\w+` bigint\(20\) NOT NULL", create), create
    assert re.search(r"KEY `sqla_ids_ixo_\w+` \(`sqla_ids_old_\w+`,`label`\)", create), create
    app = _ShopThenItem(mdb)
    with running(app, app.stop), mdb.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
    assert app.failures == []
    assert len(app.items) > 10
    with mdb.connect() as conn:
        assert _table_ids(conn) == before  # no child rebuilt
        found = dict(
            conn.execute(
                sa.text(
                    f"SELECT i.label, s.name FROM item i JOIN {SHOPS_SQL} s"
                    " ON s.id = i.shop_id WHERE i.label LIKE :written"
                ),
                {"written": "t%"},
            ).all()
        )
        create = conn.exec_driver_sql("SHOW CREATE TABLE item").one()[1]
    assert found == {label: label for label in app.items}
    assert "sqla_ids" not in create and "`shop_id` bigint(20) NOT NULL" in create


@pytest.mark.slow
def test_contract_while_shops_and_their_items_are_written(mdb: Engine) -> None:
    """The contract's statements (triggers, parked indexes and old values
    dropped) run with the tables locked once: an application that always has
    a transaction open on them leaves free only instants, too few to find one
    for each statement."""
    _migrate(mdb, "prepare", metadata_lock_wait=1)
    _migrate(mdb, "swap", metadata_lock_wait=1)
    with mdb.connect() as conn:
        before = _table_ids(conn)
    app = _ShopThenItem(mdb)
    with running(app, app.stop):
        _migrate(mdb, "contract")
    assert app.failures == []
    assert len(app.items) > 10
    with mdb.connect() as conn:
        create = conn.exec_driver_sql("SHOW CREATE TABLE item").one()[1]
        # Only the new key's default is left (the sync triggers are gone).
        assert conn.exec_driver_sql("SHOW TRIGGERS").scalars().all() == ["shop s_id_uuid7"]
        assert _table_ids(conn) == before  # no child rebuilt
        orphans = conn.exec_driver_sql(
            f"SELECT COUNT(*) FROM item i LEFT JOIN {SHOPS_SQL} s ON s.id = i.shop_id"
            " WHERE s.id IS NULL"
        ).scalar_one()
        recorded = steps(conn)
    assert "sqla_ids" not in create and "`shop_id` uuid NOT NULL" in create
    assert orphans == 0
    assert recorded["shop s"] == "done"


@pytest.mark.slow
def test_undo_retried_after_it_dropped_the_mapping(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # MariaDB's DDL commits on its own: an undo attempt stopped by a lock timeout
    # after it dropped the mapping table must still finish when retried.
    import pymysql

    _migrate(mdb, "prepare")
    _migrate(mdb, "swap")
    original = online_module.state.forget
    stopped: list[str] = []

    def lock_timeout_once(connection: sa.Connection, table: str) -> None:
        if not stopped:
            stopped.append(table)
            raise sa.exc.OperationalError(
                "DELETE", {}, pymysql.err.OperationalError(1205, "Lock wait timeout exceeded")
            )
        original(connection, table)

    monkeypatch.setattr(online_module.state, "forget", lock_timeout_once)
    with mdb.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
    assert stopped == ["shop s"]
    with mdb.connect() as conn:
        assert "shop s" not in steps(conn)
        kind = conn.exec_driver_sql(
            "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = 'shop s' AND COLUMN_NAME = 'id'"
        ).scalar_one()
        assert kind == "bigint"
