"""add_uuid7_key / drop_uuid7_key and op.add_uuid7_key on the three databases, with
hostile names: keys unique and in the chosen order (timestamp, unique key, ordering
columns, physical), the timestamps carried, the round trip back to the original
schema and rows, and the refusals (before any change, naming what was refused)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import dbsnapshot
import pytest
import sqlalchemy as sa
from alembic.migration import MigrationContext
from alembic.operations import Operations
from audit_triggers import audited
from sqlalchemy.engine import Connection, Engine

import sqla_ids.alembic  # noqa: F401 - registers op.add_uuid7_key
from sqla_ids.alembic.add_key import AddUUID7KeyOp, DropUUID7KeyOp
from sqla_ids.dialects.sql import execute_sql, quote_name
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import AddKeyOptions, add_uuid7_key, drop_uuid7_key, plan_add_uuid7_key
from sqla_ids.migration.core.added_key import RECORD_TABLE
from sqla_ids.types.uuid7 import UUIDv7

TABLE = 'lo`g "Bö\'r" %s :x'
KEY = 'k\'ey "ü" `z` %(n)s'
TS = 'when "ü" %s'
SEQ = "se`q :n"
CODE = "co'de"
UNIQUE = 'uq "cö`de"'
ROWS = 57
START = datetime(2024, 5, 6, 7, 8, 9)
BATCH = 10  # several batches, a partial last one


def _create(conn: Connection, *, unique: bool = True) -> sa.Table:
    """The keyless table: a sequence number, a timestamp that ties and goes back,
    a unique code whose order differs from both, a payload."""
    metadata = sa.MetaData()
    table = sa.Table(
        TABLE,
        metadata,
        sa.Column(SEQ, sa.Integer, nullable=False),
        sa.Column(TS, sa.DateTime),
        sa.Column(CODE, sa.String(20), nullable=False),
        sa.Column("payload 'p'", sa.Text),
        sa.Index("ix \"ts\" 'i'", TS),
    )
    if unique:
        table.append_constraint(sa.UniqueConstraint(CODE, name=UNIQUE))
    metadata.create_all(conn)
    return table


def _rows() -> list[dict[str, Any]]:
    """Inserted in this order (the physical order): seq descending; timestamps
    rising with ties and steps back; codes in a third order."""
    out = []
    for i in range(ROWS):
        back = -3 if i % 11 == 5 else 0
        out.append(
            {
                SEQ: 1000 - i,
                TS: START + timedelta(milliseconds=(i // 2) * 7 + back),
                CODE: f"c{(i * 23) % ROWS:03d}",
                "payload 'p'": f"row {i} \"q\" 'a' %s",
            }
        )
    return out


@pytest.fixture
def log(private_engine: Engine) -> Engine:
    with private_engine.begin() as conn:
        table = _create(conn)
        conn.execute(sa.insert(table), _rows())
    return private_engine


def _snapshot(engine: Engine) -> tuple[list[str], dict[str, Any]]:
    with engine.connect() as conn:
        return dbsnapshot.schema(conn), dbsnapshot.rows(conn)


def _keyed(engine: Engine, order_by: str) -> list[tuple[UUID, Any, Any]]:
    """(key, seq, ts) of every row, sorted by ``order_by``."""
    t = sa.table(
        TABLE,
        sa.column(KEY, UUIDv7()),
        sa.column(SEQ),
        sa.column(TS, sa.DateTime()),
        sa.column(CODE),
    )
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(sa.select(t.c[KEY], t.c[SEQ], t.c[TS]).order_by(t.c[order_by]))
        ]


def _ms(key: UUID) -> int:
    return key.int >> 80


def _epoch_ms(value: datetime) -> int:
    return (value.replace(tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(
        milliseconds=1
    )


def _assert_sorted_and_unique(rows: list[tuple[UUID, Any, Any]]) -> None:
    keys = [r[0] for r in rows]
    assert len(set(keys)) == ROWS
    assert keys == sorted(keys), "keys do not follow the chosen order"
    assert all(k.version == 7 for k in keys)


def _names(names: Any) -> list[str]:
    """SQLAlchemy's MariaDB reflection leaves backticks in names doubled."""
    return [n.replace("``", "`") for n in names if n is not None]


