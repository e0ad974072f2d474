"""``add_uuid7_key(..., online=True)`` on PostgreSQL and MariaDB while the application writes.

An application thread inserts rows (leaving the key to the server), updates
rows (which moves them: a new ``ctid``), deletes rows and holds transactions
open on the table, the whole time the key is added; none of its statements may
fail, and at the end every row -- the application's included -- has its own
key, the original rows' keys in the chosen order. A run killed at each of its
steps is finished by running it again, or undone by ``drop_uuid7_key``.
"""

from __future__ import annotations

import logging
import random
import re
import subprocess
import sys
import threading
import time
from typing import Any
from uuid import UUID

import dbsnapshot
import pytest
import sqlalchemy as sa
from audit_triggers import audited
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import add_uuid7_key, drop_uuid7_key
from sqla_ids.types.uuid7 import UUIDv7

TABLE = 'ev`ent "lö\'g"'
KEY = 'k\'ey "ü"'
SEQ = "se`q"
CODE = "co'de"
UNIQUE = 'uq "code"'
AUDIT = "au`dit"
ROWS = 300


def _create(engine: Engine) -> sa.Table:
    metadata = sa.MetaData()
    table = sa.Table(
        TABLE,
        metadata,
        sa.Column(SEQ, sa.Integer, nullable=False, unique=True),
        sa.Column(CODE, sa.String(20), nullable=False),
        sa.Column("payload", sa.Text),
        sa.UniqueConstraint(CODE, name=UNIQUE),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(table),
            [
                {SEQ: 10_000 - i, CODE: f"c{(i * 37) % ROWS:04d}", "payload": f"p{i}"}
                for i in range(ROWS)
            ],
        )
    return table


class _App(threading.Thread):
    """The application: inserts, updates (payload), deletes, and transactions
    left open for a moment -- every statement counted, every failure kept."""

    def __init__(self, engine: Engine, table: sa.Table) -> None:
        super().__init__(daemon=True)
        self.engine, self.table = engine, table
        self.stop = threading.Event()
        self.failures: list[BaseException] = []
        self.statements = 0
        self.inserted: list[int] = []
        self.deleted: list[int] = []
        self.updated = 0  # rows the application's UPDATE statements changed

    def run(self) -> None:
        t = self.table
        rng = random.Random(7)
        n = 0
        with self.engine.connect() as conn:
            while not self.stop.is_set() or self.statements < 30:
                n += 1
                try:
                    with conn.begin():
                        kind = n % 5
                        if kind in (0, 1):
                            seq = 20_000 + n
                            conn.execute(
                                sa.insert(t).values({SEQ: seq, CODE: f"n{n:05d}", "payload": "new"})
                            )
                            self.inserted.append(seq)
                        elif kind == 2:
                            seq = 10_000 - rng.randrange(ROWS)
                            self.updated += conn.execute(
                                sa.update(t).where(t.c[SEQ] == seq).values(payload=f"u{n}")
                            ).rowcount
                        elif kind == 3 and n % 15 == 3:
                            seq = 10_000 - rng.randrange(ROWS)
                            conn.execute(sa.delete(t).where(t.c[SEQ] == seq))
                            self.deleted.append(seq)
                        else:  # a transaction that holds its row lock a moment
                            seq = 10_000 - rng.randrange(ROWS)
                            self.updated += conn.execute(
                                sa.update(t).where(t.c[SEQ] == seq).values(payload=f"h{n}")
                            ).rowcount
                            time.sleep(0.02)
                    self.statements += 1
                except BaseException as error:
                    self.failures.append(error)
                    return


def _keys(engine: Engine, order: str) -> list[tuple[UUID, Any]]:
    t = sa.table(TABLE, sa.column(KEY, UUIDv7()), sa.column(SEQ), sa.column(CODE))
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(t.c[KEY], t.c[SEQ]).order_by(t.c[order]))]


