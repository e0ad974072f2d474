"""MariaDB offline key migration: names, views over views, index order, transactions.

Each test is a defect of issue 28 reproduced on the real server: a backtick in
the key column's name (the restore failed and stuck), a view reading another
view over a converted column (MySQL's ``employees`` sample: recreated before
the view it reads, the views were gone), the indexes listed in another order
by ``SHOW CREATE TABLE`` after the round trip, and a run inside the caller's
``engine.begin()`` (MariaDB's DDL commits it). And the application's ``UPDATE``
triggers (Sakila's ``upd_film``, audits), set aside offline and guarded online
(issue 29).
"""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa
from dbsnapshot import rows, schema
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration.core import state

PARENT = "pa`r \"ent' é"
KEY = "i`d; `ü`"
CHILD = "ch``ild 'x'"
REF = 'p`id "ref"'


def _q(engine: Engine, name: str) -> str:
    return str(engine.dialect.identifier_preparer.quote(name))


def _hostile_schema(engine: Engine) -> None:
    """A parent whose key has backticks in its name, a child whose indexes over the
    reference come first, between others (the swap rebuilds those)."""
    q = lambda name: _q(engine, name)  # noqa: E731 - local shorthand
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {q(PARENT)} ({q(KEY)} INT NOT NULL AUTO_INCREMENT PRIMARY KEY"
            f" COMMENT 'the `key`', name VARCHAR(20) NOT NULL, code INT NOT NULL,"
            f" KEY {q('zz`name')} (name), UNIQUE KEY {q('u code')} (code),"
            f" KEY {q('aa')} (name, {q(KEY)}))"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {q(CHILD)} (id INT NOT NULL PRIMARY KEY, {q(REF)} INT NULL,"
            f" label VARCHAR(20) NOT NULL, n INT NOT NULL,"
            f" KEY {q('a`ref')} ({q(REF)}, label), KEY {q('z n')} (n),"
            f" UNIQUE KEY {q('u`ref')} ({q(REF)}, n), UNIQUE KEY {q('u label')} (label),"
            f" KEY {q('b label')} (label(5)) COMMENT 'prefix',"
            f" CONSTRAINT {q('f`k')} FOREIGN KEY ({q(REF)}) REFERENCES {q(PARENT)} ({q(KEY)})"
            " ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {q(PARENT)} (name, code) VALUES ('ann', 1), ('bob', 2), ('cy', 3)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {q(CHILD)} (id, {q(REF)}, label, n) VALUES"
            " (1, 1, 'x', 1), (2, 1, 'y', 2), (3, 3, 'z', 3), (4, NULL, 'w', 4)"
        )


def _key_names(lines: list[str]) -> list[str]:
    """Each table's index lines, name only, in the order ``SHOW CREATE TABLE`` prints them."""
    return [ln.split(" (")[0] for ln in lines if " key " in ln.split(": ")[0]]


def _snapshot(engine: Engine) -> tuple[list[str], dict[str, list[tuple[str, ...]]]]:
    with engine.connect() as conn:
        return schema(conn), rows(conn)


def test_backtick_in_key_name_round_trip_keeps_everything(mariadb_private_engine: Engine) -> None:
    """Defect 12: the restore read ``<key>_old`` through SQLAlchemy's inspector
    (which doubles backticks), found it missing and failed adding it again; the
    state then stuck at ``down``. Defect 22: the indexes over the converted
    columns came back last in ``SHOW CREATE TABLE``. Now the whole database
    (index order as printed included) equals what it was."""
    engine = mariadb_private_engine
    _hostile_schema(engine)
    before = _snapshot(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT)
    with engine.connect() as conn:
        # The upgrade keeps the index order too (the definitions change type only).
        assert _key_names(schema(conn)) == _key_names(before[0])
        restore_pk_from_uuid7(conn, PARENT)
    after = _snapshot(engine)
    assert after[0] == before[0]
    assert after[1] == before[1]
    with engine.connect() as conn:
        assert state.load(conn, PARENT) is None


def test_key_old_column_with_backtick_after_online_contract(mariadb_private_engine: Engine) -> None:
    """The same names online, every phase then the restore: the whole database
    comes back (the online path reads columns through information_schema)."""
    engine = mariadb_private_engine
    _hostile_schema(engine)
    before = _snapshot(engine)
    for phase in ("prepare", "swap", "contract"):
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, PARENT, online=True, phase=phase)  # type: ignore[arg-type]
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
    after = _snapshot(engine)
    assert after[1] == before[1]
    assert after[0] == before[0]


