"""Issue 31: the online migration to UUID192 keys (``target="uuid192"``, ``online=True``).

The shop application (tests/online_app.py) writes through every phase while
``shop s`` and its children move to UUID192 keys: the leading 16 bytes are
the UUIDv7 the UUIDv7 migration would make (backfilled keys in old-key order,
below every key made since), then the row's segment -- its ``re`gion`` column,
or an expression of the row. Every relationship the application made must
hold under the new keys, every key must carry its row's segment, and the undo
must bring the original back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
import write_patterns
from online_app import (
    TEMP_KEY,
    Writer,
    check_relations,
    key_types,
    migrate_online,
    quoted,
    run_with_writer,
    shop_schema,
)
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.identifiers import UUID192
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration import online as online_module

REGION = "re`gion"
QUIET = 40  # seeded shops the writer never touches

SEGMENTS: dict[str, dict[str, Any]] = {
    "column": {"segment_column": REGION},
    "expression": {"segment_sql": "length(name) * 1000 + 3"},
    "none": {},
}


def _with_region(engine: Engine) -> Engine:
    """The shop, its parents given a region (a hostile name) to segment by."""
    shop_schema(engine)
    s, r = quoted(engine), quoted(engine, REGION)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {s} ADD COLUMN {r} BIGINT NOT NULL DEFAULT 7")
        # Shops the writer never picks (it deletes and re-keys ``s<n>`` at
        # random, as many as its pace allows): the key-order check always
        # has these to compare, however fast the machine.
        conn.exec_driver_sql(
            f"INSERT INTO {s} (name) VALUES " + ", ".join(f"('quiet{n}')" for n in range(QUIET))
        )
        conn.exec_driver_sql(f"UPDATE {s} SET {r} = MOD(id, 5) * 1000000000000")
    return engine


@pytest.fixture
def region_shop(online_private_engine: Engine) -> Engine:
    """The shop on PostgreSQL and MariaDB, with a region column."""
    return _with_region(online_private_engine)


def _expected_segment(conn: sa.Connection, engine: Engine, segment: dict[str, Any]) -> str:
    """SQL of each shop row's expected segment (``NULL``: none)."""
    if "segment_column" in segment:
        return quoted(engine, REGION)
    if "segment_sql" in segment:
        return str(segment["segment_sql"])
    return "NULL"


def _check_keys(engine: Engine, segment: dict[str, Any], seeded_order: list[Any]) -> None:
    """Every shop's key is a UUID192 of a UUIDv7 and its row's segment; the
    seeded shops' keys follow their old keys' order."""
    s = quoted(engine)
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"SELECT id, id_old, {_expected_segment(conn, engine, segment)}, name FROM {s}"
        ).all()
    assert rows
    keys = {}
    quiet = set()
    for key, old, expected, name in rows:
        if name.startswith("quiet"):
            quiet.add(old)
        value = UUID192.from_bytes(bytes(key))
        assert value.uuid.version == 7, value
        assert value.segment == (None if expected is None else int(expected)), (old, value)
        keys[old] = value
    seeded = [keys[old] for old in seeded_order if old in keys]
    assert len(quiet) == QUIET and quiet <= set(seeded_order)
    assert seeded == sorted(seeded)
    assert len(set(keys.values())) == len(keys)


def _seeded(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.exec_driver_sql(f"SELECT id FROM {quoted(engine)} ORDER BY id").scalars())


@pytest.mark.slow_on("mariadb")
@pytest.mark.parametrize(
    "segment",
    # The other segments' cases with the slow tests (the quick loop keeps one).
    [pytest.param(s, marks=[pytest.mark.slow] if s != "column" else []) for s in SEGMENTS],
    ids=list(SEGMENTS),
)
def test_every_phase_with_the_application_writing(region_shop: Engine, segment: str) -> None:
    """Expand, backfill, prepare, swap (the application writing throughout,
    changing old keys before the swap), then the contract and the undo."""
    engine = region_shop
    options = dict(SEGMENTS[segment], target="uuid192")
    seeded = _seeded(engine)
    writer = run_with_writer(engine, True, "prepare", "swap", **options)
    # Between the swap and the contract, a row inserted without a key (old
    # code) gets one from the trigger, with its segment.
    s = quoted(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"INSERT INTO {s} (name) VALUES ('late')")
    migrate_online(engine, "contract", **options)
    check_relations(engine, writer)
    types = key_types(engine)
    binary = {"postgresql": "bytea", "mariadb": "varbinary"}[requires.database_name(engine)]
    assert {types["shop s.id"], types["item.shop_id"], types["review.shop_id"]} == {binary}
    _check_keys(engine, SEGMENTS[segment], seeded)
    # The application makes keys from now on (UUID192Type), as after the offline run.
    shops = sa.table("shop s", sa.column("id"), sa.column("name"))
    made = UUID192(uuid.UUID(int=(1 << 127) | 7 << 76), 5)
    with engine.begin() as conn:
        conn.execute(shops.insert().values(id=made.bytes, name="made"))
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
        conn.commit()
    types = key_types(engine)
    assert types["shop s.id"] == "bigint" and types["item.shop_id"] == "bigint"
    check_relations(engine, writer)