def _pk(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return _names(sa.inspect(conn).get_pk_constraint(TABLE)["constrained_columns"])


def _uniques(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        found = [u["name"] for u in inspector.get_unique_constraints(TABLE)]
        found += [i["name"] for i in inspector.get_indexes(TABLE) if i["unique"]]
    # SQLAlchemy's SQLite reflection leaves a constraint name's quotes doubled.
    return [n.replace('""', '"') for n in _names(found)]


def test_ordered_by_columns_with_times_round_trip(log: Engine) -> None:
    """order_by=seq with the times of a column that ties and goes back: keys in seq
    order, each carrying the running maximum of the times (ties: next counter)."""
    before = _snapshot(log)
    with log.connect() as conn:
        plan = add_uuid7_key(
            conn, TABLE, column=KEY, order_by=SEQ, timestamp_column=TS, batch_size=BATCH, seed="s"
        )
        conn.commit()
    assert plan.row_count == ROWS and plan.order_columns == [SEQ]
    assert _pk(log) == [KEY]
    rows = _keyed(log, SEQ)
    _assert_sorted_and_unique(rows)
    running = 0
    for key, _seq, when in rows:
        running = max(running, _epoch_ms(when))
        assert _ms(key) == running
    with log.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()
    assert _snapshot(log) == before


def test_timestamp_column_orders(private_engine: Engine) -> None:
    """timestamp_column alone: the order and the keys' times (unique timestamps)."""
    with private_engine.begin() as conn:
        table = _create(conn)
        data = _rows()
        for i, row in enumerate(data):
            row[TS] = START + timedelta(seconds=(i * 37) % ROWS)
        conn.execute(sa.insert(table), data)
    before = _snapshot(private_engine)
    with private_engine.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY, timestamp_column=TS, batch_size=BATCH)
        conn.commit()
    rows = _keyed(private_engine, TS)
    _assert_sorted_and_unique(rows)
    assert [_ms(k) for k, _s, _t in rows] == [_epoch_ms(t) for _k, _s, t in rows]
    with private_engine.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()
    assert _snapshot(private_engine) == before


def test_unique_key_dropped_and_restored(log: Engine) -> None:
    """unique_key orders the keys; keep_unique_key=False drops it once the primary
    key exists, and the downgrade puts it back as it was."""
    before = _snapshot(log)
    with log.connect() as conn:
        add_uuid7_key(
            conn, TABLE, AddKeyOptions(column=KEY, unique_key=UNIQUE, keep_unique_key=False)
        )
        conn.commit()
    _assert_sorted_and_unique(_keyed(log, CODE))
    assert UNIQUE not in _uniques(log) and _pk(log) == [KEY]
    with log.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()
    assert _snapshot(log) == before


def test_unique_key_kept(log: Engine) -> None:
    with log.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY, unique_key=UNIQUE, batch_size=BATCH)
        conn.commit()
    assert UNIQUE in _uniques(log) and _pk(log) == [KEY]
    _assert_sorted_and_unique(_keyed(log, CODE))


def test_physical_order_and_default_column(private_engine: Engine) -> None:
    """No order given: the insertion (physical) order -- seq descending here --
    the time of the run, and the column ``id``. (On MariaDB the physical order is
    the clustered index's: a unique ``NOT NULL`` key's when there is one, so this
    table has none.)"""
    log = private_engine
    with log.begin() as conn:
        conn.execute(sa.insert(_create(conn, unique=False)), _rows())
    before = _snapshot(log)
    with log.connect() as conn:
        plan = add_uuid7_key(conn, TABLE, batch_size=BATCH)
        conn.commit()
    assert plan.column == "id" and plan.order_columns == []
    t = sa.table(TABLE, sa.column("id", UUIDv7()), sa.column(SEQ))
    with log.connect() as conn:
        rows = conn.execute(sa.select(t.c.id, t.c[SEQ]).order_by(t.c[SEQ].desc())).all()
    keys = [r[0] for r in rows]
    assert len(set(keys)) == ROWS and keys == sorted(keys)
    assert {_ms(k) for k in keys} <= set(range(plan.base_time_ms, plan.base_time_ms + 1))
    with log.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()
    assert _snapshot(log) == before


