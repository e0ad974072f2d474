"""The MariaDB online migration's cost per batch: what each step sends, counted.

No timings: the statements a step sends (and the rows it touches) are what
its cost is made of, and they are the same on a loaded machine and an idle
one. The backfill reads the catalog once per sweep, not once per batch; a
child's batch is five statements, the parents' lock among them fetching
nothing; the ``SET NULL`` sweep after the foreign key visits only the rows
a cascade left behind; a transaction sets and resets its session in one
statement each, and gives the session's isolation level back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import sqlalchemy as sa
from online_app import SHOPS, SHOPS_SQL, TEMP_KEY, mariadb_schema, migrate_online
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
from sqla_ids.migration.core.model import TEMP_PREFIX, name_suffix

LOGGER = "alembic.sqla_ids.migration"
ITEM_WALK = "item.shop_id new references"
REVIEW_WALK = "review.shop_id new references"
NULLED = "review.shop_id references set NULL"
PARENT_WALK = "shop s.id new keys"

# With the slow tests: what these count is what each step sends, not a path of
# its own -- every statement they count is sent in the quick loop by the same
# MariaDB online migration of the same shop.
# quick cover: tests/test_migration_online.py::
#   test_every_phase_with_the_application_writing[mariadb]
# (the shop's backfills, parent trigger, SET NULL sweep and rebuilds, with a
# writer); tests/test_migration_online_mariadb.py::
#   test_a_reference_set_null_after_its_backfill_is_swept_again (a sweep with
#   rows to set NULL); the roads' RESTRICT references and two rebuilt
#   references of one child: tests/test_migration_statements.py::
#   test_mariadb_swap_of_a_self_reference_renames_each_index_once and
#   tests/test_migration_mariadb_offline.py::test_update_triggers_guarded_online
pytestmark = pytest.mark.slow


@pytest.fixture
def mdb(mariadb_private_engine: Engine) -> Engine:
    mariadb_schema(mariadb_private_engine)
    return mariadb_private_engine


@dataclass
class Sent:
    """The statements sent, by the step (``<what> begins``) they were sent in."""

    steps: dict[str, list[str]] = field(default_factory=dict)
    current: str = "-"
    rowcounts: dict[str, list[int]] = field(default_factory=dict)

    def of(self, step: str) -> list[str]:
        return self.steps.get(step, [])


@contextmanager
def recording(engine: Engine, on_step: Any = None) -> Iterator[Sent]:
    """Every statement ``engine`` sends, under the step it belongs to."""
    sent = Sent()

    class Steps(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            message = record.getMessage()
            if message.endswith(" begins"):
                sent.current = message.split(": ", 1)[1][: -len(" begins")]
                if on_step is not None:
                    on_step(sent.current)

    def statement(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        sent.steps.setdefault(sent.current, []).append(" ".join(sql.split()))
        sent.rowcounts.setdefault(sent.current, []).append(cursor.rowcount)

    handler = Steps(logging.DEBUG)
    log = logging.getLogger(LOGGER)
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    sa.event.listen(engine, "after_cursor_execute", statement)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "after_cursor_execute", statement)
        log.removeHandler(handler)
        log.setLevel(level)


def _catalog(statements: list[str]) -> list[str]:
    return [s for s in statements if "information_schema" in s or s == "SHOW WARNINGS"]


def _starting(statements: list[str], words: str) -> list[str]:
    return [s for s in statements if s.startswith(words)]


def test_a_backfill_batch_reads_no_catalog_and_fetches_no_rows(mdb: Engine) -> None:
    """The catalog a walk needs (the child's and the parent's primary keys, the
    columns kept on update) is read at each sweep's start, whatever the number
    of batches; each child batch is five statements -- the batch's end, its
    values into a temporary table, its parents locked (counted, not fetched),
    the children set, the table dropped -- and a parent batch locks its rows
    by counting them too."""
    with recording(mdb) as sent:
        migrate_online(mdb, "prepare", batch_size=97, batch_time=0)
    for walk in (ITEM_WALK, REVIEW_WALK):
        statements = sent.of(walk)
        creates = _starting(statements, "CREATE TEMPORARY TABLE")
        # 2,000 items, 1,000 reviews: a sweep of 97-row batches, and at
        # least one sweep more than one batch long.
        assert len(creates) > 10, statements
        catalog = _catalog(statements)
        # Per sweep, not per batch: the child's key, the parent's key, the kept
        # columns (each information_schema read followed by its SHOW WARNINGS)
        # -- 6 a sweep, fewer than the batches however many sweeps a busy
        # machine's lock timeouts cause (it was 6 a batch).
        assert len(catalog) < len(creates), catalog
        batch = [
            s
            for s in statements
            if not s.startswith("SET") or "FOR UPDATE" in s  # not the session's settings
        ]
        first = next(i for i, s in enumerate(batch) if s.startswith("CREATE TEMPORARY TABLE"))
        one = batch[first - 1 : first + 4]
        assert one[0].startswith("SELECT k0 FROM"), one
        assert one[1].startswith("CREATE TEMPORARY TABLE sqla_ids_online_batch AS SELECT"), one
        assert one[2].startswith("SELECT STRAIGHT_JOIN COUNT(*) FROM sqla_ids_online_batch"), one
        assert one[2].endswith("LOCK IN SHARE MODE"), one
        assert one[3].startswith("SET STATEMENT foreign_key_checks = 0 FOR UPDATE"), one
        assert one[4] == "DROP TEMPORARY TABLE IF EXISTS sqla_ids_online_batch", one
        # A child whose parent is found takes its value without a join to
        # the mapping: the mapping is read only where the parent is not.
        assert "LEFT JOIN `shop s_uuid7_map`" not in one[1], one[1]
    parent = sent.of(PARENT_WALK)
    # A parent batch locks its rows as it numbers them into its temporary
    # table (FOR UPDATE in the derived table): nothing fetched, no statement
    # of its own for the locks.
    locks = [s for s in parent if "FOR UPDATE" in s]
    assert len(locks) > 2, parent
    assert all(s.startswith("CREATE TEMPORARY TABLE sqla_ids_online_keys") for s in locks), locks
    assert len(_catalog(parent)) < len(locks), _catalog(parent)  # (was 2 a batch)


def test_the_set_null_sweep_visits_only_what_a_cascade_left_behind(mdb: Engine) -> None:
    """Between a ``SET NULL`` child's backfill and its new foreign key, a parent
    deleted empties the old column through the cascade (no trigger fires):
    the sweep after the foreign key empties the new column of those rows, in
    one statement for a handful of them, and walks no other row; with none
    left behind it sends no ``UPDATE`` at all."""
    temp = f"{TEMP_PREFIX}{name_suffix('shop s')}_2"  # review.shop_id's new column
    with mdb.connect() as conn:
        shop = conn.exec_driver_sql(
            "SELECT shop_id FROM review GROUP BY shop_id ORDER BY COUNT(*) DESC LIMIT 1"
        ).scalar_one()
        orphans = conn.exec_driver_sql(
            "SELECT COUNT(*) FROM review WHERE shop_id = %s", (shop,)
        ).scalar_one()
    assert 1 < orphans < 97

    def delete_the_shop(step: str) -> None:
        if step == "indexes of item":  # the children are backfilled by then
            with mdb.begin() as conn:
                conn.exec_driver_sql(f"DELETE FROM {SHOPS_SQL} WHERE id = %s", (shop,))

    with recording(mdb, delete_the_shop) as sent:
        migrate_online(mdb, "prepare", batch_size=97)
    updates = _starting(sent.of(NULLED), "UPDATE review")
    assert len(updates) == 1, sent.of(NULLED)
    index = sent.of(NULLED).index(updates[0])
    assert sent.rowcounts[NULLED][index] == orphans
    assert not _starting(sent.of(NULLED), "CREATE TEMPORARY TABLE"), sent.of(NULLED)
    with mdb.connect() as conn:
        assert (
            conn.exec_driver_sql(
                f"SELECT COUNT(*) FROM review WHERE shop_id IS NULL AND `{temp}` IS NOT NULL"
            ).scalar_one()
            == 0
        )
    migrate_online(mdb, "swap")
    migrate_online(mdb, "contract")


def test_with_nothing_left_behind_the_set_null_sweep_updates_nothing(mdb: Engine) -> None:
    with recording(mdb) as sent:
        migrate_online(mdb, "prepare", batch_size=97)
    assert sent.of(NULLED), sent.steps.keys()
    assert not _starting(sent.of(NULLED), "UPDATE review"), sent.of(NULLED)


def test_a_transaction_sets_and_resets_its_session_in_one_statement_each(
    mdb: Engine,
) -> None:
    """The lock timeouts and ``READ COMMITTED`` in one statement at a transaction's
    start, the server's defaults and the session's own isolation level back in
    one at its end: the connections go back to the pool as they came
    (``SERIALIZABLE`` here), with no variable of the migration's set."""
    engine = sa.create_engine(mdb.url, isolation_level="SERIALIZABLE")
    try:
        with recording(engine) as sent:
            migrate_online(engine, "swap")
        statements = [s for step in sent.steps.values() for s in step]
        assert not [s for s in statements if s.startswith("SELECT @@SESSION.tx_isolation")]
        sets = [s for s in statements if s.startswith("SET @sqla_ids_online_isolation")]
        resets = [s for s in statements if "tx_isolation = @sqla_ids_online_isolation" in s]
        assert len(sets) > 20, len(sets)  # a transaction per batch
        assert len(resets) == len(sets), (len(resets), len(sets))
        pooled = [engine.connect() for _ in range(engine.pool.checkedin() or 1)]  # type: ignore[attr-defined]
        try:
            for conn in pooled:
                assert conn.exec_driver_sql(
                    "SELECT @@SESSION.tx_isolation, @sqla_ids_online_isolation,"
                    " @@session.lock_wait_timeout = @@global.lock_wait_timeout,"
                    " @@session.innodb_lock_wait_timeout = @@global.innodb_lock_wait_timeout"
                ).one() == ("SERIALIZABLE", None, 1, 1)
        finally:
            for conn in pooled:
                conn.close()
    finally:
        engine.dispose()


