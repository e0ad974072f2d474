"""Regression tests for what real schemas did to the key migration (issue 10).

Each test builds the shape on the real server (its own schema/database), runs
the upgrade and the downgrade, and compares whole-database fingerprints: every
row of every table and the schema as the database prints it must come back
exactly, and nothing may change while a refusal is reported.
"""

from __future__ import annotations

import secrets

import pytest
import sqlalchemy as sa
from audit_triggers import audited
from dbsnapshot import relations, rows, schema
from sqlalchemy.engine import Connection, Engine

from sqla_ids import UUIDv7
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.identifiers import uuid7
from sqla_ids.migration import (
    PkMigrationOptions,
    migrate_pk_to_uuid7,
    migrate_pks_to_uuid7,
    plan_pk_migration,
    restore_pk_from_uuid7,
)


def _snapshot(engine: Engine) -> tuple[list[str], dict[str, list[tuple[str, ...]]]]:
    with engine.connect() as conn:
        return schema(conn), rows(conn)


def _same(after: tuple[list[str], object], before: tuple[list[str], object]) -> None:
    """Schema lines and rows equal; a difference is shown line by line."""
    assert sorted(set(after[0]) - set(before[0])) == sorted(set(before[0]) - set(after[0]))
    assert after[0] == before[0]
    assert after[1] == before[1]


def _round_trip(engine: Engine, table: str, **options: object) -> None:
    """Upgrade (relationships kept), downgrade (everything as before)."""
    before = _snapshot(engine)
    with engine.connect() as conn:
        joined = relations(conn)
        migrate_pk_to_uuid7(conn, table, **options)  # type: ignore[arg-type]
        conn.commit()
    with engine.connect() as conn:
        assert relations(conn) == joined
        restore_pk_from_uuid7(conn, table)
        conn.commit()
    _same(_snapshot(engine), before)


def _refused(engine: Engine, table: str, *expected: str, **options: object) -> str:
    before = _snapshot(engine)
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as error:
        migrate_pk_to_uuid7(conn, table, **options)  # type: ignore[arg-type]
    message = str(error.value)
    for text in expected:
        assert text in message
    assert _snapshot(engine) == before
    return message


# -- 1. values that change on update ------------------------------------------------