def test_server_default_fills_new_rows(log: Engine) -> None:
    """PostgreSQL and MariaDB: rows inserted without a key get one from the server,
    after the existing ones; SQLite has no server function (the application gives
    keys), so there the key is required."""
    with log.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY, order_by=SEQ)
        conn.commit()
    t = sa.table(TABLE, sa.column(KEY, UUIDv7()), sa.column(SEQ), sa.column(CODE))
    with log.connect() as conn:
        if conn.dialect.name == "sqlite":
            with pytest.raises(sa.exc.IntegrityError):
                conn.execute(sa.insert(t).values({SEQ: 1, CODE: "new"}))
            return
        conn.execute(sa.insert(t).values({SEQ: 1, CODE: "new"}))
        conn.commit()
        new = conn.execute(sa.select(t.c[KEY]).where(t.c[CODE] == "new")).scalar_one()
        top = conn.execute(sa.select(sa.func.count()).select_from(t).where(t.c[KEY] > new)).scalar()
    assert new.version == 7 and top == 0
    with log.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()


def _refused(engine: Engine, match: str, **options: Any) -> None:
    before = _snapshot(engine)
    with engine.connect() as conn, pytest.raises(MigrationRefusedError, match=match) as error:
        add_uuid7_key(conn, TABLE, **options)
    assert "nothing was changed" in str(error.value)
    assert _snapshot(engine) == before


def test_refuses_nulls_and_duplicates_by_name(log: Engine) -> None:
    t = sa.table(TABLE, sa.column(TS), sa.column(SEQ))
    with log.begin() as conn:
        conn.execute(sa.update(t).where(t.c[SEQ] == 1000).values({TS: None}))
    # Timestamps tie (two rows a step) and one is NULL now.
    _refused(log, r"ordering column .*when .*1 NULL value", column=KEY, timestamp_column=TS)
    _refused(log, r"duplicated value", column=KEY, order_by=(TS,))
    with log.begin() as conn:
        conn.execute(sa.update(t).where(t.c[SEQ] == 999).values({SEQ: 998}))
    _refused(log, r"se`q :n holds 1 duplicated value", column=KEY, order_by=SEQ)


def test_refusals_before_any_change(log: Engine) -> None:
    _refused(log, "column .*co'de already exists", column=CODE)
    _refused(log, "no unique constraint or unique index 'nope'", unique_key="nope")
    _refused(log, "column .*nope does not exist", order_by=("nope", SEQ))
    _refused(log, "has type .* not a date or timestamp", timestamp_column=CODE, order_by=SEQ)
    if log.dialect.name == "sqlite":  # (online elsewhere: test_migration_add_key_online)
        _refused(log, "online=True is not available on SQLite", online=True)
    with log.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY, order_by=SEQ)
        conn.commit()
    _refused(log, r"already has a primary key .*k'ey", column="other")
    with pytest.raises(ValueError, match=r"unique_key .* or order_by"):
        AddKeyOptions(unique_key=UNIQUE, order_by=(SEQ,))
    with pytest.raises(ValueError, match="keep_unique_key=False needs unique_key"):
        AddKeyOptions(keep_unique_key=False)


def test_drop_refused_without_record(log: Engine) -> None:
    with log.connect() as conn, pytest.raises(MigrationRefusedError, match="no add_uuid7_key"):
        drop_uuid7_key(conn, TABLE)


def test_dry_run_changes_nothing(log: Engine) -> None:
    before = _snapshot(log)
    with log.connect() as conn:
        plan = plan_add_uuid7_key(conn, TABLE, column=KEY, unique_key=UNIQUE)
        assert plan.order_columns == [CODE] and plan.row_count == ROWS
        assert add_uuid7_key(conn, TABLE, column=KEY, dry_run=True).row_count == ROWS
        conn.rollback()
    assert _snapshot(log) == before


def _operations(conn: Connection) -> Operations:
    return Operations(MigrationContext.configure(conn))


