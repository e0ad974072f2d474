"""Online key migration on MariaDB: what only MariaDB has.

The scenarios every database with an online mode shares (every phase with the
application writing, kills and resumes, changing batch sizes, lock waits,
undo paths) are in tests/test_migration_online.py and run here too. This
module keeps what is MariaDB's own: InnoDB's refusals, the buffer pool,
``SET NULL`` cascades that fire no trigger, metadata lock waits of online
rebuilds, ``LOCK TABLES`` retries, DDL statements that commit one by one
(a step killed or stopped half-way), with the same application
(tests/online_app.py) writing meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa
from dbsnapshot import schema
from online_app import (
    SHOPS_SQL,
    SNAPSHOT_TOO_OLD,
    Writer,
    check_new_keys,
    mariadb_schema,
    migrate_online,
    run_with_writer,
    running,
)
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration import online as online_module
from sqla_ids.migration.core.model import TEMP_PREFIX, name_suffix
from sqla_ids.migration.core.state import steps


@pytest.fixture
def mdb(mariadb_private_engine: Engine) -> Engine:
    mariadb_schema(mariadb_private_engine)
    return mariadb_private_engine


@pytest.mark.parametrize(
    ("create", "table", "reason"),
    [
        (
            "CREATE TABLE legacy (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
            "legacy",
            "is not an InnoDB table",
        ),
        # InnoDB has no instant column change for this format: the swap would
        # rebuild the tables while holding them locked.
        (
            "CREATE TABLE `packed ``p``` (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)"
            " ROW_FORMAT=COMPRESSED",
            "packed `p`",
            "has ROW_FORMAT=COMPRESSED",
        ),
        (
            "CREATE TABLE `notes ü` (id BIGINT AUTO_INCREMENT PRIMARY KEY, v TEXT,"
            " FULLTEXT KEY (v))",
            "notes ü",
            "has a FULLTEXT index",
        ),
    ],
)
def test_what_it_cannot_do_is_refused_before_anything_changes(
    mariadb_private_engine: Engine, create: str, table: str, reason: str
) -> None:
    # The refused table alone (no shop beside it: the refusal reads this table only).
    mdb = mariadb_private_engine
    quoted = "`" + table.replace("`", "``") + "`"
    with mdb.begin() as conn:
        conn.exec_driver_sql(create)
        conn.exec_driver_sql(f"INSERT INTO {quoted} VALUES (1, 1)")
    with pytest.raises(MigrationRefusedError) as refused, mdb.connect() as conn:
        migrate_pk_to_uuid7(conn, table, PkMigrationOptions(online=True))
    # Named as SQL would: database-qualified, quoted.
    with mdb.connect() as conn:
        db = conn.exec_driver_sql("SELECT DATABASE()").scalar_one()
    q = mdb.dialect.identifier_preparer.quote
    assert f"{q(db)}.{q(table)} {reason}" in str(refused.value), str(refused.value)
    with mdb.connect() as conn:
        assert table not in steps(conn)
        columns = conn.exec_driver_sql(f"SHOW COLUMNS FROM {quoted}").scalars().all()
        assert columns == ["id", "v"]


@pytest.mark.parametrize(
    "where",
    [
        "parent",
        "child not null",
        # (the migration that goes through: with the slow tests)
        pytest.param("child nullable", marks=pytest.mark.slow),
    ],
)
def test_a_spatial_index_where_the_online_mode_rebuilds_is_refused(
    mariadb_private_engine: Engine, where: str
) -> None:
    """InnoDB rebuilds no table with a SPATIAL index online (measured: "Do not
    support online operation on table with GIS index"), and the online mode
    rebuilds the parent (its primary key moves) and a child whose reference is
    NOT NULL: refused by name before anything changes, the way out named (Sakila's
    ``address``). A child with a nullable reference changes in metadata only
    (which InnoDB does with a SPATIAL index) and migrates, both ways."""
    engine = mariadb_private_engine
    spatial = ", g POINT NOT NULL, SPATIAL KEY `g ü` (g)"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE `place p` (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(9)"
            + (spatial if where == "parent" else "")
            + ")"
        )
        null = "NULL" if where == "child nullable" else "NOT NULL"
        conn.exec_driver_sql(
            f"CREATE TABLE visit (id INT AUTO_INCREMENT PRIMARY KEY, place_id INT {null}"
            + ("" if where == "parent" else spatial)
            + ", CONSTRAINT visit_place FOREIGN KEY (place_id) REFERENCES `place p` (id))"
        )
        point = ", POINT(1, 2)" if where == "parent" else ""
        conn.exec_driver_sql(f"INSERT INTO `place p` VALUES (1, 'a'{point}), (2, 'b'{point})")
        point = "" if where == "parent" else ", POINT(3, 4)"
        conn.exec_driver_sql(f"INSERT INTO visit VALUES (1, 1{point}), (2, 2{point})")
    with engine.connect() as conn:
        before = schema(conn)
    if where != "child nullable":
        table = "place p" if where == "parent" else "visit"
        name = engine.dialect.identifier_preparer.quote(table)
        refused = pytest.raises(MigrationRefusedError, match=f"[.]{name} has a SPATIAL index")
        with refused, engine.connect() as conn:
            migrate_pk_to_uuid7(conn, "place p", PkMigrationOptions(online=True))
        with engine.connect() as conn:
            assert schema(conn) == before and "place p" not in steps(conn)
        return
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "place p", PkMigrationOptions(online=True), phase="swap")
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, "place p")
    with engine.connect() as conn:
        assert schema(conn) == before
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "place p", PkMigrationOptions(online=True))
    with engine.connect() as conn:
        joined = conn.exec_driver_sql(
            "SELECT p.name, ST_X(v.g) FROM visit v JOIN `place p` p ON p.id = v.place_id"
            " ORDER BY p.name"
        ).all()
    assert joined == [("a", 3.0), ("b", 3.0)]


def test_a_small_buffer_pool_is_warned_about_before_the_backfill(
    mariadb_private_engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The warning names the server's pool and the tables' size (read from the
    server); the test's tables are tiny, so the share asked for is raised."""
    from sqla_ids.migration.backends.mysql import online as mariadb_online

    # A shop of three rows (not the application's thousands: the warning comes
    # before the backfill and reads the tables' sizes, never their rows).
    mdb = mariadb_private_engine
    with mdb.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {SHOPS_SQL} (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(40))"
        )
        conn.exec_driver_sql(
            "CREATE TABLE item (id BIGINT AUTO_INCREMENT PRIMARY KEY, shop_id BIGINT NOT NULL,"
            f" CONSTRAINT item_shop FOREIGN KEY (shop_id) REFERENCES {SHOPS_SQL} (id))"
        )
        conn.exec_driver_sql(f"INSERT INTO {SHOPS_SQL} (name) VALUES ('a'), ('b'), ('c')")
        conn.exec_driver_sql("INSERT INTO item (shop_id) VALUES (1), (1), (3)")
    real = mariadb_online.pool_advice
    monkeypatch.setattr(
        mariadb_online, "pool_advice", lambda pool, tables: real(pool, tables, share=1e6)
    )
    with mdb.connect() as conn:
        pool = conn.exec_driver_sql("SELECT @@innodb_buffer_pool_size").scalar_one()
    with caplog.at_level(logging.WARNING, logger="alembic.sqla_ids.migration"):
        migrate_online(mdb, "prepare")
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
            if "indexes of item begins" in record.getMessage() and not seen:
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
        migrate_online(mdb, "prepare")
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
    migrate_online(mdb, "swap")
    with mdb.connect() as conn:
        assert (
            conn.exec_driver_sql(
                "SELECT COUNT(*) FROM review r LEFT JOIN `shop s` s ON s.id = r.shop_id"
                " WHERE r.shop_id IS NOT NULL AND s.id IS NULL"
            ).scalar_one()
            == 0
        )