def _on_update_tables(conn: Connection) -> None:
    """Parent and child with an "updated at" column the database sets on every
    update: MariaDB's ON UPDATE CURRENT_TIMESTAMP; a trigger elsewhere."""
    name = conn.dialect.name
    if name == "mysql":
        stamp = "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP"
        conn.exec_driver_sql(
            f"CREATE TABLE parent (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20),"
            f" updated_at {stamp})"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE child (id INT AUTO_INCREMENT PRIMARY KEY, parent_id INT,"
            f" note VARCHAR(20), touched {stamp}, FOREIGN KEY (parent_id) REFERENCES parent(id))"
        )
    elif name == "postgresql":
        conn.exec_driver_sql(
            "CREATE TABLE parent (id serial PRIMARY KEY, name varchar(20),"
            " updated_at timestamp NOT NULL DEFAULT now())"
        )
        conn.exec_driver_sql(
            "CREATE TABLE child (id serial PRIMARY KEY, parent_id int REFERENCES parent(id),"
            " note varchar(20), touched timestamp NOT NULL DEFAULT now())"
        )
        conn.exec_driver_sql(
            "CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN NEW.updated_at = now(); RETURN NEW; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER stamp BEFORE UPDATE ON parent FOR EACH ROW EXECUTE FUNCTION stamp()"
        )
    else:
        conn.exec_driver_sql(
            "CREATE TABLE parent (id INTEGER PRIMARY KEY, name VARCHAR(20),"
            " updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id),"
            " note VARCHAR(20), touched TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER stamp AFTER UPDATE OF name ON parent BEGIN"
            " UPDATE parent SET updated_at = CURRENT_TIMESTAMP WHERE rowid = NEW.rowid; END"
        )
    for i in range(1, 31):
        conn.execute(
            sa.text("INSERT INTO parent (id, name, updated_at) VALUES (:i, :n, :t)"),
            {"i": i, "n": f"p{i}", "t": f"2001-02-03 04:05:{i:02d}"},
        )
    for i in range(1, 31):
        conn.execute(
            sa.text("INSERT INTO child (id, parent_id, note, touched) VALUES (:i, :p, :n, :t)"),
            {"i": i, "p": (i * 7) % 30 + 1, "n": f"c{i}", "t": f"1999-12-31 23:59:{i:02d}"},
        )


# quick cover: tests/test_migration_mariadb_offline.py::test_update_triggers_set_aside_offline
# (MariaDB's ON UPDATE CURRENT_TIMESTAMP columns keep their values both ways)
@pytest.mark.slow_on("mariadb")
def test_columns_set_on_update_keep_their_values(private_engine: Engine) -> None:
    engine = private_engine
    with engine.begin() as conn:
        _on_update_tables(conn)
    before = _snapshot(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "parent", timestamp_column="updated_at")
        conn.commit()
        stamps = conn.exec_driver_sql("SELECT updated_at FROM parent ORDER BY id_old").scalars()
        assert [str(s)[:19] for s in stamps] == [f"2001-02-03 04:05:{i:02d}" for i in range(1, 31)]
        touched = conn.exec_driver_sql("SELECT touched FROM child ORDER BY id").scalars()
        assert [str(s)[:19] for s in touched] == [f"1999-12-31 23:59:{i:02d}" for i in range(1, 31)]
        # Keys come from the recorded times, not the migration's.
        first = conn.exec_driver_sql("SELECT id FROM parent ORDER BY id_old").scalars().first()
        assert first is not None
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, "parent")
        conn.commit()
    _same(_snapshot(engine), before)


def test_the_undo_writing_rows_is_no_application_update(private_engine: Engine) -> None:
    """The undo writes the parent's rows (old keys back; a row created since the
    migration numbered): the application's UPDATE triggers do not fire on it
    (no audit row, ``updated`` untouched), and are back and firing after."""
    engine = private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE parent (id INTEGER PRIMARY KEY, name VARCHAR(20))")
        conn.exec_driver_sql(
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent_id INTEGER REFERENCES parent(id))"
        )
        conn.exec_driver_sql("INSERT INTO parent VALUES (1, 'a'), (2, 'b')")
        conn.exec_driver_sql("INSERT INTO child VALUES (1, 1), (2, 2)")
        audited(conn, "parent", "au'dit", "name")
    audit = sa.select(sa.func.count()).select_from(sa.table("au'dit"))
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "parent", acknowledged_routines=["touch t", "touch `t`"])
        conn.commit()
    parent = sa.table("parent", sa.column("id", UUIDv7()), sa.column("name"))
    with engine.begin() as conn:  # created since (SQLite: the application makes the key)
        conn.execute(sa.insert(parent).values(id=uuid7(), name="new"))
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, "parent")
        conn.commit()
        assert conn.execute(audit).scalar() == 0
        rows = conn.exec_driver_sql("SELECT id, name, updated FROM parent ORDER BY id").all()
    assert [(i, n) for i, n, _ in rows] == [(1, "a"), (2, "b"), (3, "new")]
    assert {str(when) for *_, when in rows} == {"2001-01-01 00:00:00"}
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE parent SET name = 'c' WHERE id = 3")
        assert conn.execute(audit).scalar() == 1


# -- 2. PostgreSQL partitions and inheritance -----------------------------------------