ORDERS = {
    "unique key": {"unique_key": UNIQUE, "keep_unique_key": False},
    "order_by": {"order_by": SEQ},
    "physical": {},
}


# quick cover: the [postgresql-order_by] case (the same writer and checks);
# MariaDB's online add-key, its triggers and batches: tests/test_migration_add_key.py::
#   test_the_fill_is_no_application_update[mariadb-online], and
#   test_a_transaction_holding_the_table_is_waited_out[mariadb]
@pytest.mark.slow_on("mariadb")
@pytest.mark.parametrize(
    "order",
    [
        "order_by",
        # (the other orders with the slow tests)
        pytest.param("physical", marks=pytest.mark.slow),
        pytest.param("unique key", marks=pytest.mark.slow),
    ],
)
def test_added_online_with_the_application_writing(
    online_private_engine: Engine, order: str
) -> None:
    engine = online_private_engine
    postgresql = engine.dialect.name == "postgresql"
    if order == "physical" and not postgresql:
        pytest.skip("MariaDB refuses the physical order online (test_online_refusals)")
    table = _create(engine)
    with engine.begin() as conn:  # an audit trigger: for the application's updates only
        audited(conn, TABLE, AUDIT, CODE)
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn)
    app = _App(engine, table)
    app.start()
    try:
        while app.statements < 20 and app.is_alive():
            time.sleep(0.01)
        with engine.connect() as conn:
            plan = add_uuid7_key(
                conn,
                TABLE,
                column=KEY,
                online=True,
                batch_size=7,
                lock_timeout=0.2,
                seed="online",
                **ORDERS[order],
            )
    finally:
        app.stop.set()
        app.join(30)
    assert not app.failures, app.failures[:3]
    assert plan.default_sql
    with engine.connect() as conn:  # every application update audited, no row of the fill
        audit = sa.select(sa.func.count()).select_from(sa.table(AUDIT))
        assert conn.execute(audit).scalar() == app.updated > 0
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        assert inspector.get_pk_constraint(TABLE)["constrained_columns"] == [KEY]
        column = {c["name"]: c for c in inspector.get_columns(TABLE)}[KEY]
        assert not column["nullable"]
        if postgresql:  # (MariaDB: a placeholder default, the trigger makes the key)
            assert inspector.get_pk_constraint(TABLE)["name"] == f"{TABLE}_pkey"
            # (sqla_ids_uuid7(), or PostgreSQL 18's own uuidv7())
            assert plan.default_sql in str(column["default"])
        # Nothing of the run's own is left (index, check).
        names = [i["name"] for i in inspector.get_indexes(TABLE)]
        checks = [c["name"] for c in inspector.get_check_constraints(TABLE)]
        assert not [n for n in names + checks if n.startswith("sqla_ids_")]
        if order == "unique key":
            assert UNIQUE not in [u["name"] for u in inspector.get_unique_constraints(TABLE)]
    rows = _keys(engine, SEQ)
    seqs = {seq for _, seq in rows}
    assert len({key for key, _ in rows}) == len(rows)  # every row its own key
    assert set(app.inserted) <= seqs and not set(app.deleted) & seqs
    assert len(rows) == ROWS + len(app.inserted) - len(set(app.deleted))
    original = [(key, seq) for key, seq in rows if seq <= 10_000]
    if order != "physical":  # (an update moves a row in the physical order)
        by = CODE if order == "unique key" else SEQ
        keys = [key for key, seq in _keys(engine, by) if seq <= 10_000]
        assert keys == sorted(keys) and len(keys) == len(original)
    # The application keeps inserting without a key; the undo gives the table back.
    with engine.begin() as conn:
        conn.execute(sa.insert(table).values({SEQ: 1, CODE: "after", "payload": "x"}))
    with engine.connect() as conn:
        drop_uuid7_key(conn, TABLE)
        conn.commit()
        after = dbsnapshot.schema(conn)
    if order == "unique key" and not postgresql:
        # MariaDB adds the dropped unique key back after the table's others (its
        # place in SHOW CREATE TABLE; docs/migration.md, Limits).
        def unordered(lines: list[str]) -> list[str]:
            return sorted(re.sub(r" key \d+: ", " key: ", line) for line in lines)

        after, before = unordered(after), unordered(before)
    assert after == before