def _employees(engine: Engine) -> None:
    """MySQL's ``employees`` sample, cut down: ``current_dept_emp`` reads
    ``dept_emp_latest_date`` and both read ``dept_emp.emp_no``; the reading view
    sorts first by name."""
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE employees (emp_no INT NOT NULL PRIMARY KEY,"
            " first_name VARCHAR(14) NOT NULL)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE dept_emp (emp_no INT NOT NULL, dept_no CHAR(4) NOT NULL,"
            " from_date DATE NOT NULL, to_date DATE NOT NULL, PRIMARY KEY (emp_no, dept_no),"
            " KEY dept_no (dept_no),"
            " CONSTRAINT dept_emp_ibfk_1 FOREIGN KEY (emp_no) REFERENCES employees (emp_no)"
            " ON DELETE CASCADE)"
        )
        conn.exec_driver_sql(
            "CREATE VIEW dept_emp_latest_date AS SELECT emp_no, MAX(from_date) AS from_date,"
            " MAX(to_date) AS to_date FROM dept_emp GROUP BY emp_no"
        )
        conn.exec_driver_sql(
            "CREATE VIEW current_dept_emp AS SELECT l.emp_no, d.dept_no, l.from_date,"
            " l.to_date FROM dept_emp d INNER JOIN dept_emp_latest_date l"
            " ON d.emp_no = l.emp_no AND d.from_date = l.from_date AND l.to_date = d.to_date"
        )
        # A third level, named to sort first: it reads current_dept_emp.
        conn.exec_driver_sql(
            "CREATE VIEW `a cur``rent` AS SELECT c.emp_no, c.dept_no, e.first_name"
            " FROM current_dept_emp c JOIN employees e ON e.emp_no = c.emp_no"
        )
        conn.exec_driver_sql(
            "INSERT INTO employees VALUES (10001, 'Georgi'), (10002, 'Bezalel'), (10003, 'Parto')"
        )
        conn.exec_driver_sql(
            "INSERT INTO dept_emp VALUES (10001, 'd005', '1986-06-26', '9999-01-01'),"
            " (10002, 'd007', '1996-08-03', '9999-01-01'),"
            " (10003, 'd004', '1995-12-03', '2000-01-01'),"
            " (10003, 'd005', '2000-01-01', '9999-01-01')"
        )


def _view_rows(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    with engine.connect() as conn:
        return {
            "current": sorted(
                conn.exec_driver_sql(
                    "SELECT e.first_name, c.dept_no, c.from_date, c.to_date"
                    " FROM current_dept_emp c JOIN employees e ON e.emp_no = c.emp_no"
                ).all()
            ),
            "third": sorted(
                conn.exec_driver_sql("SELECT first_name, dept_no FROM `a cur``rent`").all()
            ),
        }


def test_views_over_views_recreated_bases_first(mariadb_private_engine: Engine) -> None:
    """Defect 20: the views are recreated each after the views it reads, both ways,
    and return the same rows; the whole database equals what it was after the
    restore."""
    engine = mariadb_private_engine
    _employees(engine)
    before = _snapshot(engine)
    seen = _view_rows(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "employees", recreate_views=True)
    assert _view_rows(engine) == seen
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, "employees")
    assert _view_rows(engine) == seen
    assert _snapshot(engine) == before


def test_inside_engine_begin_is_refused_before_any_change(mariadb_private_engine: Engine) -> None:
    """MariaDB commits the caller's transaction at the first DDL, and SQLAlchemy
    then fails at the end of ``engine.begin()`` ("closed transaction"), after the
    migration changed the tables: refused up front instead, saying what to use."""
    engine = mariadb_private_engine
    _hostile_schema(engine)
    before = _snapshot(engine)
    with (
        pytest.raises(MigrationRefusedError, match=r"engine\.connect\(\)") as error,
        engine.begin() as conn,
    ):
        migrate_pk_to_uuid7(conn, PARENT)
    assert "transaction block" in str(error.value)
    assert "nothing was changed" in str(error.value)
    assert _snapshot(engine) == before
    with engine.connect() as conn:
        assert state.load(conn, PARENT) is None
        migrate_pk_to_uuid7(conn, PARENT)
    migrated = _snapshot(engine)
    with (
        pytest.raises(MigrationRefusedError, match=r"engine\.connect\(\)") as error,
        engine.begin() as conn,
    ):
        restore_pk_from_uuid7(conn, PARENT)
    assert "nothing was changed" in str(error.value)
    assert _snapshot(engine) == migrated
    # A connection whose transaction autobegan (the caller read first) is fine.
    with engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1").all()
        restore_pk_from_uuid7(conn, PARENT)
    assert _snapshot(engine) == before


