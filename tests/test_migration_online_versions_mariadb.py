"""Rolling deploys on MariaDB: two versions of the tables served during the online
migration (``versions=``), two application versions writing all along.

Both versions are databases of views (``<prefix>_before_<db>``,
``<prefix>_after_<db>``), from the expand until the contract. The old
application (ORM models with ``BigInteger`` keys, PyMySQL defaults) keeps
*before* for the whole migration; the new one (UUIDv7 keys made by the client)
uses *after* from the prepare on, and is pointed at the application's database
between the swap and the contract (MariaDB has no fallback from one database
to another). Hostile names (quotes, backticks, spaces) for tables and columns.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from versions_app import NEW_READY, App, Names, World, check_rows, until

from sqla_ids import UUIDv7, uuid7
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import (
    PkMigrationOptions,
    migrate_pk_to_uuid7,
    migration_phase,
    restore_pk_from_uuid7,
    version_connect_args,
)
from sqla_ids.migration.backends.mysql import versions as mariadb_versions
from sqla_ids.migration.core.versions import version_database

PARENT = "sh`op s"
KEY = "i d"
CHILD = "it'em\"s"
REF = "sh`op id"
NOTE = 'no"te'
OLD = f"{KEY}_old"
NAMES = Names(PARENT, KEY, CHILD, REF)
MAP = f"{PARENT}_uuid7_map"


def _q(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _database(engine: Engine) -> str:
    return str(engine.url.database)


@pytest.fixture
def shop(mariadb_private_engine: Engine) -> Iterator[tuple[Engine, str]]:
    """The shop (hostile names) in this test's own database, and the versions'
    prefix; the version databases are dropped afterwards whatever happened."""
    engine = mariadb_private_engine
    prefix = "v"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {_q(PARENT)} ({_q(KEY)} BIGINT AUTO_INCREMENT PRIMARY KEY,"
            " name VARCHAR(100) NOT NULL UNIQUE)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {_q(CHILD)} (id BIGINT AUTO_INCREMENT PRIMARY KEY,"
            f" {_q(REF)} BIGINT NOT NULL, label VARCHAR(100) NOT NULL UNIQUE,"
            f" {_q(NOTE)} VARCHAR(20) DEFAULT 'n', FOREIGN KEY ({_q(REF)})"
            f" REFERENCES {_q(PARENT)} ({_q(KEY)}) ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE review (id BIGINT AUTO_INCREMENT PRIMARY KEY, {_q(REF)} BIGINT NULL,"
            f" body TEXT, FOREIGN KEY ({_q(REF)}) REFERENCES {_q(PARENT)} ({_q(KEY)})"
            " ON DELETE SET NULL)"
        )
        # A table the migration does not touch: passed through by both versions.
        conn.exec_driver_sql("CREATE TABLE `note s` (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        conn.exec_driver_sql(
            f"INSERT INTO {_q(PARENT)} (name) SELECT CONCAT('s', seq) FROM seq_1_to_200"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {_q(CHILD)} ({_q(REF)}, label) SELECT 1 + MOD(seq, 200),"
            " CONCAT('i', seq) FROM seq_1_to_600"
        )
    try:
        yield engine, prefix
    finally:
        with engine.begin() as conn:
            for version in ("after", "before"):
                name = version_database(prefix, version, _database(engine))  # type: ignore[arg-type]
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {_q(name)}")


def _migrate(engine: Engine, phase: str, prefix: str, batch_size: int = 150) -> None:
    """Migrate the shop to ``phase``; in batches of 150 (the children in four),
    of 37 where an application writes during the backfill (more to write between)."""
    with engine.connect() as conn:
        migrate_pk_to_uuid7(
            conn,
            PARENT,
            PkMigrationOptions(online=True, versions=prefix, batch_size=batch_size),
            phase=phase,  # type: ignore[arg-type]
        )


def _version_engine(engine: Engine, version: str, prefix: str) -> Engine:
    """An application's engine on ``version`` (its connections' database)."""
    args = version_connect_args(
        engine.url.drivername,
        version,  # type: ignore[arg-type]
        _database(engine),
        versions=prefix,
    )
    return sa.create_engine(engine.url, connect_args=args)


def _version_databases(engine: Engine, prefix: str) -> set[str]:
    names = {version_database(prefix, v, _database(engine)) for v in ("before", "after")}  # type: ignore[arg-type]
    with engine.connect() as conn:
        return set(
            conn.execute(
                sa.text(
                    "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN :n"
                ).bindparams(sa.bindparam("n", expanding=True)),
                {"n": sorted(names)},
            ).scalars()
        )


def _uuid(sql: str) -> sa.TextClause:
    """``sql`` with ``:k`` bound as a UUIDv7 (as the new code's models bind it)."""
    return sa.text(sql).bindparams(sa.bindparam("k", type_=UUIDv7()))


# --- the API ---------------------------------------------------------------------------


def test_connect_args_name_each_drivers_database_keyword() -> None:
    assert version_connect_args("mariadb+pymysql", "after", "shop") == {
        "database": "sqla_ids_after_shop"
    }
    assert version_connect_args("mysql+mysqldb", "before", "shop", versions="x") == {
        "db": "x_before_shop"
    }
    assert version_connect_args("mysql", "before", "shop") == {"db": "sqla_ids_before_shop"}
    assert version_connect_args("mysql+aiomysql", "after", "a b") == {"db": "sqla_ids_after_a b"}
    assert version_connect_args("mariadb+mariadbconnector", "after", "s") == {
        "database": "sqla_ids_after_s"
    }
    with pytest.raises(MigrationRefusedError, match="nothing was changed"):
        version_connect_args("mysql+unknown", "after", "shop")
    with pytest.raises(ValueError, match="before"):
        version_connect_args("mariadb+pymysql", "later", "shop")  # type: ignore[arg-type]


# --- the two versions, statement by statement ---------------------------------------


def test_rows_written_through_either_version_are_complete_in_both(
    shop: tuple[Engine, str],
) -> None:
    engine, prefix = shop
    p, c, k, r = _q(PARENT), _q(CHILD), _q(KEY), _q(REF)
    database = _database(engine)
    _migrate(engine, "prepare", prefix)
    assert _version_databases(engine, prefix) == {
        version_database(prefix, "before", database),
        version_database(prefix, "after", database),
    }
    after = _version_engine(engine, "after", prefix)
    before = _version_engine(engine, "before", prefix)
    try:
        with after.begin() as conn:
            # A parent through *after*: the client's UUID, the old key from the
            # AUTO_INCREMENT, the mapping told.
            new_key = uuid7()
            conn.execute(
                _uuid(f"INSERT INTO {p} ({k}, name) VALUES (:k, 'via after')"), {"k": new_key}
            )
            # A child with only its UUID reference.
            conn.execute(
                _uuid(f"INSERT INTO {c} ({r}, label) VALUES (:k, 'after child')"), {"k": new_key}
            )
            conn.execute(
                _uuid(f"INSERT INTO review ({r}, body) VALUES (NULL, 'none'), (:k, 'one')"),
                {"k": new_key},
            )
            # A child moved to another parent through *after*.
            conn.execute(_uuid(f"UPDATE {c} SET {r} = :k WHERE label = 'i1'"), {"k": new_key})
            # The untouched table, through the version.
            conn.exec_driver_sql("INSERT INTO `note s` (v) VALUES (1)")
        with engine.connect() as conn:
            old_key = conn.exec_driver_sql(
                f"SELECT {k} FROM {p} WHERE name = 'via after'"
            ).scalar_one()
            refs = dict(
                conn.exec_driver_sql(
                    f"SELECT label, {r} FROM {c} WHERE label IN ('after child', 'i1')"
                ).all()
            )
            assert refs == {"after child": old_key, "i1": old_key}
            assert conn.exec_driver_sql(
                f"SELECT body, {r} FROM review WHERE body IN ('none', 'one') ORDER BY body"
            ).all() == [("none", None), ("one", old_key)]
            assert conn.exec_driver_sql("SELECT v FROM `note s`").scalar_one() == 1
        with before.begin() as conn:
            # The old application through *before* (the base tables, passed through).
            conn.exec_driver_sql(
                f"UPDATE {c} SET {r} = (SELECT {k} FROM {p} WHERE name = 's1')"
                " WHERE label = 'after child'"
            )
        with after.connect() as conn:
            got = conn.exec_driver_sql(
                f"SELECT p.name FROM {c} i JOIN {p} p ON p.{k} = i.{r}"
                " WHERE i.label = 'after child'"
            ).scalar_one()
            assert got == "s1"

        _migrate(engine, "swap", prefix)
        with before.begin() as conn:
            # A parent through *before* after the swap: its old key from the
            # AUTO_INCREMENT the parked old key kept (lastrowid), the UUID from
            # the default, the mapping told.
            result = conn.exec_driver_sql(f"INSERT INTO {p} (name) VALUES ('via before')")
            old = result.lastrowid
            assert isinstance(old, int) and old > 200
            assert conn.exec_driver_sql("SELECT LAST_INSERT_ID()").scalar_one() == old
            conn.execute(
                sa.text(f"INSERT INTO {c} ({r}, label) VALUES (:k, 'before child')"), {"k": old}
            )
            assert (
                conn.execute(sa.text(f"SELECT name FROM {p} WHERE {k} = :k"), {"k": old}).scalar()
                == "via before"
            )
            conn.execute(
                sa.text(f"INSERT INTO review ({r}, body) VALUES (NULL, 'none 2'), (:k, 'two')"),
                {"k": old},
            )
            assert conn.exec_driver_sql(
                f"SELECT body, {r} FROM review WHERE body IN ('none', 'one') ORDER BY body"
            ).all() == [("none", None), ("one", old_key)]
            assert conn.exec_driver_sql(
                f"SELECT p.name FROM {c} i JOIN {p} p ON p.{k} = i.{r}"
                " WHERE i.label IN ('after child', 'i1') ORDER BY i.label"
            ).scalars().all() == ["s1", "via after"]
        with after.begin() as conn:  # passing the base tables through now
            key, name = conn.execute(
                sa.text(
                    f"SELECT p.{k}, p.name FROM {c} i JOIN {p} p ON p.{k} = i.{r}"
                    " WHERE i.label = 'before child'"
                ).columns(sa.column(KEY, UUIDv7()), sa.column("name"))
            ).one()
            assert isinstance(key, uuid.UUID)
            assert name == "via before"
            assert (
                conn.execute(
                    _uuid(f"SELECT old_key FROM {_q(MAP)} WHERE new_key = :k"), {"k": key}
                ).scalar_one()
                == old
            )
            assert conn.execute(
                _uuid(
                    f"SELECT body, {r} = :k FROM review WHERE body IN ('none 2', 'two')"
                    " ORDER BY body"
                ),
                {"k": key},
            ).all() == [("none 2", None), ("two", 1)]
            # A child written by the new code: its old value follows for *before*.
            conn.execute(_uuid(f"UPDATE {c} SET {r} = :k WHERE label = 'i2'"), {"k": key})
        with before.begin() as conn:
            assert (
                conn.exec_driver_sql(f"SELECT {r} FROM {c} WHERE label = 'i2'").scalar_one() == old
            )
            conn.execute(sa.text(f"DELETE FROM {p} WHERE {k} = :k"), {"k": old})
        _migrate(engine, "contract", prefix)
        assert _version_databases(engine, prefix) == set()
    finally:
        after.dispose()
        before.dispose()


def test_refused_by_name_before_anything_changes(shop: tuple[Engine, str]) -> None:
    engine, _ = shop
    taken = version_database("v", "after", _database(engine))
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {_q(taken)}")
    try:
        with (
            engine.connect() as conn,
            pytest.raises(MigrationRefusedError, match=f"the database {taken} exists already"),
        ):
            migrate_pk_to_uuid7(conn, PARENT, PkMigrationOptions(online=True, versions="v"))
        with (
            engine.connect() as conn,
            pytest.raises(MigrationRefusedError, match="longer than MariaDB's 64 characters"),
        ):
            migrate_pk_to_uuid7(conn, PARENT, PkMigrationOptions(online=True, versions="w" * 50))
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE SEQUENCE `s eq`")
        with (
            engine.connect() as conn,
            pytest.raises(MigrationRefusedError, match=r"\.s eq is a sequence"),
        ):
            migrate_pk_to_uuid7(conn, PARENT, PkMigrationOptions(online=True, versions="v"))
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {_q(taken)}")
            conn.exec_driver_sql("DROP SEQUENCE IF EXISTS `s eq`")
    with engine.connect() as conn:
        assert migration_phase(conn, PARENT) is None
        assert conn.exec_driver_sql(f"SHOW COLUMNS FROM {_q(PARENT)}").all()[0][1] == "bigint(20)"


@pytest.mark.parametrize(
    "swapped",
    [
        # quick cover: tests/test_migration_online_versions_mariadb.py::
        #   test_the_applications_grants_reach_its_version
        # (its [prepare] case undoes before the swap: the versions go, their grants too)
        pytest.param(False, id="before-swap", marks=pytest.mark.slow),
        pytest.param(True, id="after-swap"),
    ],
)
def test_undo_drops_the_versions(shop: tuple[Engine, str], swapped: bool) -> None:
    engine, prefix = shop
    _migrate(engine, "swap" if swapped else "prepare", prefix)
    assert len(_version_databases(engine, prefix)) == 2
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
    assert _version_databases(engine, prefix) == set()
    with engine.connect() as conn:
        assert migration_phase(conn, PARENT) is None
        kinds = {row[0]: row[1] for row in conn.exec_driver_sql(f"SHOW COLUMNS FROM {_q(PARENT)}")}
        assert list(kinds) == [KEY, "name"] and kinds[KEY] == "bigint(20)"


# --- two application versions, from before the expand until after the contract ------


@pytest.mark.slow
def test_two_application_versions_write_through_the_whole_migration(
    shop: tuple[Engine, str],
) -> None:
    """Deploy sequence A/B/C with both applications writing all along: the old
    one through *before* from before the expand until the contract, the new one
    through *after* from the prepare (its readiness check), re-pointed at the
    application's database between the swap and the contract."""
    engine, prefix = shop
    world = World()
    # The version databases exist from the expand on: the old code uses the
    # application's database until revision A is done, then *before*.
    old = App("O", engine, world, lambda session: True, NAMES)
    old_engine = new_engine = None
    new: App | None = None
    started = time.monotonic()
    timings: dict[str, float] = {}
    try:
        old.start()
        until([old], 10)
        world.phase = "revision A (expand, backfill, prepare)"
        _migrate(engine, "prepare", prefix, batch_size=37)
        timings["A"] = time.monotonic() - started
        old_engine = _version_engine(engine, "before", prefix)
        new_engine = _version_engine(engine, "after", prefix)
        world.phase = "between A and B"
        old.engine = old_engine  # the old code pointed at *before* (a restart of its pools)
        until([old], 10)
        new = App(
            "N",
            new_engine,
            world,
            lambda session: migration_phase(session.connection(), PARENT) in NEW_READY,
            NAMES,
        )
        new.start()
        until([old, new], 10)
        world.phase = "revision B (swap)"
        began = time.monotonic()
        _migrate(engine, "swap", prefix)
        timings["B"] = time.monotonic() - began
        world.phase = "between B and C"
        until([old, new], 10)
        new.engine = engine  # the new code re-pointed at the application's database
        world.phase = "between B and C, new code re-pointed"
        until([old, new], 10)
        old.stop.set()  # no instance uses *before* any more
        old.join()
        world.phase = "revision C (contract)"
        _migrate(engine, "contract", prefix)
        world.phase = "after C"
        until([new], 10)
    finally:
        for app in (old, new):
            if app is not None and app.is_alive():
                app.stop.set()
                app.join()
        for version_engine in (old_engine, new_engine):
            if version_engine is not None:
                version_engine.dispose()
    assert new is not None
    print(
        f"old: {len(old.failures)} failed, {old.ops}; new: {len(new.failures)} failed,"
        f" {new.ops}; {timings}"
    )
    assert old.failures == [] and new.failures == []
    assert old.ops.get("between B and C", 0) >= 5 and old.ops.get("between A and B", 0) >= 5
    assert new.ops.get("between A and B", 0) >= 5 and new.ops.get("between B and C", 0) >= 5
    assert new.ops.get("after C", 0) >= 5
    assert _version_databases(engine, prefix) == set()
    # (The contract drops the triggers: shops made after it are not mapped.)
    check_rows(engine, world, NAMES, mapped=lambda name: False)


@pytest.mark.slow
def test_rollback_old_code_through_the_swap_and_its_undo(
    shop: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rollback: only the old code runs after the swap (through *before*), then
    the swap is undone online while it keeps writing. The undo drops *before*
    at its end: the old code is pointed back at the application's database
    once the swap is undone, before that drop (here: as the undo reaches it)."""
    engine, prefix = shop
    world = World()
    old_engine: Engine | None = None
    old = App("O", engine, world, lambda session: True, NAMES)
    drop = mariadb_versions.drop_statements

    def repoint_then_drop(connection: sa.Connection, plan: Any) -> Any:
        old.engine = engine  # the configuration change, before *before* goes
        until([old], 3)
        return drop(connection, plan)

    try:
        old.start()
        until([old], 10)
        world.phase = "revision A (expand, backfill, prepare)"
        _migrate(engine, "prepare", prefix, batch_size=37)
        old_engine = _version_engine(engine, "before", prefix)
        old.engine = old_engine
        world.phase = "between A and B"
        until([old], 10)
        world.phase = "revision B (swap)"
        _migrate(engine, "swap", prefix)
        world.phase = "after the swap"
        until([old], 10)
        world.phase = "undo"
        monkeypatch.setattr(mariadb_versions, "drop_statements", repoint_then_drop)
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
        world.phase = "after the undo"
        until([old], 10)
    finally:
        old.stop.set()
        old.join()
        if old_engine is not None:
            old_engine.dispose()
    print(f"old: {len(old.failures)} failed, {old.ops}")
    assert old.failures == []
    assert old.ops.get("after the swap", 0) >= 5 and old.ops.get("undo", 0) >= 3
    assert old.ops.get("after the undo", 0) >= 5
    assert _version_databases(engine, prefix) == set()
    p, c, k, r = _q(PARENT), _q(CHILD), _q(KEY), _q(REF)
    with engine.connect() as conn:
        found = dict(
            conn.execute(
                sa.text(
                    f"SELECT i.label, s.name FROM {c} i JOIN {p} s ON s.{k} = i.{r}"
                    " WHERE i.label LIKE 'O%'"
                )
            ).all()
        )
        keys = dict(conn.execute(sa.text(f"SELECT name, {k} FROM {p} WHERE name LIKE 'O%'")).all())
        columns = [row[0] for row in conn.exec_driver_sql(f"SHOW COLUMNS FROM {_q(CHILD)}")]
    assert found == world.shop_of
    assert keys == {name: world.keys["O"][name] for name in world.alive}
    assert columns == ["id", REF, "label", NOTE]


def _view_definitions(engine: Engine, prefix: str) -> dict[tuple[str, str], str]:
    names = sorted({version_database(prefix, v, _database(engine)) for v in ("before", "after")})  # type: ignore[arg-type]
    with engine.connect() as conn:
        return {
            (schema, table): definition
            for schema, table, definition in conn.execute(
                sa.text(
                    "SELECT TABLE_SCHEMA, TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS"
                    " WHERE TABLE_SCHEMA IN :n"
                ).bindparams(sa.bindparam("n", expanding=True)),
                {"n": names},
            ).all()
        }


def test_a_dry_run_of_the_swap_changes_no_view(shop: tuple[Engine, str]) -> None:
    """The swap's views are replaced by other sessions under its lock: a dry run,
    which takes no lock, queues none."""
    engine, prefix = shop
    _migrate(engine, "prepare", prefix)
    views = _view_definitions(engine, prefix)
    # The three affected tables, the untouched one, the mapping and the state
    # table (which migration_phase reads through either version).
    assert len(views) == 2 * 6
    assert all("MERGE" not in d for d in views.values())  # (the definition is the SELECT)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(
            conn,
            PARENT,
            PkMigrationOptions(online=True, versions=prefix),
            phase="swap",
            dry_run=True,
        )
    time.sleep(0.5)
    assert _view_definitions(engine, prefix) == views
    with engine.connect() as conn:
        algorithms = set(
            conn.execute(
                sa.text(
                    "SELECT DISTINCT ALGORITHM, IS_UPDATABLE FROM information_schema.VIEWS"
                    " WHERE TABLE_SCHEMA IN :n"
                ).bindparams(sa.bindparam("n", expanding=True)),
                {"n": sorted({s for s, _ in views})},
            ).all()
        )
    assert algorithms == {("MERGE", "YES")}


def test_no_session_opens_while_the_tables_are_locked(shop: tuple[Engine, str]) -> None:
    """The swap and its undo replace six views in sessions of their own: those
    open before ``LOCK TABLES`` (a connection's start-up under the lock is the
    application's wait: 147 ms of a 206 ms swap when they opened under it), and
    none is left checked out afterwards."""
    engine, prefix = shop
    _migrate(engine, "prepare", prefix)
    events: list[str] = []

    def statement(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        if sql.startswith(("LOCK TABLES", "UNLOCK TABLES")):
            events.append(sql.split(" ", 2)[0])
        elif sql.startswith("CREATE OR REPLACE") and "VIEW" in sql:
            events.append("replace view")

    sa.event.listen(engine, "connect", lambda *_: events.append("connect"))
    sa.event.listen(engine, "checkout", lambda *_: events.append("checkout"))
    sa.event.listen(engine, "before_cursor_execute", statement)
    _migrate(engine, "swap", prefix)
    swap, events[:] = list(events), []
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
    for run in (swap, list(events)):
        # Each time the tables were locked (a busy machine's step may have
        # failed to lock them and been retried), nothing but the replacements
        # -- sent under the lock, they wait for it (the point) -- and the last
        # time all six.
        windows, start = [], None
        for n, event in enumerate(run):
            if event == "LOCK":
                start = n
            elif event == "UNLOCK" and start is not None:
                windows.append(run[start + 1 : n])
                start = None
        assert windows and all(set(w) <= {"replace view"} for w in windows), run
        assert len(windows[-1]) == 6 and run.count("replace view") == 6, run
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    # quick cover: the [prepare] case (the same grants copied to either version)
    "phase",
    ["prepare", pytest.param("swap", marks=pytest.mark.slow)],
)
def test_the_applications_grants_reach_its_version(shop: tuple[Engine, str], phase: str) -> None:
    """A user granted tables and columns, not the database, reads and writes
    them through its version's views (which read the tables as the migration's
    user, their definer) and is refused the others, as on the tables; the
    grants go with the version databases."""
    engine, prefix = shop
    database = _database(engine)
    user = f"u{database[-12:]}"
    version = "after" if phase == "prepare" else "before"
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE USER :u@'%'"), {"u": user})
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                f"GRANT SELECT, INSERT ON {_q(database)}.{_q(PARENT)} TO '{user}'@'%%'"
            )
            conn.exec_driver_sql(
                f"GRANT SELECT (label), UPDATE ({_q(NOTE)}) ON {_q(database)}.{_q(CHILD)}"
                f" TO '{user}'@'%%'"
            )
        _migrate(engine, phase, prefix)
        url = engine.url.set(
            username=user,
            password=None,
            database=version_database(prefix, version, database),  # type: ignore[arg-type]
        )
        as_user = sa.create_engine(url)
        try:
            with as_user.connect() as conn:
                assert conn.exec_driver_sql(f"SELECT COUNT(*) FROM {_q(PARENT)}").scalar() == 200
                conn.exec_driver_sql(f"INSERT INTO {_q(PARENT)} (name) VALUES ('by user')")
                assert conn.exec_driver_sql(f"SELECT COUNT(label) FROM {_q(CHILD)}").scalar() == 600
                conn.exec_driver_sql(f"UPDATE {_q(CHILD)} SET {_q(NOTE)} = 'by user'")
                for refused in (
                    f"SELECT id FROM {_q(CHILD)}",
                    f"UPDATE {_q(CHILD)} SET label = 'x'",
                    f"DELETE FROM {_q(PARENT)}",
                    "SELECT * FROM `note s`",
                ):
                    with pytest.raises(sa.exc.OperationalError, match="denied"):
                        conn.exec_driver_sql(refused)
                conn.commit()
        finally:
            as_user.dispose()
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
        with engine.connect() as conn:
            left = (
                conn.execute(
                    sa.text(
                        "SELECT COUNT(*) FROM mysql.tables_priv WHERE User = :u AND Db <> :d"
                        " UNION ALL SELECT COUNT(*) FROM mysql.columns_priv"
                        " WHERE User = :u AND Db <> :d"
                    ),
                    {"u": user, "d": database},
                )
                .scalars()
                .all()
            )
            assert left == [0, 0]
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DROP USER IF EXISTS :u@'%'"), {"u": user})


@pytest.mark.slow
def test_without_versions_each_application_fails_outside_its_own_version(
    shop: tuple[Engine, str],
) -> None:
    """The same deploy without ``versions``, both applications on the application's
    database: what breaks (the numbers in docs/migration.md)."""
    engine, _ = shop
    world = World()
    old = App("O", engine, world, lambda session: True, NAMES)
    new = App(
        "N",
        engine,
        world,
        lambda session: migration_phase(session.connection(), PARENT) in NEW_READY,
        NAMES,
    )

    def migrate(phase: str) -> None:
        with engine.connect() as conn:
            migrate_pk_to_uuid7(
                conn,
                PARENT,
                PkMigrationOptions(online=True, batch_size=37),
                phase=phase,  # type: ignore[arg-type]
            )

    try:
        old.start()
        new.start()
        until([old], 10)
        world.phase = "revision A (expand, backfill, prepare)"
        migrate("prepare")
        world.phase = "between A and B"
        until([old], 10)
        world.phase = "revision B (swap)"
        migrate("swap")
        world.phase = "between B and C"
        until([new], 10)
        old.stop.set()
        old.join()
        world.phase = "revision C (contract)"
        migrate("contract")
    finally:
        for app in (old, new):
            app.stop.set()
            app.join()
    print(f"old: {len(old.failures)} failed, {old.ops}; new: {len(new.failures)} failed, {new.ops}")
    before_swap = ("before the expand", "revision A", "between A and B")
    assert old.failures and not [f for f in old.failures if f.startswith(before_swap)]
    assert new.failures and not [f for f in new.failures if f.startswith("between B and C")]


class _Killed(BaseException):
    """The process stopped here (not an error any code may catch)."""


def _check_versions_swapped(engine: Engine, prefix: str) -> None:
    """Both versions as the swap leaves them: *before* the old keys under the
    original names, *after* the UUIDs; every item under its shop in both."""
    p, c, k, r = _q(PARENT), _q(CHILD), _q(KEY), _q(REF)
    for version, kind in (("before", int), ("after", uuid.UUID)):
        version_engine = _version_engine(engine, version, prefix)
        try:
            with version_engine.connect() as conn:
                columns = [row[0] for row in conn.exec_driver_sql(f"SHOW COLUMNS FROM {c}")]
                assert columns == ["id", REF, "label", NOTE], (version, columns)
                assert [row[0] for row in conn.exec_driver_sql(f"SHOW COLUMNS FROM {p}")] == [
                    KEY,
                    "name",
                ] or version == "after"
                key = conn.execute(
                    sa.text(
                        f"SELECT s.{k} FROM {c} i JOIN {p} s ON s.{k} = i.{r} WHERE i.label = 'i1'"
                    ).columns(sa.column(KEY, UUIDv7() if kind is uuid.UUID else sa.BigInteger()))
                ).scalar_one()
                assert isinstance(key, kind), (version, key)
                joined = conn.exec_driver_sql(
                    f"SELECT COUNT(*) FROM {c} i JOIN {p} s ON s.{k} = i.{r}"
                ).scalar_one()
                assert joined == 600, version
        finally:
            version_engine.dispose()


def _killable(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """The online runner's statements counted (``n``, its own), and stopped
    before the one numbered ``stop`` (once: ``stop`` then goes back to -1)."""
    from sqla_ids.migration import online as online_module

    original_execute = online_module.execute
    seen = {"n": 0, "stop": -1}

    def execute(connection: Any, statements: Any) -> None:
        for statement in statements:
            # Stopped between the step's own statements: a process killed there
            # loses its connection, which unlocks the tables; stopped here the
            # runner unlocks them (stopped inside the lock's own statements, a
            # pooled connection would keep LOCK TABLES: not a real stop).
            own = not statement.sql.startswith(("SET SESSION", "LOCK TABLES", "UNLOCK TABLES"))
            if own and seen["n"] == seen["stop"]:
                seen["stop"] = -1
                raise _Killed(statement.sql)
            original_execute(connection, [statement])
            seen["n"] += own

    monkeypatch.setattr(online_module, "execute", execute)
    return seen


@pytest.mark.slow
def test_the_swap_with_versions_killed_after_each_statement_then_run_again(
    shop: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap stopped after each of its statements (each commits on its own on
    MariaDB) and run again: both versions' views are right after it, whatever
    the queued replacements managed at the stop; then undone, nothing left."""
    engine, prefix = shop
    seen = _killable(monkeypatch)
    _migrate(engine, "prepare", prefix)
    seen["n"] = 0
    _migrate(engine, "swap", prefix)
    total = seen["n"]
    _check_versions_swapped(engine, prefix)
    assert total > 5
    for stop in range(total):
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
        assert _version_databases(engine, prefix) == set(), stop
        _migrate(engine, "prepare", prefix)
        seen.update(n=0, stop=stop)
        with pytest.raises(_Killed):
            _migrate(engine, "swap", prefix)
        _migrate(engine, "swap", prefix)
        _check_versions_swapped(engine, prefix)
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
    assert _version_databases(engine, prefix) == set()


def _tables_as_they_are(engine: Engine) -> tuple[list[Any], ...]:
    """The tables' definitions and every item under its shop (by names)."""
    with engine.connect() as conn:
        return (
            [conn.exec_driver_sql(f"SHOW CREATE TABLE {_q(t)}").one()[1] for t in (PARENT, CHILD)],
            conn.exec_driver_sql(
                f"SELECT c.label, p.name FROM {_q(CHILD)} c JOIN {_q(PARENT)} p"
                f" ON p.{_q(KEY)} = c.{_q(REF)} ORDER BY c.label"
            ).all(),
        )


@pytest.mark.slow
def test_the_undo_with_versions_killed_after_each_statement_then_run_again(
    shop: tuple[Engine, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The online undo after the swap stopped after each of its statements (each
    commits on its own on MariaDB) and run again: the tables back as they were,
    every item under its shop, both version databases gone (their grants too)."""
    engine, prefix = shop
    before = _tables_as_they_are(engine)
    seen = _killable(monkeypatch)
    _migrate(engine, "prepare", prefix)
    _migrate(engine, "swap", prefix)
    seen["n"] = 0
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
    total = seen["n"]
    assert total > 5 and _tables_as_they_are(engine) == before
    for stop in range(total):
        _migrate(engine, "prepare", prefix)
        _migrate(engine, "swap", prefix)
        seen.update(n=0, stop=stop)
        with pytest.raises(_Killed), engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
        assert _version_databases(engine, prefix) == set(), stop
        assert _tables_as_they_are(engine) == before, stop