def test_a_transaction_holding_the_table_is_waited_out(
    online_private_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """An application transaction holding a lock on the table: each step waits
    for it at most ``lock_timeout`` and tries again (logged), so the run ends
    once the transaction does, and the application's other statements never
    queue behind a waiting ``ALTER TABLE`` for longer than that."""
    engine = online_private_engine
    postgresql = engine.dialect.name == "postgresql"
    _create(engine)
    holder = engine.connect()
    holder.begin()
    here = holder.dialect.identifier_preparer.quote(TABLE)
    # PostgreSQL: a table lock; MariaDB: a transaction that read it holds its metadata lock.
    holder.exec_driver_sql(
        f"LOCK TABLE {here} IN ROW SHARE MODE" if postgresql else f"SELECT * FROM {here} LIMIT 1"
    )
    timed_out = threading.Event()

    class _Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "met the lock timeout" in record.getMessage():
                timed_out.set()

    # The holder lets go once a step has given up on it (not after a delay: the
    # machine's speed must not decide whether the run meets it).
    release = threading.Thread(target=lambda: (timed_out.wait(60), holder.rollback()))
    release.start()
    seen = _Seen()
    logging.getLogger("alembic.sqla_ids.migration").addHandler(seen)
    notices: list[str] = []
    try:
        with caplog.at_level("INFO", logger="alembic.sqla_ids.migration"), engine.connect() as conn:
            if postgresql:
                # PostgreSQL says (DEBUG1) when SET NOT NULL is proven by a constraint
                # instead of a scan of the table under its exclusive lock.
                conn.exec_driver_sql("SET client_min_messages = debug1")
                raw = conn.connection.driver_connection
                raw.add_notice_handler(lambda notice: notices.append(notice.message_primary))
            add_uuid7_key(conn, TABLE, column=KEY, online=True, order_by=SEQ, lock_timeout=0.1)
            if postgresql:
                conn.exec_driver_sql("RESET client_min_messages")
    finally:
        logging.getLogger("alembic.sqla_ids.migration").removeHandler(seen)
        timed_out.set()
        release.join()
        holder.close()
    assert any("met the lock timeout" in r.getMessage() for r in caplog.records)
    if postgresql:
        assert any("sufficient to prove that it does not contain nulls" in n for n in notices)
    with engine.connect() as conn:
        assert sa.inspect(conn).get_pk_constraint(TABLE)["constrained_columns"] == [KEY]


def test_online_refusals(online_private_engine: Engine, sqlite_engine: Engine) -> None:
    engine = online_private_engine
    _create(engine)
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn), dbsnapshot.rows(conn)
    with engine.begin() as conn, pytest.raises(MigrationRefusedError, match="transaction block"):
        add_uuid7_key(conn, TABLE, online=True, order_by=SEQ)
    with engine.connect() as conn, pytest.raises(MigrationRefusedError, match="server_default"):
        add_uuid7_key(conn, TABLE, online=True, server_default=False, order_by=SEQ)
    if engine.dialect.name == "mysql":
        with (
            engine.connect() as conn,
            pytest.raises(
                MigrationRefusedError, match="needs the rows' order from unique_key= or order_by="
            ),
        ):
            add_uuid7_key(conn, TABLE, online=True)
    with engine.connect() as conn:
        assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before
    with (
        sqlite_engine.connect() as conn,
        pytest.raises(MigrationRefusedError, match="online=True is not available on SQLite"),
    ):
        add_uuid7_key(conn, "anything", online=True)


