"""True timestamps in the online key migration (issue 31, item 3).

With ``timestamp_column`` the online backfill gives each existing row the key
the offline mode would: its 48-bit millisecond is the row's time, kept from
going back by the key before it in old-key order (ties and times going back
take the next counter values; a ``NULL`` time the next number after the key
before) -- :func:`sqla_ids.migration.core.mapping.key_numbers`. Rows the
application inserts meanwhile get keys of their own time. A backfill stopped
half-way continues the same sequence, read back from the mapping table.

The shop of tests/online_app.py gets a timestamp column (a hostile name) whose
values increase with the old key, except for a run of ties (same millisecond,
different microseconds), a run going back three days and a few ``NULL``\\ s,
placed across batch boundaries (batches of 23).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import requirements as requires
import sqlalchemy as sa
from online_app import SHOPS, TEMP_KEY, Writer, check_relations, quoted, run_with_writer
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.identifiers.inspection import uuid7_bounds
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration import online as online_module
from sqla_ids.migration.core import mapping
from sqla_ids.migration.core.backfill import marked
from sqla_ids.migration.core.state import steps
from sqla_ids.types.uuid7 import UUIDv7

TS = 'made at"'
"""The timestamp column: a space and a double quote in its name."""
BASE = datetime(2024, 5, 6, 7, 8, 9, 123000)
EPOCH = datetime(1970, 1, 1)
BATCH = 23
TIES = range(40, 60)  # one millisecond, microseconds apart (crosses 46 = 2 x 23)
BACK = range(66, 73)  # three days back and more (crosses 69 = 3 x 23)
NULLS = (150, 151, 152)


def _time(n: int) -> datetime | None:
    if n in NULLS:
        return None
    if n in TIES:
        return BASE + timedelta(seconds=40, microseconds=300 * (n % 3))
    if n in BACK:
        return BASE - timedelta(days=3, hours=n)
    return BASE + timedelta(seconds=n)


TIMES = {n: _time(n) for n in range(1, SHOPS + 1)}


def _ms(value: datetime | None) -> int | None:
    return None if value is None else (value - EPOCH) // timedelta(milliseconds=1)


def _rising() -> set[int]:
    """Old keys whose time lies after every earlier row's: their key's time is
    theirs exactly (counter 0), whichever earlier rows were deleted."""
    rising, highest = set(), -1
    for n in range(1, SHOPS + 1):
        ms = _ms(TIMES[n])
        if ms is not None and ms > highest:
            rising.add(n)
        highest = max(highest, ms if ms is not None else -1)
    return rising


@pytest.fixture
def timed_shop(online_shop: Engine) -> Engine:
    """The shop with its timestamps (microseconds kept; new rows: the time now)."""
    engine = online_shop
    kind = (
        "DATETIME(6) NULL DEFAULT CURRENT_TIMESTAMP(6)"
        if requires.database_name(engine) == "mariadb"
        else "timestamp(6) NULL DEFAULT (now() AT TIME ZONE 'UTC')"
    )
    column = quoted(engine, TS)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {quoted(engine)} ADD COLUMN {column} {kind}")
        conn.execute(
            sa.text(f"UPDATE {quoted(engine)} SET {column} = :t WHERE id = :n"),
            [{"t": t, "n": n} for n, t in TIMES.items()],
        )
    return engine


def _keys(engine: Engine) -> dict[int, UUID]:
    """Old key -> new key of the seeded shops still there (after the swap)."""
    with engine.connect() as conn:
        found = conn.execute(
            sa.text(f"SELECT id_old, id FROM {quoted(engine)} WHERE id_old BETWEEN 1 AND :n"),
            {"n": SHOPS},
        ).all()
    return {int(old): UUID(str(new)) for old, new in found}


def _check_times(keys: dict[int, UUID]) -> None:
    """Strictly increasing in old-key order; a rising row's key carries its time;
    no key's time before its row's."""
    ordered = [keys[n] for n in sorted(keys)]
    assert ordered == sorted(ordered) and len(set(ordered)) == len(ordered)
    rising = _rising()
    for n, key in keys.items():
        number = mapping.key_number(key)
        ms = _ms(TIMES[n])
        if ms is None:
            continue
        if n in rising:
            assert number == ms << mapping.COUNTER_BITS, n
        else:
            assert number > ms << mapping.COUNTER_BITS, n
    assert len(rising & set(keys)) > SHOPS // 3


def _check_range(engine: Engine, keys: dict[int, UUID]) -> None:
    """``created_between`` over the history returns exactly the seeded rows, and
    over a stretch of rising times exactly those rows."""
    shops = sa.table("shop s", sa.column("id", UUIDv7()), sa.column("id_old"))
    base = BASE.replace(tzinfo=UTC)  # (the stored times are read as UTC)
    start = base - timedelta(days=4)
    with engine.connect() as conn:
        found = conn.execute(
            sa.select(shops.c.id_old).where(
                shops.c.id.created_between(start, base + timedelta(seconds=SHOPS + 1))
            )
        ).scalars()
        assert sorted(int(n) for n in found) == sorted(keys)
        low, high = uuid7_bounds(base + timedelta(seconds=200), base + timedelta(seconds=250))
        found = conn.execute(
            sa.select(shops.c.id_old).where(shops.c.id.between(low, high))
        ).scalars()
        assert sorted(int(n) for n in found) == [n for n in range(200, 251) if n in keys]


def _check_new_rows(engine: Engine) -> None:
    """Rows the application inserted (stamped with their time by the column's
    default) have keys of their time, whether the backfill or the triggers gave
    them: none falls in the history."""
    with engine.connect() as conn:
        new = conn.execute(
            sa.text(f"SELECT id FROM {quoted(engine)} WHERE id_old > :n OR id_old < 0"),
            {"n": SHOPS},
        ).scalars()
        times = [mapping.key_number(UUID(str(k))) >> mapping.COUNTER_BITS for k in new]
    assert times and min(times) > _ms(BASE + timedelta(days=1))  # type: ignore[operator]


def _names(engine: Engine) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.exec_driver_sql(f"SELECT name, id FROM {quoted(engine)}").all())


def _undo(engine: Engine) -> None:
    with engine.connect() as conn:  # (MariaDB commits each step)
        restore_pk_from_uuid7(conn, "shop s")
        conn.commit()


@pytest.mark.slow_on("mariadb")  # quick loop: MariaDB with a writer is test_migration_online
def test_backfill_keys_carry_the_rows_times_with_the_application_writing(
    timed_shop: Engine,
) -> None:
    engine = timed_shop
    before = _names(engine)
    writer = run_with_writer(
        engine, False, "prepare", "swap", "contract", timestamp_column=TS, batch_size=BATCH
    )
    check_relations(engine, writer)
    keys = _keys(engine)
    assert len(keys) == SHOPS - len(writer.deleted)
    _check_times(keys)
    _check_range(engine, keys)
    _check_new_rows(engine)
    _undo(engine)
    after = _names(engine)
    for name, old in before.items():
        if name not in writer.deleted:
            assert after[name] == old, name
    check_relations(engine, writer)


def _stop_at(monkeypatch: pytest.MonkeyPatch, pause: int) -> None:
    """The run stops (as if killed) at its ``pause``-th pause between batches."""
    calls = {"n": 0}
    original = online_module.OnlineRun.pause

    def crash(self: online_module.OnlineRun) -> None:
        calls["n"] += 1
        if calls["n"] == pause:
            raise KeyboardInterrupt("killed")
        original(self)

    monkeypatch.setattr(online_module.OnlineRun, "pause", crash)


def _options(**more: Any) -> PkMigrationOptions:
    return PkMigrationOptions(
        online=True, timestamp_column=TS, batch_size=BATCH, batch_time=0, seed="é", **more
    )


@pytest.mark.slow
def test_a_stopped_backfill_continues_the_same_keys(
    timed_shop: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped after four batches (ties and the times going back on both sides of
    a stop), the application inserting rows meanwhile (keys of now, above every
    backfilled one), then run again in a new process's stead: every seeded row
    has exactly the offline rule's key, marked with its old key."""
    engine = timed_shop
    _stop_at(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt), engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", _options())
    monkeypatch.undo()
    with engine.begin() as conn:
        assert steps(conn)["shop s"] == "online:expanded"
        done = conn.exec_driver_sql(
            f"SELECT count(*) FROM {quoted(engine)} WHERE {TEMP_KEY} IS NOT NULL"
        ).scalar_one()
        assert done == 3 * BATCH
        conn.execute(
            sa.text(f"INSERT INTO {quoted(engine)} (name) VALUES (:n)"),
            [{"n": f"late{n}"} for n in range(5)],
        )
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", _options())
    keys = _keys(engine)
    numbers = mapping.key_numbers(_ms(TIMES[n]) for n in range(1, SHOPS + 1))
    assert [mapping.key_number(keys[n]) for n in range(1, SHOPS + 1)] == list(numbers)
    assert all(marked(key, "é", n) for n, key in keys.items())
    # The NULL times follow the key before them.
    assert [mapping.key_number(keys[n]) for n in (149, *NULLS)] == [
        mapping.key_number(keys[149]) + k for k in range(4)
    ]
    _check_range(engine, keys)
    _undo(engine)