@pytest.mark.slow
@pytest.mark.parametrize("then", ["resumed", "undone"])
def test_killed_during_expand(mdb: Engine, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    """MariaDB commits each statement of the expand on its own: a run killed
    after the new columns were added and before the triggers is continued by
    the next run -- not refused over the columns it left -- or undone."""
    from dbsnapshot import schema

    original = online_module.execute

    def killed(connection: Any, statements: Any) -> None:
        for statement in statements:
            if "CREATE TRIGGER" in statement.sql:  # after the columns, before the triggers
                raise KeyboardInterrupt("killed")
            original(connection, [statement])

    with mdb.connect() as conn:
        before = schema(conn)
    with monkeypatch.context() as patch:
        patch.setattr(online_module, "execute", killed)
        with pytest.raises(KeyboardInterrupt), mdb.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True))
    with mdb.connect() as conn:
        columns = conn.exec_driver_sql("SHOW COLUMNS FROM item").scalars().all()
        assert any(c.startswith("sqla_ids_tmp_") for c in columns), columns
        assert steps(conn)["shop s"] == "online:planned"
    if then == "resumed":
        writer = run_with_writer(mdb, False, "all")
        check_new_keys(mdb, writer)
        return
    with mdb.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
        conn.commit()
        assert "shop s" not in steps(conn)
        assert schema(conn) == before