def test_ordering_columns_without_an_index_are_refused(online_private_engine: Engine) -> None:
    """Online, each row is found again by its ordering columns, one UPDATE per
    row: without an index starting with them each reads the whole table (20,000
    rows took 24 s on PostgreSQL against 0.56 s with one; MariaDB also locks
    every row read). Refused by name, with the statement that builds one
    without blocking writes, before anything changes. An index starting with
    them (in any order) serves, as does a unique one over some of them; one
    only ending with them, or (PostgreSQL) over some rows, does not."""
    engine = online_private_engine
    postgresql = engine.dialect.name == "postgresql"
    _create(engine)
    with engine.begin() as conn:
        q = conn.dialect.identifier_preparer.quote
        table, code = q(TABLE), q(CODE)
        payload = q("payload") if postgresql else f"{q('payload')}(8)"
        conn.exec_driver_sql(f"CREATE INDEX {q('ix ends')} ON {table} ({code}, {payload})")
        if postgresql:
            conn.exec_driver_sql(
                f"CREATE INDEX {q('ix some')} ON {table} ({q('payload')})"
                f" WHERE {q('payload')} > 'p1'"
            )
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn), dbsnapshot.rows(conn)
    build = "CREATE INDEX CONCURRENTLY ON" if postgresql else "ADD INDEX"
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as refused:
        add_uuid7_key(conn, TABLE, column=KEY, online=True, order_by="payload")
    message = str(refused.value)
    assert "ordering columns (payload), and no index starts with them" in message, message
    assert build in message and "nothing was changed" in message
    with engine.connect() as conn:
        assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before
    # (payload, code): "ix ends" starts with both; (payload, seq): SEQ's unique key.
    for order in (("payload", SEQ), ("payload", CODE)):
        with engine.connect() as conn:
            add_uuid7_key(conn, TABLE, column=KEY, online=True, order_by=order)
        with engine.connect() as conn:
            assert sa.inspect(conn).get_pk_constraint(TABLE)["constrained_columns"] == [KEY]
            drop_uuid7_key(conn, TABLE)
            conn.commit()


# Runs the online add in a child process and kills it (SIGKILL) at a chosen step.
CHILD = """
import os, signal, sys
import sqlalchemy as sa
from sqla_ids.migration import add_key as runner
from sqla_ids.migration.backends.postgresql import add_key as pg
from sqla_ids.migration.backends.mysql import add_key as mariadb

url, table, column, seq, point = sys.argv[1:6]
db = pg if url.startswith("postgresql") else mariadb
adder = pg.PostgreSQLOnlineKeyAdder if db is pg else mariadb.MariaDBOnlineKeyAdder
real_step = db._step
steps = []

def count(sql):
    steps.append(sql)
    if point.startswith("step:") and len(steps) == int(point[5:]):
        os.kill(os.getpid(), signal.SIGKILL)

def step(connection, plan, sql):
    count(sql)
    real_step(connection, plan, sql)

db._step = step
if db is pg:  # (CREATE INDEX CONCURRENTLY: with no lock timeout)
    real_concurrently = pg._concurrently
    def concurrently(connection, sql):
        count(sql)
        real_concurrently(connection, sql)
    pg._concurrently = concurrently
if point == "batch":
    real_write = adder.write_batch
    batches = []
    def write_batch(self, *args):
        batches.append(1)
        if len(batches) == 3:
            os.kill(os.getpid(), signal.SIGKILL)
        real_write(self, *args)
    adder.write_batch = write_batch

engine = sa.create_engine(url)
with engine.connect() as conn:
    runner.add_uuid7_key(conn, table, column=column, order_by=seq, online=True, batch_size=40,
                         seed="killed")
print("finished without being killed")
"""