@pytest.mark.slow
def test_a_timestamp_column_dropped_mid_backfill_is_refused(
    timed_shop: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = timed_shop
    _stop_at(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt), engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", _options())
    monkeypatch.undo()
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {quoted(engine)} DROP COLUMN {quoted(engine, TS)}")
    with (
        engine.connect() as conn,
        pytest.raises(MigrationRefusedError, match=r'timestamp column shop s\.made at" no longer'),
    ):
        migrate_pk_to_uuid7(conn, "shop s", _options())
    with engine.connect() as conn:
        assert steps(conn)["shop s"] == "online:expanded"
        done = conn.exec_driver_sql(
            f"SELECT count(*) FROM {quoted(engine)} WHERE {TEMP_KEY} IS NOT NULL"
        ).scalar_one()
        assert done == 2 * BATCH  # nothing more was backfilled


@pytest.mark.parametrize(
    ("column", "refusal"),
    [("id", r"shop s\.id has type"), ("nope", r"timestamp column shop s\.nope does not exist")],
)
def test_timestamp_columns_that_cannot_work_are_refused_before_any_change(
    timed_shop: Engine, column: str, refusal: str
) -> None:
    engine = timed_shop
    with (
        engine.connect() as conn,
        pytest.raises(MigrationRefusedError, match=refusal),
    ):
        migrate_pk_to_uuid7(
            conn, "shop s", PkMigrationOptions(online=True, timestamp_column=column)
        )
    with engine.connect() as conn:
        names = {c["name"] for c in sa.inspect(conn).get_columns("shop s")}
        assert not [n for n in names if n.startswith("sqla_ids_")]
        assert not sa.inspect(conn).has_table("shop s_uuid7_map")


# The migration alone in its process (this checkout's sqla_ids), SIGKILLed mid-backfill.
_MIGRATION = f"""
import os, sqlalchemy as sa
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
engine = sa.create_engine(os.environ["SQLA_IDS_KILL_URL"])
with engine.connect() as conn:
    migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True, batch_size=20,
        batch_pause=0.02, timestamp_column={TS!r}), phase="prepare")
"""


def _backfilled(engine: Engine) -> int:
    """Seeded shops with a new key (the application's new rows have theirs anyway)."""
    with engine.connect() as conn:
        try:
            return int(
                conn.execute(
                    sa.text(
                        f"SELECT count({TEMP_KEY}) FROM {quoted(engine)} WHERE id BETWEEN 1 AND :n"
                    ),
                    {"n": SHOPS},
                ).scalar_one()
            )
        except sa.exc.DBAPIError:  # not expanded yet
            return 0


@pytest.mark.slow
def test_killed_mid_backfill_then_resumed_with_the_application_writing(
    timed_shop: Engine,
) -> None:
    """SIGKILL once a third of the parents have keys; run again to the end while
    the application writes: the keys after the kill continue the sequence (a
    rising row's key carries its time exactly, none goes back)."""
    engine = timed_shop
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(
        os.environ,
        SQLA_IDS_KILL_URL=engine.url.render_as_string(hide_password=False),
        PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
    )
    writer = Writer(engine, key_updates=False, shops=quoted(engine))
    writer.start()
    try:
        process = subprocess.Popen([sys.executable, "-c", _MIGRATION], env=env)
        try:
            deadline = time.monotonic() + 60
            while _backfilled(engine) < SHOPS // 3:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.005)
            process.send_signal(signal.SIGKILL)
            process.wait()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        # Killed mid-backfill: some parents have keys, not every one left (the
        # application deletes parents meanwhile, those with keys too: a count
        # taken before the kill may not hold after it).
        assert 0 < _backfilled(engine) < SHOPS - len(writer.deleted)
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True, batch_size=20))
        time.sleep(0.1)
    finally:
        writer.stop.set()
        writer.join()
    check_relations(engine, writer)
    keys = _keys(engine)
    _check_times(keys)
    _check_range(engine, keys)
    _check_new_rows(engine)