def test_a_child_written_before_its_parent_takes_the_parents_segment(
    postgresql_private_engine: Engine,
) -> None:
    """A deferred foreign key: the child's row arrives first, chooses the parent's
    UUID (pending, without a segment), and the parent's insert completes it --
    in the mapping and in the child -- with its own segment."""
    engine = _with_region(postgresql_private_engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "ALTER TABLE item ALTER CONSTRAINT item_shop_id_fkey DEFERRABLE INITIALLY DEFERRED"
        )
    migrate_online(engine, "prepare", target="uuid192", segment_column=REGION)
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO item (shop_id, label) VALUES (5000, 'early')")
        conn.exec_driver_sql(
            f'INSERT INTO "shop s" (id, name, "{REGION}") VALUES (5000, \'late\', 42)'
        )
    migrate_online(engine, "all", target="uuid192", segment_column=REGION)
    with engine.connect() as conn:
        key, child = conn.exec_driver_sql(
            'SELECT s.id, i.shop_id FROM item i JOIN "shop s" s ON s.id_old = 5000'
            " WHERE i.label = 'early'"
        ).one()
    assert bytes(key) == bytes(child)
    assert UUID192.from_bytes(bytes(key)).segment == 42


@pytest.mark.slow_on("mariadb")
@pytest.mark.parametrize(
    "timestamp",
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["ordinal", "timestamp column"],
)
def test_killed_during_the_backfill_then_resumed(
    region_shop: Engine, monkeypatch: pytest.MonkeyPatch, timestamp: bool
) -> None:
    """Killed in the parent's backfill; run again, it goes on from the keys it
    made (read back from the UUID192 values) with the application writing."""
    engine = region_shop
    options: dict[str, Any] = {"target": "uuid192", "segment_column": REGION, "batch_size": 40}
    if timestamp:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"ALTER TABLE {quoted(engine)} ADD COLUMN made DATE")
            # Days going back and forth (ties and steps back, as real data has).
            days = (
                "CAST(MOD(id * 7, 40) AS int)"
                if requires.database_name(engine) == "postgresql"
                else "INTERVAL MOD(id * 7, 40) DAY"
            )
            conn.exec_driver_sql(f"UPDATE {quoted(engine)} SET made = DATE '2021-03-04' + {days}")
        options["timestamp_column"] = "made"
    seeded = _seeded(engine)
    calls = {"n": 0}
    original = online_module.OnlineRun.pause

    def crash(self: online_module.OnlineRun) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt("killed")
        original(self)

    monkeypatch.setattr(online_module.OnlineRun, "pause", crash)
    with pytest.raises(KeyboardInterrupt):
        migrate_online(engine, "all", **options)
    monkeypatch.setattr(online_module.OnlineRun, "pause", original)
    with engine.connect() as conn:
        half = conn.exec_driver_sql(
            f"SELECT count(*) FROM {quoted(engine)} WHERE {TEMP_KEY} IS NOT NULL"
        ).scalar_one()
    assert 0 < half < len(seeded)
    writer = Writer(engine, key_updates=False, shops=quoted(engine))
    writer.start()
    try:
        time.sleep(0.2)
        migrate_online(engine, "swap", **options)
    finally:
        writer.stop.set()
        writer.join()
    migrate_online(engine, "contract", **options)
    check_relations(engine, writer)
    _check_keys(engine, SEGMENTS["column"], seeded)
    if timestamp:  # each seeded key carries its row's day, never going back
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                f"SELECT id, made FROM {quoted(engine)} WHERE made IS NOT NULL ORDER BY id_old"
            ).all()
        times = [UUID192.from_bytes(bytes(k)).uuid.int >> 80 for k, _ in rows]
        assert times == sorted(times)
        assert min(times) >= 1614816000000  # 2021-03-04, not the migration's day


@pytest.fixture(
    params=write_patterns.CASES, ids=[f"{db}-{item}" for db, item in write_patterns.CASES]
)
def pattern_shop(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """The write patterns' shop (tests/write_patterns.py), ``item`` in each layout."""
    yield from write_patterns.layout_shop(request)


@pytest.mark.slow
def test_every_write_pattern_in_every_phase(
    pattern_shop: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28's matrix with UUID192 keys segmented by ``n``: every pattern
    before each phase and mid-backfill, then every row where it was written."""
    shop = pattern_shop
    matrix = write_patterns.Matrix(shop, uuid192=True)
    matrix.around_every_phase(monkeypatch, mid_backfill=(2, 7))  # the parent's walk, a child's
    options = PkMigrationOptions(
        online=True, batch_size=8, batch_time=0, target="uuid192", segment_column="n"
    )
    matrix.migrate(options)
    assert matrix.pauses >= 7
    assert len(matrix.expected.items) > 200 + 8 * 10  # the patterns' own rows, every round
    with shop.connect() as conn:
        keys = [bytes(k) for k in conn.exec_driver_sql("SELECT id FROM shop").scalars()]
    # Every shop's key has a segment: its n when the migration or the trigger
    # made it, 3 when the application did (Context.explicit_key).
    assert {len(k) for k in keys} == {24}
    assert all(UUID192.from_bytes(k).uuid.version == 7 for k in keys)


def test_refused_before_anything_changes(region_shop: Engine) -> None:
    engine = region_shop
    with engine.connect() as conn, pytest.raises(MigrationRefusedError, match="reads the key"):
        migrate_pk_to_uuid7(
            conn,
            "shop s",
            PkMigrationOptions(online=True, target="uuid192", segment_sql="MOD(id, 16)"),
        )
    with pytest.raises(ValueError, match="versions serve UUIDv7 keys only"):
        PkMigrationOptions(online=True, target="uuid192", versions=True)
    with engine.connect() as conn:
        columns = {c["name"] for c in sa.inspect(conn).get_columns("shop s")}
    assert TEMP_KEY not in columns and "id_old" not in columns
