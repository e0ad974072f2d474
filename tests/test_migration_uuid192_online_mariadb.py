"""The online migration to UUID192 keys on MariaDB: what only MariaDB has.

The scenarios PostgreSQL shares (the application writing through every phase,
kills in the backfill, every write pattern) are in
tests/test_migration_uuid192_online.py. This module keeps MariaDB's own ways:
a child written before its parent with ``foreign_key_checks = 0`` (its
reference pending until the parent's insert completes it -- or, in the
parent's own table, which no trigger may update, until the swap), rows
inserted without a key between the swap and the contract (``INSERT ...
SELECT``, ``LOAD DATA``) and none after it, a segment the ``BEFORE INSERT``
trigger cannot know (an ``AUTO_INCREMENT`` key), and the online undo.
"""

from __future__ import annotations

import csv
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from dbsnapshot import rows, schema
from online_app import TEMP_KEY, mariadb_schema, migrate_online
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.identifiers import UUID192
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration.core.model import TEMP_PREFIX, name_suffix
from sqla_ids.migration.core.state import steps

REGION = "re`gion"
SHOP = "`shop s`"
R = "`re``gion`"
# Batches of 500 (the shop's 3,300 rows in 7): no application writes during
# these backfills, and what the tests look at is the same for any size.
OPTIONS: dict[str, Any] = {"target": "uuid192", "segment_column": REGION, "batch_size": 500}
TOP = 2**64 - 1
"""The largest segment (``BIGINT UNSIGNED``): its bits past 2**63 kept."""


@pytest.fixture
def shop(mariadb_private_engine: Engine) -> Engine:
    """The shop (tests/online_app.py), its parents given a region to segment by
    and a self-reference (a shop's ``boss``); ``LOAD DATA LOCAL`` allowed."""
    engine = sa.create_engine(
        mariadb_private_engine.url, connect_args={"local_infile": True}, poolclass=sa.NullPool
    )
    mariadb_schema(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"ALTER TABLE {SHOP} ADD COLUMN {R} BIGINT UNSIGNED NOT NULL DEFAULT 7"
        )
        conn.exec_driver_sql(f"UPDATE {SHOP} SET {R} = MOD(id, 5) * 1000000000000")
        conn.exec_driver_sql(
            f"ALTER TABLE {SHOP} ADD COLUMN boss BIGINT NULL,"
            f" ADD CONSTRAINT shop_boss FOREIGN KEY (boss) REFERENCES {SHOP} (id)"
            " ON DELETE SET NULL"
        )
        conn.exec_driver_sql(f"UPDATE {SHOP} SET boss = id - 1 WHERE id > 1 AND MOD(id, 3) = 0")
    return engine


def _key(conn: sa.Connection, name: str, column: str = "id") -> bytes:
    return bytes(
        conn.execute(
            sa.text(f"SELECT `{column}` FROM {SHOP} WHERE name = :n"), {"n": name}
        ).scalar_one()
    )


def _temp_column(conn: sa.Connection, table: str) -> str:
    """The migration's new column of ``table``'s reference to the shop (its one:
    ``shop_id``, or the shop's own ``boss``)."""
    ours = f"{TEMP_PREFIX}{name_suffix('shop s')}_"
    names = [c["name"] for c in sa.inspect(conn).get_columns(table)]
    (found,) = [name for name in names if name.startswith(ours) and name != TEMP_KEY]
    return found


def _segment(key: bytes) -> int | None:
    value = UUID192.from_bytes(key)
    assert value.uuid.version == 7, key.hex()
    return value.segment


def _check_every_key(engine: Engine) -> None:
    """Every shop's key is a UUIDv7 and its row's region; every reference
    (items, reviews, bosses) is the key of the shop it named before."""
    with engine.connect() as conn:
        for key, region in conn.exec_driver_sql(f"SELECT id, {R} FROM {SHOP}"):
            assert _segment(bytes(key)) == region
        for table, column in (("item", "shop_id"), ("review", "shop_id"), ("shop s", "boss")):
            orphans = conn.exec_driver_sql(
                f"SELECT count(*) FROM `{table}` c WHERE c.`{column}` IS NOT NULL"
                f" AND NOT EXISTS (SELECT 1 FROM {SHOP} s WHERE s.id = c.`{column}`)"
            ).scalar_one()
            assert orphans == 0, table


