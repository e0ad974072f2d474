"""The offline migration's new keys and how its statements touch the tables.

* The keys computed by the servers (PostgreSQL, MariaDB: ``INSERT ... SELECT``
  per batch) are exactly the ones :mod:`sqla_ids.migration.core.mapping` makes
  in Python (SQLite): the (millisecond, counter) pairs of ``ordered_uuid7s``
  -- running maximum, ties, ``NULL`` times, times before 1970, a full counter
  -- and the seed's bits; an interrupted run, finished, gives the same keys.
* PostgreSQL rewrites each affected table once (one ``ALTER TABLE`` converting
  all its columns, no ``UPDATE``), both ways; a value with no mapping row
  stops the migration and changes nothing.
* MariaDB checks each filled batch (a missing mapping row stops the migration
  before any key changes), and adds the foreign keys back unchecked only after
  proving them -- and refuses to when a row has no parent.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Connection, Engine

from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.identifiers import ordered_uuid7s
from sqla_ids.identifiers.inspection import uuid7_counter, uuid7_timestamp_ms
from sqla_ids.migration import migrate_pk_to_uuid7, plan_pk_migration, restore_pk_from_uuid7
from sqla_ids.migration.backends.mysql.offline import _prove_references
from sqla_ids.migration.core import mapping, state
from sqla_ids.migration.core.progress import Progress

EPOCH = datetime(1970, 1, 1)
BASE = datetime(2024, 5, 6, 7, 8, 9, 123456)
# In key order: equal milliseconds, a time going back, NULLs, before 1970, microseconds.
TIMES: list[datetime | None] = [
    BASE,
    BASE,
    BASE + timedelta(microseconds=400),  # the same millisecond
    BASE - timedelta(days=3),  # goes back: the running maximum holds
    None,
    BASE + timedelta(milliseconds=1),
    None,
    datetime(1969, 12, 31, 23, 0, 0),  # before 1970
    BASE + timedelta(seconds=1),
    *(BASE + timedelta(seconds=2) for _ in range(12)),
    *(BASE + timedelta(seconds=3, milliseconds=n % 3) for n in range(20)),
]


def _ms(value: datetime | None) -> int | None:
    return None if value is None else max((value - EPOCH) // timedelta(milliseconds=1), 0)


def test_key_numbers_are_ordered_uuid7s_pairs() -> None:
    """The (ms, counter) numbers the SQL computes, in Python: those of the
    reference generator, including the counter's carry into the next millisecond."""
    times: list[int | None] = [5, 5, 3, None, 7, 7, 6, 9]
    times += [1_000] * ((1 << 18) + 5) + [1_000, 1_001, 1_002]
    expected = [
        (uuid7_timestamp_ms(key) << 18) | uuid7_counter(key)
        for key in ordered_uuid7s(times, seed="x")
    ]
    assert list(mapping.key_numbers(times)) == expected
    assert list(mapping.key_numbers([None, None, 4])) == [0, 1, 4 << 18]
    key = mapping.new_key(expected[-1], "seed", 7)
    assert mapping.key_number(key) == expected[-1] and key.version == 7


def _parent(engine: Engine, metadata: sa.MetaData, name: str) -> sa.Table:
    when = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    parent = sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("created_at", when, nullable=True),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        # Keys with gaps, out of insertion order.
        rows = [{"id": 3 * n + 1, "created_at": t} for n, t in enumerate(TIMES)]
        conn.execute(parent.insert(), list(reversed(rows)))
    return parent


def _keys(engine: Engine, table: str) -> list[tuple[int, UUID]]:
    t = sa.table(table, sa.column("id_old"), sa.column("id", sa.Uuid()))
    with engine.connect() as conn:
        return [(r[0], r[1]) for r in conn.execute(sa.select(t.c.id_old, t.c.id).order_by(t.c.id))]


def _expected(seed: str) -> list[tuple[int, UUID]]:
    numbers = mapping.key_numbers(_ms(t) for t in TIMES)
    return [(3 * n + 1, mapping.new_key(v, seed, n)) for n, v in enumerate(numbers)]