def _rebuilds(statements: list[str], table: str) -> list[str]:
    """The online ``ALTER TABLE`` statements of ``table`` that build something
    (an index, a column's ``NOT NULL``, a foreign key)."""
    return [
        s
        for s in statements
        if f"ALTER TABLE {table} " in s
        and "LOCK=NONE" in s
        and any(
            w in s
            for w in (
                "ADD KEY",
                "ADD UNIQUE KEY",
                "ADD UNIQUE INDEX",
                "MODIFY COLUMN",
                "ADD CONSTRAINT",
            )
        )
    ]


def test_a_child_with_only_not_null_references_is_rebuilt_once(mdb: Engine) -> None:
    """``item`` (a ``NOT NULL`` reference) gets its index, its ``NOT NULL`` and its
    foreign key on the new column in one online rebuild -- built apart, the
    index was built, then built again by the rebuild; the prepare has nothing
    left to do there. ``review`` (nullable: no rebuild) gets its index, then
    its foreign key before the ``SET NULL`` sweep, as before."""
    with recording(mdb) as sent:
        migrate_online(mdb, "prepare")
    statements = [s for step in sent.steps.values() for s in step]
    # (distinct statements: a rebuild that met a lock timeout runs again as it was)
    item = list(dict.fromkeys(_rebuilds(statements, "item")))
    assert len(item) == 1, item
    # (the index as its SHOW CREATE TABLE line reads: ADD KEY)
    for clause in ("ADD KEY", "MODIFY COLUMN", "NOT NULL", "ADD CONSTRAINT"):
        assert clause in item[0], item[0]
    assert item[0].startswith("SET STATEMENT foreign_key_checks = 0"), item[0]
    assert item[0] in sent.of("indexes of item"), sent.steps.keys()
    assert not _rebuilds(sent.of("NOT NULL on item"), "item")
    review = list(dict.fromkeys(_rebuilds(statements, "review")))
    assert len(review) == 2, review  # the index, then the foreign key
    assert "MODIFY COLUMN" not in " ".join(review)
    migrate_online(mdb, "swap")
    with mdb.connect() as conn:
        item_shop = conn.exec_driver_sql(
            "SELECT COLUMN_NAME, IS_NULLABLE, COLUMN_TYPE FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'item' AND COLUMN_NAME = 'shop_id'"
        ).one()
        assert tuple(item_shop) == ("shop_id", "NO", "uuid")
        indexed = conn.exec_driver_sql(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = 'item' AND INDEX_NAME = 'item_shop' ORDER BY SEQ_IN_INDEX"
        ).scalars()
        assert list(indexed) == ["shop_id", "label"]
        referenced = conn.exec_driver_sql(
            "SELECT REFERENCED_TABLE_NAME, DELETE_RULE, UPDATE_RULE FROM"
            " information_schema.REFERENTIAL_CONSTRAINTS WHERE CONSTRAINT_SCHEMA = DATABASE()"
            " AND TABLE_NAME = 'item' AND CONSTRAINT_NAME = 'item''s shop'"
        ).one()
        assert tuple(referenced) == ("shop s", "CASCADE", "CASCADE")
    migrate_online(mdb, "contract")