def test_postgresql_partitioned_child_keeps_every_index(postgresql_engine: Engine) -> None:
    """A partitioned table referencing the key is converted through its parent;
    an index that exists on one partition only survives both ways."""
    engine = postgresql_engine
    p = f"pt{secrets.token_hex(2)}_"
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {p}account (id bigint GENERATED ALWAYS AS IDENTITY"
            " PRIMARY KEY, name text)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {p}event (id bigint, at date NOT NULL, account_id bigint"
            f" REFERENCES {p}account(id), PRIMARY KEY (id, at)) PARTITION BY RANGE (at)"
        )
        conn.exec_driver_sql(f"CREATE INDEX {p}ev_acc ON {p}event (account_id)")
        for year in (2024, 2025):
            conn.exec_driver_sql(
                f"CREATE TABLE {p}event_{year} PARTITION OF {p}event"
                f" FOR VALUES FROM ('{year}-01-01') TO ('{year + 1}-01-01')"
            )
        conn.exec_driver_sql(f"CREATE INDEX {p}only_2025 ON {p}event_2025 (account_id, at)")
        conn.exec_driver_sql(
            f"INSERT INTO {p}account (name) SELECT 'a' || n FROM generate_series(1, 20) n"
        )
        conn.execute(
            sa.text(
                f"INSERT INTO {p}event SELECT n, DATE '2024-06-01' + n * 2, n % 20 + 1"
                " FROM generate_series(1, 200) n"
            )
        )
    try:
        before = _snapshot(engine)
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, f"{p}account")
            conn.commit()
            types = (
                conn.exec_driver_sql(
                    "SELECT DISTINCT format_type(atttypid, atttypmod) FROM pg_attribute"
                    " WHERE attname = 'account_id' AND attrelid IN"
                    f" ('{p}event'::regclass, '{p}event_2024'::regclass, '{p}event_2025'::regclass)"
                )
                .scalars()
                .all()
            )
            assert types == ["uuid"]
            assert (
                conn.exec_driver_sql(
                    "SELECT count(*) FROM pg_indexes WHERE indexname = %(n)s",
                    {"n": f"{p}only_2025"},
                ).scalar()
                == 1
            )
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, f"{p}account")
            conn.commit()
        _same(_snapshot(engine), before)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {p}event, {p}account CASCADE")


def test_postgresql_partition_key_and_inheritance_refused_up_front(
    postgresql_private_engine: Engine,
) -> None:
    engine = postgresql_private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE part (id int PRIMARY KEY) PARTITION BY RANGE (id)")
        conn.exec_driver_sql("CREATE TABLE part_1 PARTITION OF part FOR VALUES FROM (0) TO (100)")
        conn.exec_driver_sql("CREATE TABLE base (id int PRIMARY KEY, name text)")
        conn.exec_driver_sql("CREATE TABLE derived (extra text) INHERITS (base)")
        conn.exec_driver_sql("INSERT INTO part VALUES (1), (2)")
        # The parent's primary key covers its own rows: a child's row may repeat a key.
        conn.exec_driver_sql("INSERT INTO base VALUES (1, 'a'), (2, 'b')")
        conn.exec_driver_sql("INSERT INTO derived VALUES (2, 'c', 'x'), (3, 'd', 'y')")
    _refused(engine, "part", "part is partitioned by id")
    _refused(engine, "part_1", "part_1 is a partition of part", ".part's key instead")
    _refused(
        engine,
        "base",
        "base has inheritance children (derived)",
        "some keys are there twice in the tree (2)",
        "NO INHERIT base",
    )
    # Keys of their own: the tree's keys are numbered as one table's, both ways.
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE derived SET id = 4 WHERE id = 2")
    before = _snapshot(engine)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "base")
        conn.commit()
        keys = conn.exec_driver_sql("SELECT id_old, id FROM base ORDER BY id_old").all()
        assert [old for old, _ in keys] == [1, 2, 3, 4]
        assert [new for _, new in keys] == sorted(new for _, new in keys)  # in old-key order
        derived = conn.exec_driver_sql("SELECT name, id_old FROM derived ORDER BY 1").all()
        assert derived == [("c", 4), ("d", 3)]
        restore_pk_from_uuid7(conn, "base")
        conn.commit()
    assert _snapshot(engine) == before