@pytest.mark.slow
def test_text_keys_get_the_rule_s_keys_and_their_mark(online_private_engine: Engine) -> None:
    """Text old keys (quotes, unicode; sorted by the database's collation): the
    same keys as the rule gives in the database's key order, each marked with its
    old key's text; the child follows; the undo gives the keys back."""
    engine = online_private_engine
    mariadb = requires.database_name(engine) == "mariadb"
    key = "VARCHAR(20)" if mariadb else "text"
    when = "DATETIME(6)" if mariadb else "timestamp(6)"
    codes = ["a'b", "ä-1", "b\\\\c", "c d", "z", "é", "m", "n", "o"]
    times = [
        BASE,
        BASE,
        BASE - timedelta(days=1),
        None,
        *(BASE + timedelta(minutes=n) for n in range(5)),
    ]
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE code (k {key} PRIMARY KEY, {quoted(engine, TS)} {when})"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE uses (id INTEGER PRIMARY KEY, k {key} REFERENCES code (k))"
            if not mariadb
            else f"CREATE TABLE uses (id INTEGER PRIMARY KEY, k {key},"
            " FOREIGN KEY (k) REFERENCES code (k))"
        )
        conn.execute(
            sa.text("INSERT INTO code VALUES (:k, :t)"),
            [{"k": k, "t": t} for k, t in zip(codes, times, strict=True)],
        )
        conn.execute(
            sa.text("INSERT INTO uses VALUES (:n, :k)"),
            [{"n": n, "k": k} for n, k in enumerate(codes)],
        )
        ordered = conn.exec_driver_sql(f"SELECT k, {quoted(engine, TS)} FROM code ORDER BY k").all()
    with engine.connect() as conn:
        migrate_pk_to_uuid7(
            conn,
            "code",
            PkMigrationOptions(online=True, timestamp_column=TS, batch_size=2, seed="s"),
        )
    with engine.connect() as conn:
        new = dict(conn.exec_driver_sql("SELECT k_old, k FROM code").all())
        pairs = conn.exec_driver_sql(
            "SELECT u.id, c.k_old FROM uses u JOIN code c ON c.k = u.k"
        ).all()
    numbers = mapping.key_numbers(_ms(t) for _, t in ordered)
    for (old, _), number in zip(ordered, numbers, strict=True):
        assert mapping.key_number(UUID(str(new[old]))) == number, old
        assert marked(UUID(str(new[old])), "s", old), old
    assert sorted(pairs) == list(enumerate(codes))
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, "code")
        conn.commit()
    with engine.connect() as conn:
        assert sorted(conn.exec_driver_sql("SELECT id, k FROM uses").all()) == list(
            enumerate(codes)
        )