def test_alembic_operation_and_its_reverse(log: Engine) -> None:
    """op.add_uuid7_key, then its reverse() (what autogenerate writes into
    downgrade) -- op.drop_uuid7_key -- back to the original."""
    before = _snapshot(log)
    upgrade = AddUUID7KeyOp(TABLE, column=KEY, order_by=[SEQ], timestamp_column=TS)
    with log.connect() as conn:
        ops: Any = _operations(conn)  # add_uuid7_key is registered at run time
        ops.add_uuid7_key(TABLE, column=KEY, order_by=[SEQ], timestamp_column=TS)
        conn.commit()
    _assert_sorted_and_unique(_keyed(log, SEQ))
    downgrade = upgrade.reverse()
    assert isinstance(downgrade, DropUUID7KeyOp)
    with log.connect() as conn:
        _operations(conn).invoke(downgrade)
        conn.commit()
    assert _snapshot(log) == before
    assert isinstance(downgrade.reverse(), AddUUID7KeyOp)


LINK = 'tag `link` "ü"'
PARENT = "pa'rent"


@pytest.mark.filterwarnings("ignore:.*SQL-parsed foreign key constraint")
def test_link_table_composite_order(private_engine: Engine) -> None:
    """A link table without a primary key: ordered by its two foreign-key columns
    (keyset over both, small batches), its foreign keys kept; round trip."""
    metadata = sa.MetaData()
    parent = sa.Table(PARENT, metadata, sa.Column("i d", sa.Integer, primary_key=True))
    link = sa.Table(
        LINK,
        metadata,
        sa.Column("a`", sa.Integer, sa.ForeignKey(parent.c["i d"]), nullable=False),
        sa.Column('b "', sa.Integer, sa.ForeignKey(parent.c["i d"]), nullable=False),
    )
    pairs = [(a, b) for a in range(1, 8) for b in range(7, 0, -1) if (a * b) % 3]
    with private_engine.begin() as conn:
        metadata.create_all(conn)
        conn.execute(sa.insert(parent), [{"i d": i} for i in range(1, 8)])
        conn.execute(sa.insert(link), [{"a`": a, 'b "': b} for a, b in reversed(pairs)])
    before = _snapshot(private_engine)
    with private_engine.connect() as conn:
        add_uuid7_key(conn, LINK, order_by=("a`", 'b "'), batch_size=4)
        conn.commit()
    t = sa.table(LINK, sa.column("id", UUIDv7()), sa.column("a`"), sa.column('b "'))
    with private_engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.id, t.c["a`"], t.c['b "']).order_by(t.c.id)).all()
        fks = sa.inspect(conn).get_foreign_keys(LINK)
    assert [(a, b) for _k, a, b in rows] == sorted(pairs)
    assert len({r[0] for r in rows}) == len(pairs) and len(fks) == 2
    with private_engine.connect() as conn:
        drop_uuid7_key(conn, LINK)
        conn.commit()
    assert _snapshot(private_engine) == before


def test_unique_index_dropped_and_restored(private_engine: Engine) -> None:
    """A unique *index* (not a constraint) as the order, dropped and recreated."""
    with private_engine.begin() as conn:
        table = _create(conn, unique=False)
        sa.Index(UNIQUE, table.c[CODE], unique=True).create(conn)
        conn.execute(sa.insert(table), _rows())
    before = _snapshot(private_engine)
    with private_engine.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY, unique_key=UNIQUE, keep_unique_key=False)
        conn.commit()
    _assert_sorted_and_unique(_keyed(private_engine, CODE))
    assert UNIQUE not in _uniques(private_engine)
    with private_engine.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()
    assert _snapshot(private_engine) == before