@pytest.fixture
def roads(mariadb_private_engine: Engine) -> Engine:
    """``city`` and ``road``: two ``NOT NULL`` references to one parent."""
    with mariadb_private_engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE city (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NOT NULL)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE road (id BIGINT AUTO_INCREMENT PRIMARY KEY, from_id BIGINT NOT NULL,"
            " to_id BIGINT NOT NULL, KEY road_to (to_id, id),"
            " CONSTRAINT road_from FOREIGN KEY (from_id) REFERENCES city (id) ON DELETE CASCADE,"
            " CONSTRAINT road_to_city FOREIGN KEY (to_id) REFERENCES city (id))"
        )
        conn.exec_driver_sql("INSERT INTO city (name) SELECT CONCAT('c', seq) FROM seq_1_to_120")
        conn.exec_driver_sql(
            "INSERT INTO road (from_id, to_id) SELECT 1 + MOD(seq, 120), 1 + MOD(seq * 7, 120)"
            " FROM seq_1_to_700"
        )
    return mariadb_private_engine


def test_a_child_with_two_not_null_references_is_rebuilt_once(roads: Engine) -> None:
    """Both references' indexes, ``NOT NULL`` and foreign keys in one rebuild of
    the child (the prepare rebuilt it once per reference), and every road
    still joins the cities it joined."""
    with roads.connect() as conn:
        before = conn.exec_driver_sql("SELECT id, from_id, to_id FROM road ORDER BY id").all()
    with recording(roads) as sent, roads.connect() as conn:
        migrate_pk_to_uuid7(conn, "city", PkMigrationOptions(online=True, batch_size=50))
    statements = [s for step in sent.steps.values() for s in step]
    road = list(dict.fromkeys(_rebuilds(statements, "road")))
    assert len(road) == 1, road
    assert road[0].count("MODIFY COLUMN") == 2 and road[0].count("ADD CONSTRAINT") == 2, road
    with roads.connect() as conn:
        after = conn.exec_driver_sql(
            "SELECT r.id, f.id_old, t.id_old FROM road r JOIN city f ON f.id = r.from_id"
            " JOIN city t ON t.id = r.to_id ORDER BY r.id"
        ).all()
        kinds = conn.exec_driver_sql(
            "SELECT COLUMN_NAME, IS_NULLABLE, DATA_TYPE FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'road' ORDER BY ORDINAL_POSITION"
        ).all()
        rules = conn.exec_driver_sql(
            "SELECT CONSTRAINT_NAME, DELETE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS"
            " WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'road' ORDER BY 1"
        ).all()
    assert after == before
    assert [tuple(k) for k in kinds] == [
        ("id", "NO", "bigint"),
        ("from_id", "NO", "uuid"),
        ("to_id", "NO", "uuid"),
    ]
    assert [tuple(r) for r in rules] == [("road_from", "CASCADE"), ("road_to_city", "RESTRICT")]