def test_a_child_written_before_its_parent_takes_the_parents_segment(shop: Engine) -> None:
    """Foreign key checks off (an import): the item and the review arrive
    first and choose the parent's key pending; the parent's insert -- from
    another session, checks on -- completes it with its own segment (the
    largest there is), in the mapping and in both children."""
    migrate_online(shop, "prepare", **OPTIONS)
    with shop.begin() as conn:
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
        conn.exec_driver_sql("INSERT INTO item (shop_id, label) VALUES (5000, 'early')")
        conn.exec_driver_sql("INSERT INTO review (shop_id, body) VALUES (5000, 'early')")
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
    with shop.connect() as conn:
        item, review = (_temp_column(conn, table) for table in ("item", "review"))
        pending = bytes(
            conn.exec_driver_sql(f"SELECT `{item}` FROM item WHERE label = 'early'").scalar_one()
        )
    # The byte FF and the UUID's 16: no key's length, sorting after every key.
    assert len(pending) == 17 and pending[0] == 0xFF
    with shop.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO {SHOP} (id, name, {R}) VALUES (5000, 'late', :r)"), {"r": TOP}
        )
    with shop.connect() as conn:
        key = _key(conn, "late", TEMP_KEY)
        early = conn.exec_driver_sql(
            f"SELECT i.`{item}`, r.`{review}` FROM item i, review r"
            " WHERE i.label = 'early' AND r.body = 'early'"
        ).one()
    assert key[:16] == pending[1:] and _segment(key) == TOP
    assert [bytes(v) for v in early] == [key, key]
    migrate_online(shop, "all", **OPTIONS)
    with shop.connect() as conn:
        key = _key(conn, "late")
        children = conn.exec_driver_sql(
            "SELECT i.shop_id, r.shop_id FROM item i, review r"
            " WHERE i.label = 'early' AND r.body = 'early'"
        ).one()
    assert [bytes(v) for v in children] == [key, key]
    assert _segment(key) == TOP
    _check_every_key(shop)


def test_a_self_reference_written_before_its_parent_is_completed_at_the_swap(
    shop: Engine,
) -> None:
    """A shop whose boss comes later in the same table (checks off): the
    boss's trigger cannot update its own table (MariaDB's 1442), so the
    reference stays pending until the swap completes it, under its lock."""
    migrate_online(shop, "prepare", **OPTIONS)
    with shop.begin() as conn:
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
        conn.exec_driver_sql(
            f"INSERT INTO {SHOP} (id, name, {R}, boss) VALUES (9001, 'minion', 5, 9002)"
        )
        conn.exec_driver_sql(f"INSERT INTO {SHOP} (id, name, {R}) VALUES (9002, 'boss', 42)")
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
    with shop.connect() as conn:
        column = _temp_column(conn, "shop s")
        waiting = bytes(
            conn.exec_driver_sql(
                f"SELECT `{column}` FROM {SHOP} WHERE name = 'minion'"
            ).scalar_one()
        )
    assert len(waiting) == 17 and waiting[0] == 0xFF  # pending until the swap
    migrate_online(shop, "swap", **OPTIONS)
    with shop.connect() as conn:
        boss, minion = _key(conn, "boss"), _key(conn, "minion")
        reference = bytes(
            conn.exec_driver_sql(f"SELECT boss FROM {SHOP} WHERE name = 'minion'").scalar_one()
        )
    assert reference == boss
    assert (_segment(boss), _segment(minion)) == (42, 5)
    migrate_online(shop, "contract", **OPTIONS)
    _check_every_key(shop)


def test_rows_inserted_without_a_key_until_the_contract(shop: Engine) -> None:
    """Between the swap and the contract, code not switched yet inserts shops
    without a key -- ``INSERT ... SELECT``, multi-row ``VALUES``, ``LOAD DATA``
    -- and the trigger gives each its key with its segment (past the key's
    placeholder default, which ``INSERT ... SELECT`` needs). From the
    contract on the application makes the keys: none is made for it."""
    migrate_online(shop, "swap", **OPTIONS)
    with shop.begin() as conn:
        conn.exec_driver_sql(
            f"INSERT INTO {SHOP} (name, {R}) SELECT CONCAT('copy-', name), 11 FROM {SHOP}"
            " WHERE name IN ('s1', 's2')"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {SHOP} (name, {R}) VALUES ('multi-a', 12), ('multi-b', 0)"
        )
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, newline="") as f:
            csv.writer(f, lineterminator="\n").writerows([("loaded-a", 13), ("loaded-b", 14)])
        try:
            conn.exec_driver_sql(
                f"LOAD DATA LOCAL INFILE '{Path(f.name).as_posix()}' INTO TABLE {SHOP}"
                f" FIELDS TERMINATED BY ',' (name, {R})"
            )
        finally:
            Path(f.name).unlink()
    with shop.connect() as conn:
        made = {
            name: _segment(_key(conn, name))
            for name in ("copy-s1", "copy-s2", "multi-a", "multi-b", "loaded-a", "loaded-b")
        }
    assert made == {
        "copy-s1": 11,
        "copy-s2": 11,
        "multi-a": 12,
        "multi-b": 0,
        "loaded-a": 13,
        "loaded-b": 14,
    }
    migrate_online(shop, "contract", **OPTIONS)
    _check_every_key(shop)
    with shop.connect() as conn:
        default = conn.exec_driver_sql(
            "SELECT COLUMN_DEFAULT FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'shop s' AND COLUMN_NAME = 'id'"
        ).scalar_one()
        assert default is None
        with pytest.raises(sa.exc.OperationalError, match="1364"):
            conn.exec_driver_sql(
                f"INSERT INTO {SHOP} (name) SELECT 'keyless' FROM DUAL WHERE 1 = 1"
            )