# -- 3, 6. rules, materialized views, triggers: all reported at once ------------------


def test_postgresql_every_blocker_in_one_refusal(postgresql_private_engine: Engine) -> None:
    engine = postgresql_private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE parent (id int PRIMARY KEY, name text)")
        conn.exec_driver_sql(
            "CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent(id))"
        )
        conn.exec_driver_sql("CREATE TABLE log (what text)")
        conn.exec_driver_sql(
            "CREATE RULE keep_log AS ON UPDATE TO parent DO ALSO INSERT INTO log VALUES ('u')"
        )
        conn.exec_driver_sql("CREATE MATERIALIZED VIEW mv AS SELECT id FROM parent")
        conn.exec_driver_sql(
            "CREATE FUNCTION f() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER t BEFORE UPDATE OF parent_id ON child FOR EACH ROW EXECUTE FUNCTION f()"
        )
        conn.exec_driver_sql("INSERT INTO parent VALUES (1, 'a')")
    message = _refused(
        engine,
        "parent",
        "3 problems",
        ".mv depends on ",
        ".parent.id and holds rows",
        "DROP MATERIALIZED VIEW ",
        "rule keep_log on ",
        "DROP RULE keep_log ON ",
        "trigger with a column list or WHEN condition t on ",
        ".child; drop it first (DROP TRIGGER t ON ",
        recreate_views=True,  # a rule is not a view: never DROP VIEW on a table
    )
    assert "nothing was changed" in message


# -- 4. several tables: true messages, re-runs continue ---------------------------------


# quick cover: the [postgresql] and [sqlite] cases (the plan and the re-run are the
# engine's own), tests/test_migration_offline_keys.py::
#   test_an_interrupted_run_finishes_with_the_same_keys
@pytest.mark.slow_on("mariadb")
def test_several_tables_plan_first_and_rerun_continues(private_engine: Engine) -> None:
    engine = private_engine
    with engine.begin() as conn:
        for t in ("a", "b", "c"):
            conn.exec_driver_sql(f"CREATE TABLE {t} (id INTEGER PRIMARY KEY, name VARCHAR(10))")
            conn.exec_driver_sql(f"INSERT INTO {t} (id, name) VALUES (1, 'x'), (2, 'y')")
        conn.exec_driver_sql("CREATE VIEW bv AS SELECT id, name FROM b")
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "a")
        conn.commit()
    message = _refused(engine, "b", "bv depends on ", "Already migrated to UUIDv7")
    assert "left so: a" in message
    with engine.connect() as conn:
        again = migrate_pk_to_uuid7(conn, "a")  # a re-run of the revision: skipped
        conn.commit()
        assert again.table == "a"
    # Planned together: b's problem stops the batch before c changes.
    before_c = _snapshot(engine)
    with engine.connect() as conn, pytest.raises(MigrationRefusedError, match="bv depends on"):
        migrate_pks_to_uuid7(conn, ["c", "b"])
    assert _snapshot(engine) == before_c
    with engine.connect() as conn:
        plans = migrate_pks_to_uuid7(
            conn, ["c", ("b", PkMigrationOptions(recreate_views=True)), "a"]
        )
        conn.commit()
        assert [p.table for p in plans] == ["c", "b", "a"]
        for t in ("a", "b", "c"):
            restore_pk_from_uuid7(conn, t)
        conn.commit()


# -- 5. the old-key column dropped after the upgrade -------------------------------------