MAPPING = "`shop s_uuid7_map`"


def test_a_parent_batch_maps_its_rows_in_one_statement(mdb: Engine) -> None:
    """Each parent batch writes its rows' mapping entries in one ``INSERT ...
    SELECT`` from its temporary table, its ``UPDATE`` running with the
    parent's sync trigger quiet (``@sqla_ids_backfill``, set just for it):
    the trigger no longer writes the mapping row by row (it did, a ``DELETE``
    and an upsert per row -- about half of the ``UPDATE``'s time). Every
    parent ends up mapped to its key, and no connection goes back to the pool
    with the variable set."""
    with recording(mdb) as sent:
        migrate_online(mdb, "prepare", batch_time=0)
    parent = sent.of(PARENT_WALK)
    creates = _starting(parent, "CREATE TEMPORARY TABLE sqla_ids_online_keys")
    assert len(creates) > 2, parent  # 300 shops in batches of 97
    sequence = [
        s
        for s in parent
        if s.startswith(("SET @sqla_ids_backfill", "UPDATE `shop s`", f"INSERT INTO {MAPPING}"))
    ]
    one = [
        "SET @sqla_ids_backfill = 1",
        "UPDATE `shop s` p JOIN sqla_ids_online_keys b",
        "SET @sqla_ids_backfill = NULL",
        f"INSERT INTO {MAPPING} (old_key, new_key) SELECT b.k, b.n FROM sqla_ids_online_keys b",
    ]
    assert len(sequence) == len(one) * len(creates), sequence
    for i, s in enumerate(sequence):
        assert s.startswith(one[i % len(one)]), (i, sequence)
    with mdb.connect() as conn:
        tmp = TEMP_KEY
        assert conn.exec_driver_sql(
            f"SELECT COUNT(*), SUM(m.new_key <=> s.`{tmp}`), COUNT(DISTINCT m.new_key)"
            f" FROM {SHOPS_SQL} s LEFT JOIN {MAPPING} m ON m.old_key = s.id"
        ).one() == (SHOPS, SHOPS, SHOPS)
        pooled = [mdb.connect() for _ in range(mdb.pool.checkedin() or 1)]  # type: ignore[attr-defined]
        try:
            for c in pooled:
                assert c.exec_driver_sql("SELECT @sqla_ids_backfill").scalar() is None
        finally:
            for c in pooled:
                c.close()
    migrate_online(mdb, "swap")
    migrate_online(mdb, "contract")