@pytest.mark.slow
def test_swap_holds_the_tables_while_a_statement_waits_for_a_lock(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement of the swap failing on a metadata lock after the tables are
    locked (InnoDB's purge thread holds one at times) is retried under the
    lock: the application never sees half a swap (a child's new column renamed
    while its parent's is not, or no trigger)."""
    import pymysql

    migrate_online(mdb, "prepare")
    original = online_module.execute
    failed: list[str] = []

    def flaky(connection: Any, statements: Any) -> None:
        for statement in statements:
            sql = statement.sql
            if sql.startswith("ALTER TABLE review ") and "RENAME COLUMN" in sql and not failed:
                failed.append(sql)
                time.sleep(0.3)  # the application queues behind the locked tables
                raise sa.exc.OperationalError(
                    sql, {}, pymysql.err.OperationalError(1205, "Lock wait timeout exceeded")
                )
            original(connection, [statement])

    monkeypatch.setattr(online_module, "execute", flaky)
    writer = Writer(mdb, key_updates=False, shops=SHOPS_SQL)
    writer.start()
    try:
        time.sleep(0.2)
        migrate_online(mdb, "swap")
        time.sleep(0.3)
    finally:
        writer.stop.set()
        writer.join()
    assert failed  # the parent and item were swapped, review not yet, when it failed
    check_new_keys(mdb, writer)
    migrate_online(mdb, "contract")  # its check: every row written meanwhile is mapped
    with mdb.connect() as conn:
        assert steps(conn).get("shop s") in (None, "done")


def _transaction_open_at_the_rebuild(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch, hold: float | threading.Event
) -> threading.Thread:
    """An application transaction on ``shop s`` opened right before the parent's
    primary key moves (an online rebuild), committed ``hold`` seconds later -- or
    once ``hold`` is set (however slow the machine, the rebuild never finds its
    moment before that)."""
    from sqla_ids.migration.backends.mysql.online import MariaDBOnline

    original = MariaDBOnline._move_primary_key
    opened = threading.Event()

    def hold_the_table() -> None:
        with mdb.connect() as app, app.begin():
            app.exec_driver_sql(f"SELECT COUNT(*) FROM {SHOPS_SQL}").all()
            opened.set()
            if isinstance(hold, threading.Event):
                hold.wait(120)
            else:
                time.sleep(hold)

    holder = threading.Thread(target=hold_the_table)

    def move(self: MariaDBOnline, plan: Any, sides: Any) -> Any:
        task = original(self, plan, sides)

        def build(connection: Any) -> Any:
            if not holder.is_alive() and not opened.is_set():  # the first move only
                holder.start()
                opened.wait()
            return task.build(connection)

        return dataclasses.replace(task, build=build)

    monkeypatch.setattr(MariaDBOnline, "_move_primary_key", move)
    return holder


@pytest.mark.slow
def test_a_rebuild_that_never_finds_its_moment_says_how_to_wait(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    holder = _transaction_open_at_the_rebuild(mdb, monkeypatch, hold=release)
    try:
        with pytest.raises(online_module.LockTimeoutError, match="metadata_lock_wait=1"):
            migrate_online(mdb, "prepare", swap_attempts=1, lock_timeout=1)
    finally:
        release.set()
    holder.join()
    writer = run_with_writer(mdb, False, "all")  # and it continues when run again
    check_new_keys(mdb, writer)


@pytest.mark.slow
def test_a_rebuild_may_wait_for_its_metadata_lock(
    mdb: Engine, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    holder = _transaction_open_at_the_rebuild(mdb, monkeypatch, hold=0.5)
    caplog.set_level(logging.INFO, logger="alembic.sqla_ids.migration")
    # Up to 10 s of waiting for a transaction that ends after 0.5 s: a slow
    # machine finishes it in time too.
    migrate_online(mdb, "prepare", metadata_lock_wait=10, lock_timeout=10)
    holder.join()
    assert "primary key of shop s could not get its locks" not in caplog.text
    with mdb.connect() as conn:
        assert steps(conn)["shop s"] == "online:prepared"


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

    migrate_online(mdb, "prepare", metadata_lock_wait=1)
    migrate_online(mdb, "swap", metadata_lock_wait=1)
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
    migrate_online(mdb, "prepare", metadata_lock_wait=1)
    migrate_online(mdb, "swap", metadata_lock_wait=1)
    with mdb.connect() as conn:
        before = _table_ids(conn)
    app = _ShopThenItem(mdb)
    with running(app, app.stop):
        migrate_online(mdb, "contract")
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

    migrate_online(mdb, "prepare")
    migrate_online(mdb, "swap")
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


@pytest.mark.slow
def test_a_table_information_schema_leaves_out_is_a_lock_timeout(
    mariadb_private_engine: Engine,
) -> None:
    """Under ``lock_wait_timeout = 0`` (every online session's), MariaDB answers an
    ``information_schema`` query about a table someone holds exclusively (here an
    ``ALTER ... LOCK=EXCLUSIVE`` copying it) by leaving the table out with a mere
    warning: the catalog the online steps build their statements from then shows
    a table with no columns (a KeyError in ``_child_nulls``, a child's swap taken
    for done). ``catalog_rows`` raises the lock timeout instead, which the runner
    retries."""
    from sqla_ids.migration.backends.mysql.online import MariaDBOnline
    from sqla_ids.migration.backends.mysql.reflect import catalog_rows

    engine = mariadb_private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE `big b` (id INT PRIMARY KEY, pad VARCHAR(200))")
        conn.exec_driver_sql(
            "INSERT INTO `big b` SELECT seq, REPEAT('x', 200) FROM seq_1_to_1000000"
        )
    query = (
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
    )
    done = threading.Event()

    def alter() -> None:
        with engine.connect() as conn:
            conn.exec_driver_sql(
                "ALTER TABLE `big b` ADD COLUMN extra INT, ALGORITHM=COPY, LOCK=EXCLUSIVE"
            )
        done.set()

    altering = threading.Thread(target=alter)
    with engine.connect() as conn:
        conn.exec_driver_sql("SET SESSION lock_wait_timeout = 0")
        assert catalog_rows(conn, query, {"t": "big b"}) == [("id",), ("pad",)]
        altering.start()
        try:
            while not done.is_set():  # the copy holds the table exclusively
                copying = conn.exec_driver_sql(
                    "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
                    " WHERE INFO LIKE 'ALTER TABLE `big b`%%' AND STATE LIKE '%%copy%%'"
                ).scalar_one()
                if copying:
                    break
                time.sleep(0.01)
            # What information_schema does there (the defect): nothing, a warning.
            left_out = conn.execute(sa.text(query), {"t": "big b"}).all()
            warnings = conn.exec_driver_sql("SHOW WARNINGS").all()
            still = not done.is_set()
            with pytest.raises(sa.exc.OperationalError) as error:
                catalog_rows(conn, query, {"t": "big b"})
        finally:
            altering.join()
    assert still, "the ALTER ended before the catalog was read"
    assert left_out == [] and [w[1] for w in warnings] == [1205]
    assert MariaDBOnline().is_lock_timeout(error.value)
    with engine.connect() as conn:
        conn.exec_driver_sql("SET SESSION lock_wait_timeout = 0")
        assert catalog_rows(conn, query, {"t": "big b"}) == [("id",), ("pad",), ("extra",)]


def test_the_swap_takes_no_innodb_lock_on_tables_its_cascades_reach(
    mariadb_private_engine: Engine,
) -> None:
    """``LOCK TABLES`` inside a transaction also took InnoDB's own X lock on every
    table a cascading foreign key reaches from the tables it names (here the
    ``house`` a ``region``'s ``town`` reaches through ``street``), one by one: an
    application transaction writing a house and then reading a town deadlocked
    with the swap, and InnoDB rolled the application back (Sakila: the swap of
    ``country``/``city`` against a payment being written). The swap holds the
    metadata locks of the tables it changes, nothing of the others: it goes
    through while that transaction stays open, and the transaction commits."""
    engine = mariadb_private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE region (id INT AUTO_INCREMENT PRIMARY KEY, n INT)")
        conn.exec_driver_sql(
            "CREATE TABLE town (id INT AUTO_INCREMENT PRIMARY KEY, region_id INT NOT NULL,"
            " FOREIGN KEY (region_id) REFERENCES region (id) ON UPDATE CASCADE)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE street (id INT AUTO_INCREMENT PRIMARY KEY, town_id INT NOT NULL,"
            " FOREIGN KEY (town_id) REFERENCES town (id) ON UPDATE CASCADE ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE house (id INT AUTO_INCREMENT PRIMARY KEY, street_id INT NOT NULL,"
            " note VARCHAR(9), FOREIGN KEY (street_id) REFERENCES street (id)"
            " ON UPDATE CASCADE ON DELETE CASCADE)"
        )
        for table, row in [("region", "1, 1"), ("town", "1, 1"), ("street", "1, 1")]:
            conn.exec_driver_sql(f"INSERT INTO {table} VALUES ({row})")
        conn.exec_driver_sql("INSERT INTO house VALUES (1, 1, 'a'), (2, 1, 'b')")
    options = PkMigrationOptions(online=True, swap_attempts=100)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "region", options, phase="prepare")
    swapped = threading.Event()
    errors: list[BaseException] = []

    def swap() -> None:
        try:
            with engine.connect() as conn:
                migrate_pk_to_uuid7(conn, "region", options, phase="swap")
        except BaseException as error:  # reported below
            errors.append(error)
        swapped.set()

    with engine.connect() as app:
        app.exec_driver_sql("UPDATE house SET note = 'c' WHERE id = 2")  # IX on house
        swapping = threading.Thread(target=swap)
        swapping.start()
        # The swap goes through while the application's transaction is open...
        went_through = swapped.wait(timeout=120)
        # ...which then reads a town and commits.
        assert app.exec_driver_sql("SELECT COUNT(*) FROM town").scalar_one() == 1
        app.commit()
        swapping.join()
    assert errors == []
    assert went_through
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT note FROM house WHERE id = 2").scalar_one() == "c"
        assert steps(conn)["region"] == "online:swapped"


@pytest.mark.parametrize(
    "isolation",
    # READ COMMITTED (reads at once) with the slow tests
    ["REPEATABLE READ", pytest.param("READ COMMITTED", marks=pytest.mark.slow)],
)
def test_a_snapshot_older_than_a_rebuild_is_refused_and_retried(
    mdb: Engine, isolation: str
) -> None:
    """InnoDB's own rule, which no online migration can avoid (docs/migration.md,
    On MariaDB): a ``REPEATABLE READ`` transaction whose snapshot is older than the
    prepare's rebuild of the parent cannot read the parent afterwards (error 159 on
    MariaDB, 1412 on MySQL: the codes the test applications retry); the same
    statement in a new transaction reads it. ``READ COMMITTED`` takes a snapshot
    per statement: it reads it at once."""
    with mdb.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE elsewhere (id INT PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO elsewhere VALUES (1)")
    read = sa.text(f"SELECT name FROM {SHOPS_SQL} WHERE name = 's1'")
    with mdb.connect().execution_options(isolation_level=isolation) as app:
        app.exec_driver_sql("SELECT id FROM elsewhere").all()  # the snapshot is taken
        migrate_online(mdb, "prepare")  # rebuilds `shop s` (its primary key moves)
        if isolation == "REPEATABLE READ":
            with pytest.raises(sa.exc.OperationalError) as refused:
                app.execute(read).all()
            assert refused.value.orig.args[0] in SNAPSHOT_TOO_OLD, refused.value
            app.rollback()
        assert app.execute(read).scalar_one() == "s1"