def test_keys_are_the_same_on_every_database(engine: Engine, metadata: sa.MetaData) -> None:
    """Batches of 4 keys: each batch continues the one before (running maximum,
    counter, position). Sorted by new key, the rows come in old-key order."""
    name = f"k{secrets.token_hex(2)}_parent"
    _parent(engine, metadata, name)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, name, timestamp_column="created_at", batch_size=4, seed="é")
        conn.commit()
    keys = _keys(engine, name)
    assert keys == _expected("é")
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, name)
        conn.commit()
    metadata.drop_all(engine)


def test_an_interrupted_run_finishes_with_the_same_keys(
    engine: Engine, metadata: sa.MetaData, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped while filling the mapping (MariaDB keeps the committed batches and
    continues after them; PostgreSQL and SQLite roll back and start again)."""
    name = f"k{secrets.token_hex(2)}_parent"
    _parent(engine, metadata, name)
    original = Progress.advance
    calls = []

    def failing(self: Progress, rows: int) -> None:
        calls.append(rows)
        if len(calls) == 4:
            raise RuntimeError("interrupted")
        original(self, rows)

    monkeypatch.setattr(Progress, "advance", failing)
    with engine.connect() as conn, pytest.raises(RuntimeError, match="interrupted"):
        migrate_pk_to_uuid7(conn, name, timestamp_column="created_at", batch_size=5, seed="s")
    monkeypatch.setattr(Progress, "advance", original)
    with engine.connect() as conn:
        if engine.dialect.name == "mysql":  # committed batches stay
            mapped = conn.exec_driver_sql(f"SELECT count(*) FROM {name}_uuid7_map").scalar()
            assert mapped == 15  # three batches of 5, the fourth stopped before it
        migrate_pk_to_uuid7(conn, name, timestamp_column="created_at", batch_size=5, seed="s")
        conn.commit()
    assert _keys(engine, name) == _expected("s")
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, name)
        conn.commit()


def test_timestamp_columns_that_cannot_give_times_are_refused(
    engine: Engine, metadata: sa.MetaData
) -> None:
    name = f"k{secrets.token_hex(2)}_parent"
    sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("label", sa.String(20)),
    )
    metadata.create_all(engine)
    refusal = r"\.label has type .*date or timestamp"
    with engine.connect() as conn, pytest.raises(MigrationRefusedError, match=refusal):
        plan_pk_migration(conn, name, timestamp_column="label")


def test_postgresql_timestamps_past_uuid7_are_refused(postgresql_engine: Engine) -> None:
    name = f"k{secrets.token_hex(2)}_parent"
    with postgresql_engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {name} (id int PRIMARY KEY, t timestamp)")
        conn.exec_driver_sql(f"INSERT INTO {name} VALUES (1, '2024-01-01'), (2, '20000-01-01')")
    try:
        with (
            postgresql_engine.connect() as conn,
            pytest.raises(
                MigrationRefusedError, match=r"\.t holds 1 value\(s\) after the year 9999"
            ),
        ):
            migrate_pk_to_uuid7(conn, name, timestamp_column="t")
    finally:
        with postgresql_engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE {name}")


# --- PostgreSQL: one rewrite per table ----------------------------------------------


def _tables(engine: Engine, statements: list[str]) -> Iterator[tuple[Engine, str]]:
    """``shop`` and ``item`` made by ``statements`` (``{p}``: the tables' prefix)."""
    p = f"r{secrets.token_hex(2)}_"
    with engine.begin() as conn:
        for sql in statements:
            conn.exec_driver_sql(sql.replace("{p}", p))
    yield engine, p
    _drop(engine, p)


@pytest.fixture
def shop(postgresql_engine: Engine) -> Iterator[tuple[Engine, str]]:
    """``shop`` (bigint identity key, self-reference) and ``item`` referencing it twice."""
    yield from _tables(
        postgresql_engine,
        [
            "CREATE TABLE {p}shop (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
            " parent_shop bigint REFERENCES {p}shop (id), name text NOT NULL UNIQUE)",
            "CREATE TABLE {p}item (id serial PRIMARY KEY,"
            " shop_id bigint NOT NULL REFERENCES {p}shop (id) ON DELETE CASCADE,"
            " origin bigint REFERENCES {p}shop (id), label text)",
            "CREATE INDEX {p}item_shop ON {p}item (shop_id)",
            "INSERT INTO {p}shop (name) SELECT 's' || n FROM generate_series(1, 300) n",
            "UPDATE {p}shop SET parent_shop = id - 1 WHERE id %% 3 = 0",
            "INSERT INTO {p}item (shop_id, origin, label) SELECT 1 + n %% 300,"
            " CASE WHEN n %% 4 = 0 THEN NULL ELSE 1 + (n * 7) %% 300 END, 'i' || n"
            " FROM generate_series(1, 900) n",
        ],
    )


def _drop(engine: Engine, p: str) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {p}item, {p}shop, {p}shop_uuid7_map")
        if sa.inspect(conn).has_table("sqla_ids_pk_migrations"):
            state.forget(conn, f"{p}shop")


def _statements(engine: Engine) -> tuple[list[str], Any]:
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(" ".join(statement.split()))

    sa.event.listen(engine, "before_cursor_execute", record)
    return seen, record


def _relations(conn: Connection, p: str) -> list[tuple[Any, ...]]:
    return sorted(
        conn.exec_driver_sql(
            f"SELECT i.label, s.name, o.name, ps.name FROM {p}item i JOIN {p}shop s"
            f" ON s.id = i.shop_id LEFT JOIN {p}shop o ON o.id = i.origin"
            f" LEFT JOIN {p}shop ps ON ps.id = s.parent_shop"
        ).all()
    )


def test_postgresql_rewrites_each_table_once(shop: tuple[Engine, str]) -> None:
    engine, p = shop
    with engine.connect() as conn:
        before = _relations(conn, p)
    for direction in ("up", "down"):
        seen, record = _statements(engine)
        try:
            with engine.connect() as conn:
                if direction == "up":
                    migrate_pk_to_uuid7(
                        conn, f"{p}shop", keep_child_old_columns=True, batch_size=64
                    )
                else:
                    restore_pk_from_uuid7(conn, f"{p}shop")
                conn.commit()
        finally:
            sa.event.remove(engine, "before_cursor_execute", record)
        rewrites = [s for s in seen if re.match(r"ALTER TABLE \S+ ALTER COLUMN .* TYPE ", s)]
        assert [s.split()[2] for s in rewrites] == [f"{p}shop", f"{p}item"], rewrites
        # Every converted column of a table in its one statement: the key and the
        # self-reference, two references; going up, each with its old values kept.
        assert [s.count(" TYPE ") for s in rewrites] == ([4, 4] if direction == "up" else [2, 2])
        assert not [s for s in seen if re.match(rf"UPDATE \S*{p}(shop|item)\b", s)]
        assert not [s for s in seen if "VALUES" in s and "uuid7_map" in s]  # keys made in SQL
        with engine.connect() as conn:
            assert _relations(conn, p) == before
            types = dict(
                conn.exec_driver_sql(
                    "SELECT table_name || '.' || column_name, data_type FROM"
                    " information_schema.columns WHERE table_schema = current_schema()"
                    f" AND table_name IN ('{p}shop', '{p}item')"
                ).all()
            )
        new = "uuid" if direction == "up" else "bigint"
        assert types[f"{p}shop.id"] == types[f"{p}item.origin"] == new, types
        if direction == "up":
            assert types[f"{p}shop.id_old"] == types[f"{p}item.shop_id_old"] == "bigint"
        else:
            assert f"{p}shop.id_old" not in types and f"{p}item.shop_id_old" not in types


def _lose_a_mapping_row(monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    """After the mapping is filled and counted, one of its rows goes missing."""
    from sqla_ids.migration import offline

    original = offline._install_new_default

    def losing(connection: Connection, plan: Any) -> None:
        q = connection.dialect.identifier_preparer.quote
        connection.exec_driver_sql(f"DELETE FROM {q(plan.mapping_table)} WHERE old_key = 2")
        original(connection, plan)

    monkeypatch.setattr(offline, "_install_new_default", losing)


def test_postgresql_a_value_without_mapping_row_changes_nothing(
    shop: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, p = shop
    _lose_a_mapping_row(monkeypatch, f"{p}shop")
    refusal = r"no row in .*shop_uuid7_map"
    with engine.connect() as conn, pytest.raises(MigrationVerificationError, match=refusal):
        migrate_pk_to_uuid7(conn, f"{p}shop")
    with engine.connect() as conn:
        kind = conn.exec_driver_sql(
            "SELECT data_type FROM information_schema.columns WHERE table_schema ="
            f" current_schema() AND table_name = '{p}shop' AND column_name = 'id'"
        ).scalar()
        assert kind == "bigint"
        assert state.load(conn, f"{p}shop") is None


# --- MariaDB: batches checked, foreign keys proven ------------------------------------


@pytest.fixture
def mdb_shop(mariadb_engine: Engine) -> Iterator[tuple[Engine, str]]:
    yield from _tables(
        mariadb_engine,
        [
            "CREATE TABLE {p}shop (id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20))",
            "CREATE TABLE {p}item (id INT AUTO_INCREMENT PRIMARY KEY, shop_id BIGINT,"
            " CONSTRAINT {p}item_shop FOREIGN KEY (shop_id) REFERENCES {p}shop (id)"
            " ON DELETE CASCADE)",
            "INSERT INTO {p}shop (name) SELECT CONCAT('s', seq) FROM seq_1_to_200",
            "INSERT INTO {p}item (shop_id) SELECT IF(seq %% 5, 1 + seq %% 200, NULL)"
            " FROM seq_1_to_500",
        ],
    )


def test_mariadb_foreign_keys_come_back_unchecked_after_their_proof(
    mdb_shop: tuple[Engine, str],
) -> None:
    engine, p = mdb_shop
    seen, record = _statements(engine)
    try:
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, f"{p}shop", batch_size=64)
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    adds = [n for n, s in enumerate(seen) if "ADD CONSTRAINT" in s]
    assert adds and all(
        seen[n].startswith("SET STATEMENT foreign_key_checks = 0 FOR ALTER TABLE") for n in adds
    )
    proofs = [n for n, s in enumerate(seen) if "NOT (EXISTS" in s and n > seen.index(seen[0])]
    swapped = max(n for n, s in enumerate(seen) if "DROP COLUMN" in s)
    assert any(swapped < n < adds[0] for n in proofs), seen[swapped : adds[0] + 1]
    # Every batch written through the mapping is checked right after its UPDATE.
    updates = [n for n, s in enumerate(seen) if re.match(rf"UPDATE {p}(shop|item)\b", s)]
    assert updates and all(
        seen[n + 1].startswith("SELECT count(*)") and seen[n + 1].endswith(" IS NULL")
        for n in updates
    )
    unknown = UUID(int=1 << 76 | 1 << 63)
    # Enforced, and cascading, through the new keys.
    with engine.begin() as conn, pytest.raises(sa.exc.IntegrityError):
        conn.exec_driver_sql(f"INSERT INTO {p}item (shop_id) VALUES ('{unknown}')")
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DELETE FROM {p}shop WHERE id_old = 2")
        assert not conn.exec_driver_sql(
            f"SELECT count(*) FROM {p}item i JOIN {p}shop s ON s.id = i.shop_id WHERE s.id_old = 2"
        ).scalar()
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, f"{p}shop")


def test_mariadb_a_batch_without_its_mapping_stops_before_any_key_changes(
    mdb_shop: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, p = mdb_shop
    _lose_a_mapping_row(monkeypatch, f"{p}shop")
    with engine.connect() as conn:
        with pytest.raises(MigrationVerificationError, match="stopped before changing any key"):
            migrate_pk_to_uuid7(conn, f"{p}shop")
        kind = conn.exec_driver_sql(
            "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()"
            f" AND TABLE_NAME = '{p}shop' AND COLUMN_NAME = 'id'"
        ).scalar()
        assert kind == "bigint"


def test_mariadb_proof_refuses_a_row_without_parent(
    mdb_shop: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orphan the planner refuses up front (a row written with
    ``foreign_key_checks=0``) is refused by the proof too, naming the key."""
    engine, p = mdb_shop
    with engine.begin() as conn:
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
        conn.exec_driver_sql(f"INSERT INTO {p}item (shop_id) VALUES (9999)")
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")
    with engine.connect() as conn:
        with pytest.raises(MigrationRefusedError, match="no matching"):
            plan_pk_migration(conn, f"{p}shop")
        from sqla_ids.migration import plan as planning

        monkeypatch.setattr(planning, "_dangling", lambda ctx: None)
        plan = plan_pk_migration(conn, f"{p}shop")
        with pytest.raises(MigrationVerificationError, match=f"1 rows of foreign key {p}item_shop"):
            _prove_references(conn, plan)