def test_failure_midway_leaves_the_table_as_it_was(
    log: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL and SQLite roll back; MariaDB (whose DDL commits) drops what the
    run added."""
    from sqla_ids.migration import add_key as runner

    real = runner.fill_keys  # type: ignore[attr-defined]

    def fill_then_fail(*args: Any, **kwargs: Any) -> int:
        real(*args, **kwargs)
        raise RuntimeError("the server went away")

    before = _snapshot(log)
    monkeypatch.setattr(runner, "fill_keys", fill_then_fail)
    with log.connect() as conn, pytest.raises(RuntimeError, match="went away"):
        add_uuid7_key(conn, TABLE, column=KEY, order_by=SEQ, batch_size=BATCH)
    assert _snapshot(log) == before


def test_mariadb_physical_order_is_the_clustered_index(mariadb_private_engine: Engine) -> None:
    """InnoDB clusters a table without a primary key on its first unique NOT NULL
    key: that is its physical order (the order of SELECT *)."""
    log = mariadb_private_engine
    with log.begin() as conn:
        conn.execute(sa.insert(_create(conn)), _rows())
    with log.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY)
    _assert_sorted_and_unique(_keyed(log, CODE))


def test_mariadb_refuses_an_auto_increment_column(mariadb_private_engine: Engine) -> None:
    with mariadb_private_engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE `lo``g` (n INT NOT NULL AUTO_INCREMENT, v INT, UNIQUE KEY (n))"
        )
    with (
        mariadb_private_engine.connect() as conn,
        pytest.raises(MigrationRefusedError, match="column n is AUTO_INCREMENT"),
    ):
        add_uuid7_key(conn, "lo`g")


def test_rendered_operations() -> None:
    from alembic.autogenerate import renderers
    from alembic.autogenerate.api import AutogenContext

    op = AddUUID7KeyOp("event_log", order_by=["logged_at", "seq"], timestamp_column="logged_at")
    context = AutogenContext(MigrationContext.configure(dialect_name="postgresql"))
    assert renderers.dispatch(op)(context, op) == (
        "op.add_uuid7_key('event_log', order_by=['logged_at', 'seq'], timestamp_column='logged_at')"
    )
    reverse = op.reverse()
    assert renderers.dispatch(reverse)(context, reverse).startswith("op.drop_uuid7_key(")


# An unnamed UNIQUE constraint: SQLite names its index sqlite_autoindex_<table>_<n>,
# the name add_uuid7_key accepts. Everything else of the CREATE TABLE text (comments,
# collations, checks, a default with a comma, ON CONFLICT) must survive the rebuild.
SQLITE_UNNAMED = {
    "table": (
        'CREATE TABLE "lo""g `ü`" (\n  "a""x" INTEGER NOT NULL, -- the a, (b)\n'
        "  `b c` TEXT COLLATE NOCASE NOT NULL,\n  [p q] TEXT DEFAULT 'x, (y)' CHECK"
        ' (length([p q]) < 100),\n  UNIQUE ("a""x", `b c`) ON CONFLICT ABORT,\n'
        '  CONSTRAINT "ch ""k""" CHECK ("a""x" > 0)\n)'
    ),
    "column": (
        'CREATE TABLE "lo""g `ü`" ("a""x" INTEGER NOT NULL CONSTRAINT "u ""1""" UNIQUE,'
        " `b c` TEXT COLLATE NOCASE NOT NULL UNIQUE ON CONFLICT ROLLBACK /* keep */,"
        " [p q] TEXT DEFAULT 'x, (y)' CHECK (length([p q]) < 100))"
    ),
}
SQLITE_TABLE = 'lo"g `ü`'


def _master(engine: Engine) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return sorted(
            tuple(r)
            for r in conn.exec_driver_sql(
                "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE tbl_name = ?",
                (SQLITE_TABLE,),
            )
        )


def _unique_indexes(engine: Engine) -> dict[str, list[str]]:
    with engine.connect() as conn:
        found = {}
        for _, name, unique, origin, _ in conn.exec_driver_sql('PRAGMA index_list("lo""g `ü`")'):
            if unique and origin != "pk":
                quoted = '"' + name.replace('"', '""') + '"'
                found[name] = [r[2] for r in conn.exec_driver_sql(f"PRAGMA index_info({quoted})")]
        return found