def _sakila_film(engine: Engine) -> None:
    """Sakila's ``language``/``film``/``film_text`` with its three film triggers
    (``upd_film`` fires on UPDATE), ``last_update`` maintained by the server,
    and an audit trigger that would record the migration's writes as updates."""
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE language (language_id TINYINT UNSIGNED NOT NULL AUTO_INCREMENT,"
            " name CHAR(20) NOT NULL, last_update TIMESTAMP NOT NULL DEFAULT"
            " CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (language_id))"
        )
        conn.exec_driver_sql(
            "CREATE TABLE film (film_id SMALLINT UNSIGNED NOT NULL AUTO_INCREMENT,"
            " title VARCHAR(128) NOT NULL, description TEXT DEFAULT NULL,"
            " language_id TINYINT UNSIGNED NOT NULL,"
            " original_language_id TINYINT UNSIGNED DEFAULT NULL,"
            " last_update TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"
            " ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (film_id), KEY idx_title (title),"
            " KEY idx_fk_language_id (language_id),"
            " KEY idx_fk_original_language_id (original_language_id),"
            " CONSTRAINT fk_film_language FOREIGN KEY (language_id)"
            " REFERENCES language (language_id) ON DELETE RESTRICT ON UPDATE CASCADE,"
            " CONSTRAINT fk_film_language_original FOREIGN KEY (original_language_id)"
            " REFERENCES language (language_id) ON DELETE RESTRICT ON UPDATE CASCADE)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE film_text (film_id SMALLINT NOT NULL, title VARCHAR(255) NOT NULL,"
            " description TEXT, PRIMARY KEY (film_id), FULLTEXT KEY idx_title_description"
            " (title, description))"
        )
        conn.exec_driver_sql(
            "CREATE TABLE `film audit` (n INT NOT NULL AUTO_INCREMENT PRIMARY KEY,"
            " what VARCHAR(200) NOT NULL)"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER ins_film AFTER INSERT ON film FOR EACH ROW BEGIN"
            " INSERT INTO film_text (film_id, title, description)"
            " VALUES (new.film_id, new.title, new.description); END"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER upd_film AFTER UPDATE ON film FOR EACH ROW BEGIN"
            " IF (old.title != new.title) or (old.description != new.description) THEN"
            " UPDATE film_text SET title=new.title, description=new.description,"
            " film_id=new.film_id WHERE film_id=old.film_id; END IF; END"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER del_film AFTER DELETE ON film FOR EACH ROW BEGIN"
            " DELETE FROM film_text WHERE film_id = old.film_id; END"
        )
        # Two BEFORE UPDATE triggers, the second FOLLOWS the first (their order is
        # kept), parsed under ANSI_QUOTES: "film audit" is an identifier there.
        conn.exec_driver_sql("SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')")
        conn.exec_driver_sql(
            'CREATE TRIGGER "audit `b`" BEFORE UPDATE ON film FOR EACH ROW'
            " INSERT INTO \"film audit\" (what) VALUES (CONCAT('b ', old.title))"
        )
        conn.exec_driver_sql(
            'CREATE TRIGGER "audit a" BEFORE UPDATE ON film FOR EACH ROW FOLLOWS "audit `b`"'
            " INSERT INTO \"film audit\" (what) VALUES (CONCAT('a ', old.title))"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER lang_audit BEFORE UPDATE ON language FOR EACH ROW"
            " INSERT INTO \"film audit\" (what) VALUES (CONCAT('lang ', old.name))"
        )
        conn.exec_driver_sql("SET SESSION sql_mode = DEFAULT")
        conn.exec_driver_sql(
            "INSERT INTO language (name, last_update) VALUES"
            " ('English', '2006-02-15 05:02:19'), ('Italian', '2006-02-15 05:02:19'),"
            " ('Japanese', '2006-02-15 05:02:19')"
        )
        conn.exec_driver_sql(
            "INSERT INTO film (title, description, language_id, original_language_id,"
            " last_update) VALUES ('ACADEMY DINOSAUR', 'epic', 1, NULL, '2006-02-15 05:03:42'),"
            " ('ACE GOLDFINGER', 'astounding', 1, 2, '2006-02-15 05:03:42'),"
            " ('ADAPTATION HOLES', 'yarn', 3, 1, '2006-02-15 05:03:42')"
        )