#: Where the run is killed: in the fill, or before its n-th DDL step. PostgreSQL:
#: ADD COLUMN, SET DEFAULT, CREATE INDEX, ADD CHECK, VALIDATE, SET NOT NULL + PRIMARY
#: KEY, DROP CHECK; MariaDB: ADD COLUMN, the BEFORE INSERT trigger, LOCK TABLES to
#: guard the UPDATE trigger, the rebuild, LOCK TABLES to unguard it.
KILLS = {
    "postgresql": ["batch", *(f"step:{n}" for n in range(1, 8))],
    "mariadb": ["batch", *(f"step:{n}" for n in range(1, 6))],
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("database", "point"), [(d, p) for d, points in KILLS.items() for p in points]
)
def test_killed_then_run_again_or_dropped(
    request: pytest.FixtureRequest, database: str, point: str
) -> None:
    engine: Engine = request.getfixturevalue(f"{database}_private_engine")
    _create(engine)
    with engine.begin() as conn:  # MariaDB guards it from its step 3 to the end
        audited(conn, TABLE, AUDIT, CODE)
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn), dbsnapshot.rows(conn)
    url = engine.url.render_as_string(hide_password=False)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, TABLE, KEY, SEQ, point],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -9, (done.returncode, done.stdout, done.stderr)
    with engine.connect() as conn:
        add_uuid7_key(
            conn, TABLE, column=KEY, order_by=SEQ, online=True, batch_size=40, seed="killed"
        )
    keys = [key for key, _ in _keys(engine, SEQ)]
    assert len(set(keys)) == ROWS and keys == sorted(keys)
    with engine.connect() as conn:
        drop_uuid7_key(conn, TABLE)  # in one transaction, as offline: committed here
        conn.commit()
    with engine.connect() as conn:
        assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before
    # And killed again, then dropped at once: what it left goes.
    subprocess.run([sys.executable, "-c", CHILD, url, TABLE, KEY, SEQ, point], timeout=120)
    with engine.connect() as conn:
        drop_uuid7_key(conn, TABLE)  # in one transaction, as offline: committed here
        conn.commit()
    with engine.connect() as conn:
        assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before


def test_through_alembic_in_its_transaction(online_private_engine: Engine) -> None:
    """``op.add_uuid7_key(..., online=True)`` inside Alembic's migration
    transaction runs in an autocommit block (its steps commit on their own);
    the downgrade's ``op.drop_uuid7_key`` too (the record says the key was added
    online; test_migration_add_key.py checks what that changes: the unique key's
    index built ``CONCURRENTLY``)."""
    from alembic.migration import MigrationContext
    from alembic.operations import Operations

    import sqla_ids.alembic  # noqa: F401 - registers the operations

    engine = online_private_engine
    _create(engine)
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn)
    for direction in ("upgrade", "downgrade"):
        with engine.connect() as conn:
            context = MigrationContext.configure(conn)
            ops: Any = Operations(context)  # the operations register at import
            with context.begin_transaction():
                if direction == "upgrade":
                    ops.add_uuid7_key(TABLE, column=KEY, order_by=SEQ, online=True)
                else:
                    ops.drop_uuid7_key(TABLE)
        if direction == "upgrade":
            keys = [key for key, _ in _keys(engine, SEQ)]
            assert len(set(keys)) == ROWS and keys == sorted(keys)
    with engine.connect() as conn:
        assert dbsnapshot.schema(conn) == before