@pytest.mark.parametrize("where", sorted(SQLITE_UNNAMED))
def test_sqlite_unnamed_unique_dropped_by_its_autoindex_name(
    sqlite_engine: Engine, tmp_path: Any, where: str
) -> None:
    """The unnamed UNIQUE goes from the CREATE TABLE text and nothing else does;
    the drop puts back the exact original schema and rows."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'unnamed.sqlite3'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(SQLITE_UNNAMED[where])
        conn.exec_driver_sql('CREATE INDEX "ix ""p""" ON "lo""g `ü`" ([p q])')
        for i in range(ROWS):
            conn.exec_driver_sql(
                'INSERT INTO "lo""g `ü`" VALUES (?, ?, ?)', (ROWS - i, f"b{i:03d}", f"p {i}")
            )
    before, master = _snapshot(engine), _master(engine)
    uniques = _unique_indexes(engine)
    target = next(n for n, cols in uniques.items() if cols[-1] == "b c")
    assert target.startswith("sqlite_autoindex_")
    with engine.connect() as conn:
        add_uuid7_key(
            conn,
            SQLITE_TABLE,
            column=KEY,
            unique_key=target,
            keep_unique_key=False,
            batch_size=BATCH,
        )
        conn.commit()
    after = _unique_indexes(engine)
    assert sorted(after.values()) == sorted(c for n, c in uniques.items() if n != target)
    with engine.connect() as conn:
        create = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (SQLITE_TABLE,)
        ).scalar_one()
        assert sa.inspect(conn).get_pk_constraint(SQLITE_TABLE)["constrained_columns"] == [KEY]
    for kept in ("COLLATE NOCASE", "DEFAULT 'x, (y)'", "CHECK (length([p q]) < 100)"):
        assert kept in create
    if where == "table":
        assert "-- the a, (b)" in create and 'CONSTRAINT "ch ""k""" CHECK' in create
        assert "UNIQUE" not in create
    else:
        assert 'CONSTRAINT "u ""1""" UNIQUE' in create and "/* keep */" in create
        assert "ROLLBACK" not in create
    with engine.connect() as conn:
        drop_uuid7_key(conn, SQLITE_TABLE)
        conn.commit()
    assert _master(engine) == master
    assert _snapshot(engine) == before
    engine.dispose()


# Runs add_uuid7_key in a child process and kills it (SIGKILL) at a chosen point.
ADD_KEY_CHILD = """
import os, signal, sys
import sqlalchemy as sa
from sqla_ids.migration import add_key as runner
from sqla_ids.migration.core import progress
from sqla_ids.migration.backends.mysql import add_key as mysql_add_key

url, table, column, seq, ts, point = sys.argv[1:7]

def kill(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "batch":
    calls = []
    real_advance = progress.Progress.advance
    def advance(self, n):
        calls.append(n)
        if len(calls) == 3:
            kill()
        real_advance(self, n)
    progress.Progress.advance = advance
elif point == "finish":
    mysql_add_key.MariaDBKeyAdder.finish = kill
elif point == "triggers":
    real_sql = mysql_add_key.uuid7_column_trigger_sql
    calls = []
    def trigger_sql(*args):
        calls.append(1)
        if len(calls) == 2:  # the first is the plan's check, the second after the rebuild
            kill()
        return real_sql(*args)
    mysql_add_key.uuid7_column_trigger_sql = trigger_sql
elif point == "verify":
    runner._verify = kill

engine = sa.create_engine(url)
with engine.connect() as conn:
    runner.add_uuid7_key(conn, table, column=column, order_by=seq, timestamp_column=ts,
                         unique_key=None, batch_size=10, seed="killed")
print("finished without being killed")
"""

KILL_POINTS = ["batch", "finish", "triggers", "verify"]