def _trigger_order(engine: Engine) -> list[tuple[object, ...]]:
    with engine.connect() as conn:
        return list(
            conn.exec_driver_sql(
                "SELECT EVENT_OBJECT_TABLE, TRIGGER_NAME, ACTION_TIMING, ACTION_ORDER, SQL_MODE"
                " FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()"
                # Not the new key's own BEFORE INSERT trigger (its default).
                " AND RIGHT(TRIGGER_NAME, 6) <> '_uuid7' ORDER BY 1, 3, 4"
            ).all()
        )


@pytest.mark.parametrize("table", ["language", "film"])
def test_update_triggers_set_aside_offline(mariadb_private_engine: Engine, table: str) -> None:
    """Issue 29: tables with an ``UPDATE`` trigger (Sakila's ``upd_film``) migrate
    offline: the triggers are dropped while the migration writes and created
    again from their definitions (order and sql_mode kept), so no audit row is
    written, no ``last_update`` moves, both ways; they fire afterwards."""
    engine = mariadb_private_engine
    _sakila_film(engine)
    before = _snapshot(engine)
    order = _trigger_order(engine)
    acknowledged = ["ins_film", "upd_film", "del_film"] if table == "film" else []
    with engine.connect() as conn:
        plan = migrate_pk_to_uuid7(conn, table, acknowledged_routines=acknowledged)
    assert {t.name for t in plan.parked_triggers} == (
        {"upd_film", "audit `b`", "audit a"}
        if table == "film"
        else {"upd_film", "audit `b`", "audit a", "lang_audit"}
    )
    assert _trigger_order(engine) == order
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM `film audit`").scalar() == 0
        stamps = conn.exec_driver_sql("SELECT DISTINCT last_update FROM film").scalars().all()
        assert [str(s) for s in stamps] == ["2006-02-15 05:03:42"]
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, table)
    assert _snapshot(engine) == before
    assert _trigger_order(engine) == order
    # The triggers work as before: in their order, upd_film keeps film_text in step.
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE film SET title = 'ACE' WHERE title = 'ACE GOLDFINGER'")
        assert conn.exec_driver_sql("SELECT what FROM `film audit` ORDER BY n").all() == [
            ("b ACE GOLDFINGER",),
            ("a ACE GOLDFINGER",),
        ]
        assert conn.exec_driver_sql("SELECT count(*) FROM film_text WHERE title = 'ACE'").scalar()