def test_an_invalid_index_left_by_a_stopped_build_is_built_again(
    postgresql_private_engine: Engine,
) -> None:
    """``CREATE INDEX CONCURRENTLY`` that stops (a kill, a cancel) leaves its
    index in the catalog, invalid: the run drops it and builds it again (a
    stopped build made here: a unique index on a constant over many rows
    fails, invalid, under the run's index name)."""
    from sqla_ids.migration.backends.postgresql.add_key import _online_names
    from sqla_ids.migration.core.added_key import AddKeyOptions, AddKeyPlan

    engine = postgresql_private_engine
    _create(engine)
    plan = AddKeyPlan("postgresql", TABLE, KEY, "uuid", [], None, 0, "", 0, AddKeyOptions())
    index, _ = _online_names(plan)
    q = engine.dialect.identifier_preparer.quote
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        with pytest.raises(sa.exc.IntegrityError):
            conn.exec_driver_sql(f"CREATE UNIQUE INDEX CONCURRENTLY {q(index)} ON {q(TABLE)} ((1))")
        valid = "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:i)"
        assert conn.execute(sa.text(valid), {"i": q(index)}).scalar() is False
    with engine.connect() as conn:
        add_uuid7_key(conn, TABLE, column=KEY, order_by=SEQ, online=True)
    with engine.connect() as conn:
        primary = sa.inspect(conn).get_pk_constraint(TABLE)
        assert primary["constrained_columns"] == [KEY] and primary["name"] == f"{TABLE}_pkey"
        assert conn.execute(sa.text("SELECT to_regclass(:i)"), {"i": q(index)}).scalar() is None


def test_the_index_build_waits_out_a_long_transaction_anywhere_in_the_database(
    postgresql_database_engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    """``CREATE INDEX CONCURRENTLY`` waits for every transaction older than it in
    the database -- here a report reading another table in one snapshot, open for
    many times the run's lock timeout. The build waits, with no lock timeout (the
    wait blocks nobody: the application writes meanwhile), one build from start
    to end, and the run ends once the report does. Before, each wait failed the
    build at the lock timeout, left an invalid index to drop and build again,
    and the run gave up after ten."""
    engine = postgresql_database_engine
    table = _create(engine)
    q = engine.dialect.identifier_preparer.quote
    report_table = 'rep"ort ü'
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {q(report_table)} (n int)")
        conn.exec_driver_sql(f"INSERT INTO {q(report_table)} VALUES (1)")
    report = engine.connect().execution_options(isolation_level="REPEATABLE READ")
    report.begin()
    report.exec_driver_sql(f"SELECT count(*) FROM {q(report_table)}")
    failures: list[BaseException] = []

    def migrate() -> None:
        try:
            with engine.connect() as conn:
                add_uuid7_key(conn, TABLE, column=KEY, online=True, order_by=SEQ, lock_timeout=0.1)
        except BaseException as error:
            failures.append(error)

    build = (
        "SELECT pid, query_start FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE 'CREATE UNIQUE INDEX CONCURRENTLY%' AND wait_event_type = 'Lock'"
    )
    run = threading.Thread(target=migrate)
    with caplog.at_level("INFO", logger="alembic.sqla_ids.migration"), engine.connect() as watch:
        run.start()
        try:
            waiting = None
            while waiting is None and run.is_alive():
                waiting = watch.execute(sa.text(build)).first()
                watch.rollback()
                time.sleep(0.05)
            assert waiting is not None, failures
            # Ten times the lock timeout later: the same build, still waiting.
            time.sleep(1.0)
            assert watch.execute(sa.text(build)).all() == [waiting]
            watch.rollback()
            # The application writes meanwhile (the build's locks let it).
            with engine.begin() as app:
                app.execute(sa.insert(table).values({SEQ: 30_000, CODE: "during", "payload": "x"}))
                app.execute(sa.update(table).where(table.c[SEQ] == 10_000).values(payload="w"))
        finally:
            report.rollback()
            report.close()
            run.join()
    assert failures == []
    assert not [r for r in caplog.records if "met the lock timeout" in r.getMessage()]
    assert any("concurrently (it waits" in r.getMessage() for r in caplog.records)
    with engine.connect() as conn:
        assert sa.inspect(conn).get_pk_constraint(TABLE)["constrained_columns"] == [KEY]
        rows, keys = conn.execute(
            sa.select(sa.func.count(), sa.func.count(sa.distinct(sa.column(KEY)))).select_from(
                sa.table(TABLE)
            )
        ).one()
    assert rows == keys == ROWS + 1