def _killed_run(engine: Engine, point: str) -> None:
    import subprocess
    import sys

    url = engine.url.render_as_string(hide_password=False)
    done = subprocess.run(
        [sys.executable, "-c", ADD_KEY_CHILD, url, TABLE, KEY, SEQ, TS, point],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, (done.returncode, done.stdout, done.stderr)


def _add_killed_options() -> dict[str, Any]:
    return {"column": KEY, "order_by": SEQ, "timestamp_column": TS, "batch_size": BATCH,
            "seed": "killed"}  # fmt: skip


def _unrecorded(snapshot: tuple[list[str], dict[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """The snapshot without the record's rows (its plan holds the time of the run)."""
    schema, rows = snapshot
    assert len(rows[RECORD_TABLE]) == 1
    return schema, {t: r for t, r in rows.items() if t != RECORD_TABLE}


@pytest.mark.slow
@pytest.mark.parametrize("point", KILL_POINTS)
def test_mariadb_killed_run_continues(mariadb_private_engine: Engine, point: str) -> None:
    """A run killed between (or in) its rebuilds: the re-run finishes it, and the
    result equals a clean run's; then the drop gives back the original."""
    log = mariadb_private_engine
    with log.begin() as conn:
        conn.execute(sa.insert(_create(conn)), _rows())
        _audited(conn)  # an UPDATE trigger, parked while the fill writes
    before = _snapshot(log)
    _killed_run(log, point)
    if point == "batch":  # killed after its third batch: the re-run fills the rest
        with log.connect() as conn:
            key: sa.ColumnClause[Any] = sa.column(KEY)
            filled = conn.execute(sa.select(sa.func.count(key)).select_from(sa.table(TABLE, key)))
            assert filled.scalar_one() == 3 * BATCH
    assert _snapshot(log) != before
    with log.connect() as conn:
        add_uuid7_key(conn, TABLE, **_add_killed_options())
    resumed = _unrecorded(_snapshot(log))
    with log.connect() as conn:
        drop_uuid7_key(conn, TABLE)
    assert _snapshot(log) == before
    with log.connect() as conn:
        add_uuid7_key(conn, TABLE, **_add_killed_options())
    assert _unrecorded(_snapshot(log)) == resumed
    _assert_sorted_and_unique(_keyed(log, SEQ))


@pytest.mark.slow
@pytest.mark.parametrize("point", KILL_POINTS)
def test_mariadb_killed_run_dropped(mariadb_private_engine: Engine, point: str) -> None:
    """drop_uuid7_key after a killed run removes whatever it left, and puts back
    the UPDATE trigger it had parked."""
    log = mariadb_private_engine
    with log.begin() as conn:
        conn.execute(sa.insert(_create(conn)), _rows())
        _audited(conn)
    before = _snapshot(log)
    _killed_run(log, point)
    with log.connect() as conn:
        drop_uuid7_key(conn, TABLE)
    assert _snapshot(log) == before


def test_mariadb_killed_run_refuses_other_options(mariadb_private_engine: Engine) -> None:
    log = mariadb_private_engine
    with log.begin() as conn:
        conn.execute(sa.insert(_create(conn)), _rows())
    _killed_run(log, "finish")
    with (
        log.connect() as conn,
        pytest.raises(MigrationRefusedError, match=r"interrupted.*same options"),
    ):
        add_uuid7_key(conn, TABLE, column=KEY, order_by=SEQ, batch_size=BATCH)


AUDIT = "au`dit 'log'"


def _audited(conn: Connection) -> None:
    audited(conn, TABLE, AUDIT, CODE)


@pytest.mark.parametrize("online", [False, True], ids=["offline", "online"])
def test_the_fill_is_no_application_update(log: Engine, online: bool) -> None:
    """The fill writes every row, which is not an application update: no UPDATE
    trigger fires on it (no audit row, ``updated`` untouched; MariaDB's ``ON
    UPDATE CURRENT_TIMESTAMP`` keeps its value), and the triggers are there and
    fire again for the application afterwards (PostgreSQL offline: disabled
    meanwhile; online: the fill is a replica session; MariaDB: dropped and
    recreated; SQLite: dropped and replayed)."""
    if online and log.dialect.name == "sqlite":
        pytest.skip("SQLite refuses online=True (test_refusals_before_any_change)")
    with log.begin() as conn:
        _audited(conn)
        if online:  # (found again by it, row by row: refused unindexed)
            q = conn.dialect.identifier_preparer.quote
            conn.exec_driver_sql(f"CREATE INDEX seq_ix ON {q(TABLE)} ({q(SEQ)})")
    before = _snapshot(log)
    with log.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY, order_by=SEQ, batch_size=BATCH, online=online)
        conn.commit()
    t = sa.table(TABLE, sa.column(CODE), sa.column("updated"), sa.column(SEQ))
    with log.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(sa.table(AUDIT))).scalar() == 0
        stamps = set(conn.execute(sa.select(t.c.updated)).scalars())
        assert {str(s) for s in stamps} == {"2001-01-01 00:00:00"}
    with log.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()
    assert _snapshot(log) == before  # the triggers exactly as they were
    with log.begin() as conn:  # and they fire for the application
        conn.execute(sa.update(t).where(t.c[SEQ] == 1000).values({CODE: "zz"}))
        assert conn.execute(sa.select(sa.func.count()).select_from(sa.table(AUDIT))).scalar() == 1


_PG_UNIQUE = {
    # A constraint deferred, with INCLUDE columns and a fill factor; an index too.
    "constraint": "ALTER TABLE {t} ADD CONSTRAINT {u} UNIQUE ({c}) INCLUDE ({s})"
    " WITH (fillfactor = 70) DEFERRABLE INITIALLY DEFERRED",
    "index": "CREATE UNIQUE INDEX {u} ON {t} ({c} DESC) INCLUDE ({s}) WITH (fillfactor = 70)",
}
_PG_COMMENTS = {
    "constraint": ["COMMENT ON CONSTRAINT {u} ON {t} IS 'the code''s \"key\" %s'"],
    "index": ["COMMENT ON INDEX {u} IS 'the code''s \"index\" %s'"],
}


@pytest.mark.parametrize(
    "database, kind, drop",
    [
        ("postgresql", "constraint", "offline"),
        ("postgresql", "index", "offline"),
        ("postgresql", "constraint", "online, in a transaction"),
        ("postgresql", "constraint", "online, autocommit"),
        ("postgresql", "index", "online, autocommit"),
        ("postgresql", "constraint", "online, Alembic downgrade"),
        ("mariadb", "index", "offline"),
        ("mariadb", "index", "online, autocommit"),
    ],
)
def test_the_unique_key_comes_back_exactly(
    request: pytest.FixtureRequest, database: str, kind: str, drop: str
) -> None:
    """The unique key ``keep_unique_key=False`` dropped comes back on
    ``drop_uuid7_key`` with all it had: its comments, ``DEFERRABLE``,
    ``INCLUDE``, storage parameters, ``DESC`` columns (MariaDB: its
    ``COMMENT``, a ``DESC`` column and a prefix length). Online on a
    connection in autocommit mode, PostgreSQL builds its index ``CONCURRENTLY``
    (a stopped build's invalid index dropped and built again) and makes the
    constraint from it ``USING INDEX``: no write waits for the build."""
    engine: Engine = request.getfixturevalue(f"{database}_private_engine")
    online = drop != "offline"
    q = functools.partial(quote_name, engine.dialect)
    names = {"t": q(TABLE), "u": q(UNIQUE), "c": q(CODE), "s": q(SEQ)}
    with engine.begin() as conn:
        table = _create(conn, unique=False)
        conn.execute(sa.insert(table), _rows())
        if database == "postgresql":
            for sql in [_PG_UNIQUE[kind], *_PG_COMMENTS[kind]]:
                execute_sql(conn, sql.format(**names))
        else:
            key = "UNIQUE KEY {u} ({c}(3) DESC, {s}) COMMENT 'the code''s %s'"
            execute_sql(conn, f"ALTER TABLE {{t}} ADD {key}".format(**names))
    before = _snapshot(engine)
    with engine.connect() as conn:
        add_uuid7_key(
            conn,
            TABLE,
            column=KEY,
            unique_key=UNIQUE,
            keep_unique_key=False,
            online=online,
        )
        conn.commit()
    assert UNIQUE not in _uniques(engine)
    autocommit = drop in ("online, autocommit", "online, Alembic downgrade")
    if drop == "online, autocommit" and database == "postgresql":
        # A build stopped midway left the index in the catalog, invalid.
        stopped = "CREATE UNIQUE INDEX CONCURRENTLY {u} ON {t} ((1))".format(**names)
        with (
            engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn,
            pytest.raises(sa.exc.IntegrityError),
        ):
            execute_sql(conn, stopped)
    statements: list[str] = []

    def sent(*args: Any) -> None:
        statements.append(args[2])

    sa.event.listen(engine, "before_cursor_execute", sent)
    with engine.connect() as conn:
        if drop == "online, Alembic downgrade":
            # The downgrade's op.drop_uuid7_key of a key added online runs in an
            # autocommit block, as the upgrade did: built CONCURRENTLY.
            context = MigrationContext.configure(conn)
            with context.begin_transaction():
                Operations(context).drop_uuid7_key(TABLE)
        else:
            if autocommit:
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            drop_uuid7_key(conn, TABLE)
        conn.commit()
    sa.event.remove(engine, "before_cursor_execute", sent)
    after = _snapshot(engine)
    assert sorted(set(after[0]) - set(before[0])) == sorted(set(before[0]) - set(after[0]))
    assert after == before
    if database == "postgresql":
        built = [s for s in statements if "CREATE UNIQUE INDEX" in s or "UNIQUE (" in s]
        assert len(built) == 1, built
        assert all("CONCURRENTLY" in s for s in built) == autocommit, built
        if autocommit and kind == "constraint":
            assert any("USING INDEX" in s for s in statements)