def test_the_parent_trigger_maps_every_write_but_the_backfills(mdb: Engine) -> None:
    """While the parent's walk runs, a new key given by any session maps itself
    through the trigger; one given with ``@sqla_ids_backfill`` set (what a
    parent batch does, mapping its rows itself) does not -- the application
    never sets it, so its writes are mapped as before."""
    seen: dict[str, Any] = {}

    def write_keys(step: str) -> None:
        if step != PARENT_WALK:
            return
        with mdb.begin() as conn:
            tmp = TEMP_KEY
            first, second = conn.exec_driver_sql(
                f"SELECT id FROM {SHOPS_SQL} ORDER BY id DESC LIMIT 2"
            ).scalars()
            keys = {first: "01900000-0000-7000-8000-000000000001"}
            keys[second] = "01900000-0000-7000-8000-000000000002"
            update = f"UPDATE {SHOPS_SQL} SET `{tmp}` = %s WHERE id = %s"
            conn.exec_driver_sql(update, (keys[first], first))
            conn.exec_driver_sql("SET @sqla_ids_backfill = 1")
            try:
                conn.exec_driver_sql(update, (keys[second], second))
            finally:
                conn.exec_driver_sql("SET @sqla_ids_backfill = NULL")
            mapped = f"SELECT CAST(new_key AS CHAR) FROM {MAPPING} WHERE old_key = %s"
            seen["first"] = conn.exec_driver_sql(mapped, (first,)).scalar()
            seen["second"] = conn.exec_driver_sql(mapped, (second,)).scalar()
            seen["keys"] = (keys[first], keys[second])
            # As a batch does: the quiet write's row mapped by the writer.
            conn.exec_driver_sql(
                f"INSERT INTO {MAPPING} (old_key, new_key) VALUES (%s, %s)", (second, keys[second])
            )

    with recording(mdb, write_keys):
        migrate_online(mdb, "prepare")  # its check proves every row mapped
    assert seen["first"] == seen["keys"][0]
    assert seen["second"] is None
    migrate_online(mdb, "swap")
    migrate_online(mdb, "contract")