# quick cover: the [postgresql] and [sqlite] cases (the restore from the
# mapping is the engine's own); MariaDB's restore of a migrated table:
# tests/test_migration_refusals.py::test_fk_to_a_child_key_is_refused[mariadb]
# (the way out followed) and test_the_undo_writing_rows_is_no_application_update[mariadb]
@pytest.mark.slow_on("mariadb")
def test_downgrade_takes_old_keys_from_the_mapping_when_the_column_is_gone(
    private_engine: Engine,
) -> None:
    engine = private_engine
    with engine.begin() as conn:
        _on_update_tables(conn)
    before = _snapshot(engine)
    q = engine.dialect.identifier_preparer.quote
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "parent", acknowledged_routines=["stamp"])
        conn.commit()
        conn.exec_driver_sql(f"ALTER TABLE parent DROP COLUMN {q('id_old')}")
        conn.commit()
        restore_pk_from_uuid7(conn, "parent")
        conn.commit()
    assert _snapshot(engine) == before
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "parent", acknowledged_routines=["stamp"])
        conn.commit()
        conn.exec_driver_sql(f"ALTER TABLE parent DROP COLUMN {q('id_old')}")
        conn.exec_driver_sql(f"DROP TABLE {q('parent_uuid7_map')}")
        conn.commit()
        middle = _snapshot(engine)
        with pytest.raises(MigrationRefusedError, match="both gone"):
            restore_pk_from_uuid7(conn, "parent")
    assert _snapshot(engine) == middle


# -- 7, 8. comparisons without a foreign key, routines -----------------------------------


# quick cover: the [postgresql] and [sqlite] cases (the view's columns are read
# by the engine's own analysis); MariaDB's views through a migration:
# tests/test_migration_mariadb_offline.py::test_views_over_views_recreated_bases_first
@pytest.mark.slow_on("mariadb")
def test_view_joining_a_plain_column_names_extra_references(private_engine: Engine) -> None:
    engine = private_engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE staff (staff_id INTEGER PRIMARY KEY, name VARCHAR(9))")
        conn.exec_driver_sql(
            "CREATE TABLE store (store_id INTEGER PRIMARY KEY, manager_staff_id INTEGER)"
        )
        conn.exec_driver_sql(
            "CREATE VIEW managers AS SELECT store.store_id, staff.name FROM store"
            " JOIN staff ON store.manager_staff_id = staff.staff_id"
        )
        conn.exec_driver_sql("INSERT INTO staff VALUES (1, 'Mike'), (2, 'Jon')")
        conn.exec_driver_sql("INSERT INTO store VALUES (1, 1), (2, 2)")
    _refused(
        engine,
        "staff",
        "managers compares staff.staff_id with store.manager_staff_id",
        "extra_references=[('store', 'manager_staff_id')]",
        recreate_views=True,
    )
    _round_trip(
        engine, "staff", recreate_views=True, extra_references=[("store", "manager_staff_id")]
    )


def test_routines_using_the_key_must_be_acknowledged(private_engine: Engine) -> None:
    engine = private_engine
    name = engine.dialect.name
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE film (film_id INTEGER PRIMARY KEY, title VARCHAR(20))")
        conn.exec_driver_sql("INSERT INTO film VALUES (1, 'Alien'), (2, 'Brazil')")
        if name == "postgresql":
            conn.exec_driver_sql(
                "CREATE FUNCTION film_title(p int) RETURNS text LANGUAGE sql"
                " AS $$ SELECT title FROM film WHERE film.film_id = p $$"
            )
        elif name == "mysql":
            conn.exec_driver_sql(
                "CREATE FUNCTION film_title(p INT) RETURNS VARCHAR(20) READS SQL DATA"
                " RETURN (SELECT title FROM film WHERE film.film_id = p)"
            )
        else:
            conn.exec_driver_sql("CREATE TABLE log (film_id INTEGER)")
            conn.exec_driver_sql(
                "CREATE TRIGGER film_title AFTER INSERT ON film BEGIN"
                " INSERT INTO log VALUES (NEW.film_id); END"
            )
    _refused(engine, "film", "film_title uses film.film_id", "acknowledged_routines=['film_title']")
    with engine.connect() as conn:
        plan = plan_pk_migration(conn, "film", acknowledged_routines=["film_title"])
        assert any("film_title" in w for w in plan.warnings)
    _round_trip(engine, "film", acknowledged_routines=["film_title"])


