"""Names holding ``%`` and ``:`` through the key migration, offline and online,
and its undo: tables, columns, a foreign key, an index, a view, a trigger and
comments whose names (and literals) hold ``%``, ``%s``, ``%(x)s``, `` :x`` and
``?`` (SQLite's placeholder).

Both were refused before: ``%`` is a placeholder to psycopg and PyMySQL (the
engine's statements with parameters met doubled names, those without met names
the driver formatted), and SQLAlchemy's ``text()`` reads ``:x`` as a bound
parameter even inside a quoted name. Now every name is quoted as the database
reads it (``quote_name``), statements without parameters go to the driver as
written (``query_sql``), and those with parameters escape the colons inside
quotes (``text_sql``).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import dbsnapshot
import pytest
import requirements as requires
import sqlalchemy as sa
from conftest import _base_url, _engine, _mariadb_scratch, _postgresql_scratch
from sqlalchemy.engine import Engine

from sqla_ids.dialects.sql import _escaped_colons, execute_sql, query_sql, quoter
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7

PARENT, CHILD, VIEW = "pa%rent %s :p", "ch :ild %(x)s", "v :v %"
NAMES = {
    "p": PARENT,
    "c": CHILD,
    "v": VIEW,
    "name": "na:me %",
    "ref": "par :ent %",
    "note": "no :te %d ?",
    "fk": "fk :a %(y)s",
    "ix": "ix %(y)s :b",
    "tr": "tr :u %s",
    "fn": "fn :t %",
}

_SCHEMA = {
    "postgresql": [
        "CREATE TABLE {p} (id bigserial PRIMARY KEY, {name} text NOT NULL)",
        "CREATE TABLE {c} (id bigserial PRIMARY KEY, {ref} bigint"
        " CONSTRAINT {fk} REFERENCES {p} (id), {note} text)",
        "CREATE INDEX {ix} ON {c} ({ref}, {note})",
        "CREATE VIEW {v} AS SELECT c.{ref}, p.{name} FROM {c} c JOIN {p} p ON p.id = c.{ref}"
        " WHERE p.{name} NOT LIKE '%z' AND c.{note} <> ':z'",
        "CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS"
        " $$BEGIN NEW.{note} := NEW.{note} || ''; RETURN NEW; END$$",
        "CREATE TRIGGER {tr} BEFORE UPDATE ON {c} FOR EACH ROW EXECUTE FUNCTION {fn}()",
        "COMMENT ON TABLE {p} IS 'parents: 100% :kept'",
        "COMMENT ON COLUMN {c}.{ref} IS 'the parent %s :p'",
    ],
    "mysql": [  # (MariaDB)
        "CREATE TABLE {p} (id bigint AUTO_INCREMENT PRIMARY KEY, {name} varchar(20) NOT NULL)"
        " COMMENT 'parents: 100% :kept'",
        "CREATE TABLE {c} (id bigint AUTO_INCREMENT PRIMARY KEY,"
        " {ref} bigint COMMENT 'the parent %s :p', {note} varchar(20),"
        " KEY {ix} ({ref}, {note}), CONSTRAINT {fk} FOREIGN KEY ({ref}) REFERENCES {p} (id))",
        "CREATE VIEW {v} AS SELECT c.{ref}, p.{name} FROM {c} c JOIN {p} p ON p.id = c.{ref}"
        " WHERE p.{name} NOT LIKE '%z' AND c.{note} <> ':z'",
        "CREATE TRIGGER {tr} BEFORE UPDATE ON {c} FOR EACH ROW SET NEW.{note} = NEW.{note}",
    ],
    "sqlite": [
        "CREATE TABLE {p} (id INTEGER PRIMARY KEY, {name} text NOT NULL)",
        "CREATE TABLE {c} (id INTEGER PRIMARY KEY, {ref} bigint"
        " CONSTRAINT {fk} REFERENCES {p} (id), {note} text)",
        "CREATE INDEX {ix} ON {c} ({ref}, {note})",
        "CREATE VIEW {v} AS SELECT c.{ref}, p.{name} FROM {c} c JOIN {p} p ON p.id = c.{ref}"
        " WHERE p.{name} NOT LIKE '%z' AND c.{note} <> ':z'",
        "CREATE TRIGGER {tr} AFTER UPDATE ON {c} BEGIN UPDATE {c} SET {note} = {note} WHERE 0; END",
    ],
}


def _create(engine: Engine) -> None:
    q = quoter(engine.dialect)
    quoted = {key: q(name) for key, name in NAMES.items()}
    with engine.begin() as conn:
        for sql in _SCHEMA[engine.dialect.name]:
            execute_sql(conn, sql.format(**quoted))
        execute_sql(conn, f"INSERT INTO {q(PARENT)} ({q(NAMES['name'])}) VALUES ('a%s'), (':b')")
        execute_sql(
            conn,
            f"INSERT INTO {q(CHILD)} ({q(NAMES['ref'])}, {q(NAMES['note'])})"
            " VALUES (1, 'x :y'), (2, '%(z)s'), (2, NULL)",
        )


def _view(conn: sa.Connection) -> list[tuple[str, ...]]:
    rows = query_sql(conn, f"SELECT * FROM {quoter(conn.dialect)(VIEW)} ORDER BY 1, 2")
    return [tuple(str(v) for v in row) for row in rows]


def test_a_name_with_percent_and_colon_migrated_offline_and_back(private_engine: Engine) -> None:
    _offline_and_back(private_engine)


def _offline_and_back(engine: Engine) -> None:
    """Migrated offline, then restored: the schema and rows come back exactly."""
    _create(engine)
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn), dbsnapshot.rows(conn)
        relations = dbsnapshot.relations(conn)
        view = [row[1:] for row in _view(conn)]
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, recreate_views=True, batch_size=1)
        conn.commit()
    with engine.connect() as conn:
        assert [row[1:] for row in _view(conn)] == view
        assert dbsnapshot.relations(conn) == relations
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
    with engine.connect() as conn:
        assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before


# quick cover: the undo after the swap (the others run in CI)
@pytest.mark.parametrize(
    "phase, versions",
    [
        pytest.param("prepare", False, marks=pytest.mark.slow),
        ("swap", False),
        pytest.param("all", False, marks=pytest.mark.slow),
        # with the two application versions' schemas (MariaDB: databases) of views
        pytest.param("swap", True, marks=pytest.mark.slow),
        pytest.param("all", True, marks=pytest.mark.slow),
    ],
)
def test_a_name_with_percent_and_colon_migrated_online_and_back(
    online_private_engine: Engine, phase: str, versions: bool
) -> None:
    _online_and_back(online_private_engine, phase, versions)


@pytest.fixture(params=requires.online.databases())
def hostile_schema_engine(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """An engine whose current schema (MariaDB: database) is named with them too."""
    dialect: str = request.param
    request.getfixturevalue(f"{dialect}_url")  # skips/fails like every test of that dialect
    scratch = _postgresql_scratch if dialect == "postgresql" else _mariadb_scratch
    with scratch(_base_url(dialect), "sqla_ids_t sch'\"`%s :x %(y)s ü") as url:
        yield from _engine(url)


# quick cover: offline, and online with the undo after the swap; the contract with
# versions runs in CI
@pytest.mark.parametrize(
    "phase, versions",
    [("offline", False), ("swap", False), pytest.param("all", True, marks=pytest.mark.slow)],
)
def test_the_current_schema_named_with_them_too(
    hostile_schema_engine: Engine, phase: str, versions: bool
) -> None:
    """The migration creates its function, mapping and state table in the current
    schema (MariaDB: database), whose name holds them as well."""
    if phase == "offline":
        _offline_and_back(hostile_schema_engine)
    else:
        _online_and_back(hostile_schema_engine, phase, versions)


def _online_and_back(engine: Engine, phase: str, versions: bool) -> None:
    """Migrated online up to ``phase`` (with versions or not), then undone: the
    schema and rows come back exactly."""
    prefix = f"v_{secrets.token_hex(3)} %s :v"  # (its schemas' names hold them too)
    _create(engine)
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn), dbsnapshot.rows(conn)
        relations = dbsnapshot.relations(conn)
        view = [row[1:] for row in _view(conn)]
    for step in ["prepare", "swap", "all"][: ["prepare", "swap", "all"].index(phase) + 1]:
        with engine.connect() as conn:
            migrate_pk_to_uuid7(
                conn,
                PARENT,
                online=True,
                phase=step,
                batch_size=1,
                recreate_views=True,
                versions=prefix if versions else False,
            )
            conn.commit()
    with engine.connect() as conn:
        assert [row[1:] for row in _view(conn)] == view
        if phase == "all":  # (before the contract each child has its UUID column too)
            assert dbsnapshot.relations(conn) == relations
        conn.rollback()  # (the online undo runs with no transaction open)
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
    with engine.connect() as conn:
        after = dbsnapshot.schema(conn), dbsnapshot.rows(conn)
        assert not _version_schemas(conn, prefix)  # the undo dropped them
    if phase == "all" and engine.dialect.name == "postgresql":
        # After the contract the converted columns stay their tables' last
        # (documented: PostgreSQL cannot reorder columns): compared aside.
        assert sorted(map(_unplaced, after[0])) == sorted(map(_unplaced, before[0]))
        assert {t: sorted(map(sorted, r)) for t, r in after[1].items()} == {
            t: sorted(map(sorted, r)) for t, r in before[1].items()
        }
    else:
        assert after == before


def test_every_mariadb_driver_carries_them_or_refuses_first(mariadb_driver_engine: Engine) -> None:
    """PyMySQL carries the names; mysql-connector formats a ``%`` in every statement
    with parameters (SQLAlchemy escapes none for it): refused by name, unchanged."""
    engine = mariadb_driver_engine
    if engine.dialect.driver == "mysqlconnector" and sa.__version__.startswith("2.0."):
        pytest.skip(
            "SQLAlchemy 2.0's MySQL reflection through mysql-connector cannot read a table"
            " whose name holds % (its SHOW CREATE TABLE keeps the doubled %%); 2.1 can"
        )
    q = quoter(engine.dialect)
    try:
        _create(engine)
        with engine.connect() as conn:
            before = dbsnapshot.schema(conn), dbsnapshot.rows(conn)
            if engine.dialect.driver == "mysqlconnector":
                with pytest.raises(MigrationRefusedError) as refused:
                    migrate_pk_to_uuid7(conn, PARENT, recreate_views=True)
                assert f"the name {CHILD!r} contains %, which mysql-connector" in str(refused.value)
                assert "nothing was changed" in str(refused.value)
            else:
                migrate_pk_to_uuid7(conn, PARENT, recreate_views=True, batch_size=1)
                conn.commit()
                restore_pk_from_uuid7(conn, PARENT)
            conn.commit()
        with engine.connect() as conn:
            assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before
    finally:  # (the run's shared database)
        with engine.begin() as conn:
            execute_sql(conn, f"DROP VIEW IF EXISTS {q(VIEW)}")
            for table in (CHILD, PARENT, f"{PARENT}_uuid7_map"):
                execute_sql(conn, f"DROP TABLE IF EXISTS {q(table)}")


def _version_schemas(conn: sa.Connection, prefix: str) -> list[str]:
    """The versions' schemas (MariaDB: databases) still there."""
    names = sa.inspect(conn).get_schema_names()
    return [name for name in names if name.startswith(prefix)]