class _Editor(threading.Thread):
    """The application updating films and languages (never their keys) while the
    migration runs, each update its own transaction; what the audit triggers
    must have written for it is recorded."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        self.stop = threading.Event()
        self.audit: list[str] = []
        self.failures: list[str] = []

    def run(self) -> None:
        titles = {"ACADEMY DINOSAUR": 0, "ACE GOLDFINGER": 0, "ADAPTATION HOLES": 0}
        names = {"English": 0, "Italian": 0}
        n = 0
        while not self.stop.is_set() or n < 6:
            n += 1
            try:
                with self.engine.begin() as conn:
                    if n % 2:
                        base = list(titles)[n % 3]
                        old = f"{base} {titles[base]}" if titles[base] else base
                        titles[base] += 1
                        conn.execute(
                            sa.text("UPDATE film SET title = :new WHERE title = :old"),
                            {"new": f"{base} {titles[base]}", "old": old},
                        )
                        self.audit += [f"b {old}", f"a {old}"]
                    else:
                        base = list(names)[(n // 2) % 2]
                        old = f"{base} {names[base]}" if names[base] else base
                        names[base] += 1
                        conn.execute(
                            sa.text("UPDATE language SET name = :new WHERE name = :old"),
                            {"new": f"{base} {names[base]}", "old": old},
                        )
                        self.audit.append(f"lang {old}")
            except sa.exc.DBAPIError as error:  # pragma: no cover - reported by the test
                self.failures.append(str(error.orig))
            time.sleep(0.01)


def _definitions(engine: Engine) -> dict[str, str]:
    with engine.connect() as conn:
        names = [
            name
            for name in conn.exec_driver_sql(
                "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS"
                " WHERE TRIGGER_SCHEMA = DATABASE()"
            ).scalars()
            # Not the migration's: its sync triggers, the new key's default.
            if not name.startswith("sqla_ids_") and not name.endswith("_uuid7")
        ]
        q = conn.dialect.identifier_preparer.quote
        return {
            name: conn.exec_driver_sql(f"SHOW CREATE TRIGGER {q(name)}")
            .mappings()
            .one()["SQL Original Statement"]
            for name in names
        }


@pytest.mark.parametrize(
    "stop",
    [
        "contract",
        # (the ways back: with the slow tests)
        pytest.param("undo before the swap", marks=pytest.mark.slow),
        pytest.param("undo after the swap", marks=pytest.mark.slow),
    ],
)
def test_update_triggers_guarded_online(mariadb_private_engine: Engine, stop: str) -> None:
    """Issue 29: online, the application's ``UPDATE`` triggers (an audit and
    Sakila's ``upd_film``) keep firing for the application's updates -- every
    audit row it caused is there -- and never for the migration's backfill (no
    other row, no ``last_update`` moved). Their order, ``sql_mode`` and
    definitions are exactly what they were once the migration is contracted
    or undone, from before and from after the swap."""
    engine = mariadb_private_engine
    _sakila_film(engine)
    order = _trigger_order(engine)
    definitions = _definitions(engine)

    def structure(conn: sa.Connection) -> list[str]:  # the audit's counter moves
        return [line for line in schema(conn) if not line.startswith("table film audit:")]

    with engine.connect() as conn:
        before = structure(conn)
    options = PkMigrationOptions(online=True, batch_size=1)
    editor = _Editor(engine)
    editor.start()
    try:
        time.sleep(0.05)
        with engine.connect() as conn:
            plan = migrate_pk_to_uuid7(conn, "language", options, phase="prepare")
        assert [t.name for t in plan.parked_triggers] == [
            "audit `b`",
            "audit a",
            "upd_film",
            "lang_audit",
        ]
        # Meanwhile guarded, in their order, the migration's own sync trigger last.
        with engine.connect() as conn:
            firing = conn.exec_driver_sql(
                "SELECT TRIGGER_NAME, ACTION_STATEMENT FROM information_schema.TRIGGERS"
                " WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = 'film'"
                " AND ACTION_TIMING = 'BEFORE' AND EVENT_MANIPULATION = 'UPDATE'"
                " ORDER BY ACTION_ORDER"
            ).all()
        assert [name for name, _ in firing][:2] == ["audit `b`", "audit a"]
        assert all(body.startswith("IF @sqla_ids_migration IS NULL") for _, body in firing[:2])
        assert firing[-1][0].startswith("sqla_ids_")
        if stop != "undo before the swap":
            with engine.connect() as conn:
                migrate_pk_to_uuid7(conn, "language", options, phase="swap")
        time.sleep(0.05)
        with engine.connect() as conn:
            if stop == "contract":
                migrate_pk_to_uuid7(conn, "language", options, phase="contract")
            else:
                restore_pk_from_uuid7(conn, "language")
        time.sleep(0.05)
    finally:
        editor.stop.set()
        editor.join()
    assert editor.failures == []
    assert _trigger_order(engine) == order
    assert _definitions(engine) == definitions
    with engine.connect() as conn:
        if stop != "contract":  # film references language twice: both come back
            assert structure(conn) == before
        audit = conn.exec_driver_sql("SELECT what FROM `film audit` ORDER BY n").scalars().all()
        stamps = conn.exec_driver_sql(
            "SELECT DISTINCT last_update FROM film WHERE title IN"
            " ('ACADEMY DINOSAUR', 'ACE GOLDFINGER', 'ADAPTATION HOLES')"
        ).scalars()
        texts = conn.exec_driver_sql("SELECT title FROM film_text ORDER BY film_id").scalars()
        titles = conn.exec_driver_sql("SELECT title FROM film ORDER BY film_id").scalars()
        assert list(texts) == list(titles)  # upd_film fired for every title change
    assert audit == editor.audit
    assert [str(s) for s in stamps] in ([], ["2006-02-15 05:03:42"])


def test_update_triggers_back_after_a_killed_run(mariadb_private_engine: Engine) -> None:
    """A run stopped after the triggers were dropped (here: a failing step) leaves
    them recorded in the state table; whatever happens they are back once the
    run finishes, exactly as they were."""
    engine = mariadb_private_engine
    _sakila_film(engine)
    order = _trigger_order(engine)
    with engine.connect() as conn:
        # Simulate a kill after the first write: drop them as the run does, record the
        # plan at its first step, then continue with a fresh run.
        plan = migrate_pk_to_uuid7(conn, "language", dry_run=True)
        from sqla_ids.migration.backends.mysql.offline import park_triggers
        from sqla_ids.migration.core.phases import Reached, Recorded

        state.save(conn, plan, Recorded(Reached.PLANNED))
        park_triggers(conn, plan)
        conn.commit()
    assert [r for r in _trigger_order(engine) if r[1] in ("upd_film", "lang_audit")] == []
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "language")
    assert _trigger_order(engine) == order


def test_postgresql_views_over_views_recreated_bases_first(
    postgresql_private_engine: Engine,
) -> None:
    """PostgreSQL's ordering (pg_depend, deepest first) on the same three levels,
    each reading the converted column directly too: recreated bases first."""
    engine = postgresql_private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE employees (emp_no INT PRIMARY KEY, first_name VARCHAR(14) NOT NULL)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE dept_emp (emp_no INT NOT NULL REFERENCES employees ON DELETE CASCADE,"
            " dept_no CHAR(4) NOT NULL, from_date DATE NOT NULL, to_date DATE NOT NULL,"
            " PRIMARY KEY (emp_no, dept_no))"
        )
        conn.exec_driver_sql(
            "CREATE VIEW dept_emp_latest_date AS SELECT emp_no, MAX(from_date) AS from_date,"
            " MAX(to_date) AS to_date FROM dept_emp GROUP BY emp_no"
        )
        conn.exec_driver_sql(
            "CREATE VIEW current_dept_emp AS SELECT l.emp_no, d.dept_no, l.from_date,"
            " l.to_date FROM dept_emp d INNER JOIN dept_emp_latest_date l"
            " ON d.emp_no = l.emp_no AND d.from_date = l.from_date AND l.to_date = d.to_date"
        )
        conn.exec_driver_sql(
            'CREATE VIEW "a cur""rent" AS SELECT c.emp_no, c.dept_no, e.first_name'
            " FROM current_dept_emp c JOIN employees e ON e.emp_no = c.emp_no"
        )
        conn.exec_driver_sql("INSERT INTO employees VALUES (10001, 'Georgi'), (10003, 'Parto')")
        conn.exec_driver_sql(
            "INSERT INTO dept_emp VALUES (10001, 'd005', '1986-06-26', '9999-01-01'),"
            " (10003, 'd004', '1995-12-03', '2000-01-01'),"
            " (10003, 'd005', '2000-01-01', '9999-01-01')"
        )
    query = 'SELECT first_name, dept_no FROM "a cur""rent" ORDER BY 1, 2'
    with engine.connect() as conn:
        seen = conn.exec_driver_sql(query).all()
    before = _snapshot(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "employees", recreate_views=True)
        conn.commit()
        assert conn.exec_driver_sql(query).all() == seen
        restore_pk_from_uuid7(conn, "employees")
        conn.commit()
    assert _snapshot(engine) == before


def test_online_index_checks_read_the_catalog_not_names(mariadb_private_engine: Engine) -> None:
    """The online refusals of prefix and descending indexes looked for "`(" and
    " DESC" in the index's definition: an index or column name holding them was
    refused. They read information_schema now; a real prefix index still is."""
    engine = mariadb_private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE p (id INT AUTO_INCREMENT PRIMARY KEY)")
        conn.exec_driver_sql(
            "CREATE TABLE c (id INT PRIMARY KEY, `r`` DESC` INT, t VARCHAR(20),"
            " KEY `k``( DESC` (`r`` DESC`, id),"
            " CONSTRAINT f FOREIGN KEY (`r`` DESC`) REFERENCES p (id))"
        )
        conn.exec_driver_sql("INSERT INTO p VALUES (1), (2)")
        conn.exec_driver_sql("INSERT INTO c VALUES (1, 1, 'a'), (2, 2, 'b')")
    with engine.connect() as conn:
        plan = migrate_pk_to_uuid7(conn, "p", online=True, dry_run=True)
        assert [d.name for d in plan.dependents] == ["k`( DESC"]
        migrate_pk_to_uuid7(conn, "p", online=True)
        restore_pk_from_uuid7(conn, "p")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE INDEX `pre` ON c (`r`` DESC`, t(3))")
    with (
        engine.connect() as conn,
        pytest.raises(MigrationRefusedError, match=r"index pre on \w+[.]c is a"),
    ):
        migrate_pk_to_uuid7(conn, "p", online=True)