def test_a_segment_expression_over_the_row_in_the_triggers(shop: Engine) -> None:
    """``segment_sql`` naming the table's columns bare and qualified by the
    table (a hostile name): the backfill reads it over the table, the triggers
    over each new row alone -- before the swap (a shop and its item) and after."""
    options = {"target": "uuid192", "segment_sql": f"{SHOP}.{R} + LENGTH(name)", "batch_size": 500}
    migrate_online(shop, "prepare", **options)
    with shop.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO {SHOP} (name, {R}) VALUES ('before', 100)")
    migrate_online(shop, "swap", **options)
    with shop.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO {SHOP} (name, {R}) VALUES ('after!', 200)")
    migrate_online(shop, "contract", **options)
    with shop.connect() as conn:
        for key, region, name in conn.exec_driver_sql(f"SELECT id, {R}, name FROM {SHOP}"):
            assert _segment(bytes(key)) == region + len(name), name
        assert _segment(_key(conn, "before")) == 106
        assert _segment(_key(conn, "after!")) == 206


def test_the_auto_increment_key_as_segment_is_refused_before_anything_changes(
    shop: Engine,
) -> None:
    """MariaDB numbers a new row after its ``BEFORE INSERT`` triggers, where
    the new key is made: its segment would be 0."""
    with shop.connect() as conn, pytest.raises(MigrationRefusedError, match="AUTO_INCREMENT key"):
        migrate_pk_to_uuid7(
            conn,
            "shop s",
            PkMigrationOptions(online=True, target="uuid192", segment_column="id"),
        )
    with shop.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("shop s")}
        assert "shop s" not in steps(conn)
        triggers = conn.exec_driver_sql(
            "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()"
        ).scalar_one()
    assert TEMP_KEY not in columns and "id_old" not in columns and triggers == 0


def _moved_on(lines: list[str]) -> list[str]:
    """Schema lines without the ``AUTO_INCREMENT=`` counters inserts move on."""
    return [re.sub(r" AUTO_INCREMENT=\d+", "", line) for line in lines]


@pytest.mark.parametrize(
    "phase",
    [
        "prepare",
        # quick cover: the [prepare] case (UUID192's undo); MariaDB's online undo
        # after the swap: tests/test_migration_online_versions_mariadb.py::
        #   test_undo_drops_the_versions[after-swap], and
        #   tests/test_migration_online_old_key_changes.py::
        #   test_an_old_key_changed_after_the_swap_follows_each_rule_and_comes_back
        pytest.param("swap", marks=pytest.mark.slow),
    ],
)
def test_the_online_undo_puts_everything_back(shop: Engine, phase: str) -> None:
    """Undone before the swap, or after it (a shop inserted without a key
    meanwhile): the tables as they were, every row where it was."""
    with shop.connect() as conn:
        before, seed = schema(conn), rows(conn)
        conn.commit()
    migrate_online(shop, phase, **OPTIONS)
    with shop.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO {SHOP} (name) VALUES ('meanwhile')")
    with shop.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
    with shop.connect() as conn:
        assert sorted(_moved_on(schema(conn))) == sorted(_moved_on(before))
        now = rows(conn)
        assert "shop s" not in steps(conn)
        meanwhile = conn.exec_driver_sql(
            f"SELECT {R} FROM {SHOP} WHERE name = 'meanwhile'"
        ).scalar_one()
    assert meanwhile == 7
    assert {k: v for k, v in now.items() if k != "shop s"} == {
        k: v for k, v in seed.items() if k != "shop s"
    }
    assert set(seed["shop s"]) <= set(now["shop s"])