# -- 9, 10. hostile names ---------------------------------------------------------------


HOSTILE_KEY = "id'), 1) WHERE false; DROP TABLE x; --"


def test_hostile_names_migrate_and_restore(private_engine: Engine) -> None:
    """Quotes, backticks, spaces, semicolons, unicode and reserved words in every
    name; the key column's name is an injection attempt against the downgrade."""
    engine = private_engine
    parent_name = "or'd\"er`s; é"
    child_name = "select `li\"ne'"
    metadata = sa.MetaData()
    kwargs = {"sqlite_autoincrement": True} if engine.dialect.name == "sqlite" else {}
    identity = [sa.Identity(always=True)] if engine.dialect.name == "postgresql" else []
    parent = sa.Table(
        parent_name,
        metadata,
        sa.Column(HOSTILE_KEY, sa.Integer, *identity, primary_key=True),
        sa.Column("order", sa.String(20), comment='it\'s "the" `order`'),
        **kwargs,
    )
    child = sa.Table(
        child_name,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("grp", sa.Integer),
        sa.Column('ref `x` "y"', sa.Integer, comment="%s and 100%"),
        sa.Column("from", sa.String(10)),
        sa.ForeignKeyConstraint(
            ['ref `x` "y"'], [parent.c[HOSTILE_KEY]], name="fk `a` 'b' \"c\"", ondelete="CASCADE"
        ),
        sa.Index("ix ;`é'\"", "grp", 'ref `x` "y"'),
        sa.UniqueConstraint('ref `x` "y"', "from", name="uq `z`"),
    )
    sa.Table("x", metadata, sa.Column("id", sa.Integer, primary_key=True))
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(parent.insert(), [{"order": f"o'{i}\"`"} for i in range(1, 26)])
        conn.execute(
            child.insert(),
            [
                {"id": i, "grp": i % 3, 'ref `x` "y"': i % 25 + 1, "from": f"f{i}"}
                for i in range(1, 61)
            ],
        )
        conn.execute(metadata.tables["x"].insert(), [{"id": 1}])
    _round_trip(engine, parent_name)
    with engine.connect() as conn:
        assert sa.inspect(conn).has_table("x")
        # The restored identity/sequence continues after the largest key.
        conn.execute(parent.insert(), [{"order": "new"}])
        top = conn.execute(sa.select(sa.func.max(parent.c[HOSTILE_KEY]))).scalar()
        assert top == 26
        conn.rollback()


@pytest.mark.parametrize(
    ("parent_name", "child_column"),
    [
        ("pa%s rent", "ref"),  # a placeholder to psycopg's / PyMySQL's format
        ("pa rent", "ref %(x)s"),
        ("pa rent", "ref :x"),  # a bound parameter to text()
    ],
    ids=["percent in the table", "percent in a child column", "colon parameter"],
)
def test_names_holding_placeholders_round_trip(
    private_engine: Engine, parent_name: str, child_column: str
) -> None:
    """``%`` (format-style drivers) and ``:name`` (``text()``) in a name: carried
    there and back (refused by name until they were; see
    test_migration_percent_colon_names.py for views, triggers and the online mode)."""
    engine = private_engine
    metadata = sa.MetaData()
    parent = sa.Table(parent_name, metadata, sa.Column("id", sa.Integer, primary_key=True))
    child = sa.Table(
        "chi`ld",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column(child_column, sa.Integer, sa.ForeignKey(parent.c.id)),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(parent.insert(), [{"id": i} for i in range(1, 6)])
        conn.execute(child.insert(), [{"id": i, child_column: i} for i in range(1, 6)])
    _round_trip(engine, parent_name)