def _unplaced(line: str) -> str:
    """A schema line without a column's position."""
    if not line.startswith("column: "):
        return line
    fields = line.split(", ")
    return ", ".join(fields[:1] + fields[2:])


@pytest.mark.parametrize(
    "sql, backslashes, escaped",
    [
        ('SELECT "a :b", :p', False, 'SELECT "a \\:b", :p'),
        ("SELECT 'it''s :x' || :p -- a :c\n", False, "SELECT 'it''s \\:x' || :p -- a \\:c\n"),
        ("SELECT `a``:b :c`, 'x\\' :y', :p", True, "SELECT `a``\\:b \\:c`, 'x\\' \\:y', :p"),
        ("SELECT 'x\\', :p", False, "SELECT 'x\\', :p"),  # a backslash ends nothing there
        ("SELECT x::text, :p /* :q */", False, "SELECT x::text, :p /* \\:q */"),
        ('$$ "n :m" $$ :p', False, '$$ "n \\:m" $$ :p'),
        ("SELECT :p, 'open :x", False, "SELECT :p, 'open \\:x"),
    ],
)
def test_colons_are_escaped_only_inside_quotes_and_comments(
    sql: str, backslashes: bool, escaped: str
) -> None:
    assert _escaped_colons(sql, backslashes) == escaped
    assert list(sa.text(escaped).compile().params) == ["p"]
