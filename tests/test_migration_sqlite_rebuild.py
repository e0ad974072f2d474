"""SQLite's rebuild keeps each table's own ``CREATE TABLE`` text (issue 28 defect
21, issue 32 items 2 and 16).

* the migrated key is ``NOT NULL`` (SQLite accepts ``NULL`` in a primary key
  that is not ``INTEGER``) and the restore gives back the original SQL exactly;
* a child's inline ``ON DELETE CASCADE``, ``ON UPDATE``, ``MATCH``,
  ``DEFERRABLE`` and named constraints survive the upgrade (and still act);
* columns added to (or dropped from) the tables after the migration are kept
  by the restore, values byte for byte, as ``ADD COLUMN`` would have placed them;
* a failed run, either way, leaves the database as it was -- no state table,
  no mapping table, no renamed ``_sqla_ids_old_`` table;
* through Alembic: a revision adding a column in batch mode after the key
  migration, downgraded to base.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from sqla_ids.errors import MigrationRefusedError, MigrationVerificationError
from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration.backends.sqlite import create_sql
from tests.alembic_project import project

PARENT = 'par"ent `ü`'
CHILD = "chi'ld [x]"
OTHER = "other child"
QP = '"' + PARENT.replace('"', '""') + '"'  # quoted as SQL names them
QC, QO = f'"{CHILD}"', f'"{OTHER}"'

SCHEMA = [
    f"""CREATE TABLE {QP} (
        "i d" INTEGER PRIMARY KEY AUTOINCREMENT, -- the key, commented
        name TEXT NOT NULL COLLATE NOCASE CHECK (length(name) < 40),
        payload BLOB
    )""",
    f"""CREATE TABLE "{CHILD}" (
        id INTEGER PRIMARY KEY,
        "par id" INTEGER CONSTRAINT "fk ""x"" `y`" REFERENCES {QP}("i d")
            ON DELETE CASCADE ON UPDATE SET NULL MATCH SIMPLE DEFERRABLE INITIALLY DEFERRED,
        extra TEXT,
        note TEXT DEFAULT 'a, (b)' /* a comment, with a comma */
    )""",
    f"""CREATE TABLE "{OTHER}" (
        id INTEGER PRIMARY KEY,
        ref INTEGER NOT NULL,
        CONSTRAINT "named fk" FOREIGN KEY (ref) REFERENCES {QP} ("i d")
            ON DELETE SET NULL NOT DEFERRABLE,
        CONSTRAINT ck_ref CHECK (ref IS NOT NULL)
    ) STRICT""",
    f'CREATE INDEX "ix child ""par""" ON "{CHILD}" ("par id")',
    f"""CREATE TRIGGER "touch ü" AFTER UPDATE OF note ON "{CHILD}" BEGIN
        SELECT 1;
    END""",
]


def _load(path: Path) -> None:
    with sqlite3.connect(path) as db:
        for statement in SCHEMA:
            db.execute(statement)
        db.executemany(
            f"INSERT INTO {QP} VALUES (?, ?, ?)",
            [(i, f"name {i}", bytes([i, 0, 255, 39, 34])) for i in range(1, 31)],
        )
        db.executemany(
            f'INSERT INTO "{CHILD}" VALUES (?, ?, ?, ?)',
            [(i, i % 30 + 1 if i % 7 else None, str(i), f"note '{i}'") for i in range(1, 61)],
        )
        db.executemany(f'INSERT INTO "{OTHER}" VALUES (?, ?)', [(i, i) for i in range(1, 31)])
    # A deleted top row: AUTOINCREMENT's counter (sqlite_sequence) is above max(key).
    with sqlite3.connect(path) as db:
        db.execute(f"INSERT INTO {QP} VALUES (31, 'x', NULL)")
        db.execute(f'DELETE FROM {QP} WHERE "i d" = 31')


def _schema(connection: sa.Connection) -> list[tuple[Any, ...]]:
    return [
        tuple(row)
        for row in connection.exec_driver_sql(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"
        )
    ]


def _rows(connection: sa.Connection) -> dict[str, list[tuple[Any, ...]]]:
    q = connection.dialect.identifier_preparer.quote
    tables = connection.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
    ).scalars()
    return {
        t: [tuple(r) for r in connection.exec_driver_sql(f"SELECT rowid, * FROM {q(t)}")]
        for t in tables
    }


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[sa.Engine, Path]]:
    path = tmp_path / "rebuild.sqlite3"
    _load(path)
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        yield engine, path
    finally:
        engine.dispose()


def test_round_trip_keeps_every_clause_and_the_key_is_not_null(
    database: tuple[sa.Engine, Path],
) -> None:
    engine, _ = database
    with engine.connect() as conn:
        schema, rows = _schema(conn), _rows(conn)
    with engine.begin() as conn:
        migrate_pk_to_uuid7(conn, PARENT, seed="rebuild")
    with engine.connect() as conn:
        migrated = dict(
            conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all()
        )
        fks = conn.exec_driver_sql(f'PRAGMA foreign_key_list("{CHILD}")').all()
    child = migrated[CHILD]
    # Only the reference's type changed; every clause and the comments are there.
    assert child == next(s for s in SCHEMA if f'"{CHILD}" (' in s).replace(
        '"par id" INTEGER', '"par id" CHAR(32)'
    )
    assert [(fk[5], fk[6], fk[7]) for fk in fks] == [
        ("SET NULL", "CASCADE", "NONE")
    ]  # MATCH: parsed, kept in the text, ignored
    assert (
        "AUTOINCREMENT" not in migrated[PARENT]
        and '"i d" CHAR(32) PRIMARY KEY' in (migrated[PARENT])
    )
    # STRICT refuses CHAR(32): the UUIDs' hex text goes in a TEXT column there.
    assert "ref TEXT NOT NULL" in migrated[OTHER] and migrated[OTHER].endswith("STRICT")
    assert 'CONSTRAINT "named fk" FOREIGN KEY (ref)' in migrated[OTHER]

    with engine.connect() as conn:
        # Defect 21: another client cannot insert a row without a key.
        with pytest.raises(sa.exc.IntegrityError, match="NOT NULL"):
            conn.exec_driver_sql(f"INSERT INTO {QP} (name) VALUES ('no key')")
        conn.rollback()
        # The cascade still acts on the rebuilt child.
        conn.exec_driver_sql("PRAGMA foreign_keys=ON")
        key = conn.exec_driver_sql(f'SELECT "i d" FROM {QP} WHERE "i d_old" = 2').scalar_one()
        conn.exec_driver_sql(f'DELETE FROM "{OTHER}" WHERE ref = ?', (key,))
        before = conn.exec_driver_sql(f'SELECT count(*) FROM "{CHILD}"').scalar_one()
        conn.exec_driver_sql(f'DELETE FROM {QP} WHERE "i d" = ?', (key,))
        after = conn.exec_driver_sql(f'SELECT count(*) FROM "{CHILD}"').scalar_one()
        assert before - after == 2  # children 1 and 31 pointed at parent 2
        conn.rollback()
        conn.exec_driver_sql("PRAGMA foreign_keys=OFF")

    with engine.begin() as conn:
        restore_pk_from_uuid7(conn, PARENT)
    with engine.connect() as conn:
        assert _schema(conn) == schema
        assert _rows(conn) == rows


def test_restore_keeps_columns_added_and_dropped_since(
    database: tuple[sa.Engine, Path], tmp_path: Path
) -> None:
    """Issue 32 item 2: the same changes made to a copy of the original database
    give, after the restore, exactly the same schema and rows."""
    engine, path = database
    expected = tmp_path / "expected.sqlite3"
    shutil.copy(path, expected)
    with engine.begin() as conn:
        migrate_pk_to_uuid7(conn, PARENT, seed="added")
    changes = [
        f'ALTER TABLE "{CHILD}" ADD COLUMN "ad""ded é" BLOB DEFAULT x\'00\'',
        f'ALTER TABLE "{CHILD}" ADD COLUMN later TEXT CONSTRAINT "later ck" CHECK (later <> \'\')',
        f'ALTER TABLE "{CHILD}" DROP COLUMN extra',
        f'ALTER TABLE {QP} ADD COLUMN "when" TEXT',
        f'CREATE INDEX "ix later" ON "{CHILD}" (later)',
        f'UPDATE "{CHILD}" SET "ad""ded é" = CAST(char(id, 0, 255) AS BLOB), later = \'l\' || id',
        f"UPDATE {QP} SET \"when\" = 'ü ' || name",
    ]
    for target in (engine.url.database, str(expected)):
        with sqlite3.connect(str(target)) as db:
            for statement in changes:
                db.execute(statement)
    with engine.begin() as conn:
        restore_pk_from_uuid7(conn, PARENT)
    reference = sa.create_engine(f"sqlite:///{expected}")
    try:
        with engine.connect() as conn, reference.connect() as want:
            assert _schema(conn) == _schema(want)
            assert _rows(conn) == _rows(want)
    finally:
        reference.dispose()


def _state(connection: sa.Connection) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    return _schema(connection), _rows(connection)


def test_failed_upgrade_and_failed_restore_leave_the_database_as_it_was(
    database: tuple[sa.Engine, Path],
) -> None:
    """A CHECK that the converted values break stops the run half-way (after the
    parent's rebuild): nothing is left -- no state table, no mapping table, no
    renamed table -- whether the caller's transaction is ``begin()``'s or its own."""
    engine, path = database
    with sqlite3.connect(path) as db:
        db.execute(
            f'ALTER TABLE "{CHILD}" ADD COLUMN k INTEGER CHECK (typeof("par id") <> \'text\')'
        )
    with engine.connect() as conn:
        original = _state(conn)
    with pytest.raises(sa.exc.IntegrityError, match="CHECK"), engine.begin() as conn:
        migrate_pk_to_uuid7(conn, PARENT)
    with engine.connect() as conn:
        assert _state(conn) == original
        with pytest.raises(sa.exc.IntegrityError, match="CHECK"):
            migrate_pk_to_uuid7(conn, PARENT)
        conn.rollback()
        assert _state(conn) == original

    # The restore: a column added since whose CHECK the old keys break.
    with sqlite3.connect(path) as db:
        db.execute(f'ALTER TABLE "{CHILD}" DROP COLUMN k')
    with engine.begin() as conn:
        migrate_pk_to_uuid7(conn, PARENT)
    with sqlite3.connect(path) as db:
        db.execute(
            f'ALTER TABLE "{CHILD}" ADD COLUMN k INTEGER CHECK (typeof("par id") <> \'integer\')'
        )
    with engine.connect() as conn:
        migrated = _state(conn)
    with pytest.raises(sa.exc.IntegrityError, match="CHECK"), engine.begin() as conn:
        restore_pk_from_uuid7(conn, PARENT)
    with engine.connect() as conn:
        assert _state(conn) == migrated


def test_a_null_key_is_refused_by_row(tmp_path: Path) -> None:
    """SQLite accepts NULL in a TEXT primary key: such rows are named, not mapped."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'null.sqlite3'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE codes (code TEXT PRIMARY KEY, n TEXT)")
        conn.exec_driver_sql("INSERT INTO codes VALUES ('a', 'x'), (NULL, 'y'), (NULL, 'z')")
    with engine.connect() as conn:
        original = _state(conn)
    refused = r"2 rows of codes have no key .*rowid 2, 3"
    with pytest.raises(MigrationRefusedError, match=refused), engine.begin() as conn:
        migrate_pk_to_uuid7(conn, "codes")
    with engine.connect() as conn:
        assert _state(conn) == original
    engine.dispose()


def test_failure_messages_name_rows_and_the_way_out(
    database: tuple[sa.Engine, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 16: each final check says which rows, how many, and what to do."""
    from sqla_ids.migration.backends.sqlite import offline as sqlite_offline

    engine, _ = database
    with engine.connect() as conn:
        original = _state(conn)
    rebuild = sqlite_offline.rebuild

    def losing_a_row(connection: sa.Connection, plan: Any, direction: str) -> None:
        rebuild(connection, plan, direction)
        connection.exec_driver_sql(f'DELETE FROM "{OTHER}" WHERE id = 5')

    def nulling_a_reference(connection: sa.Connection, plan: Any, direction: str) -> None:
        rebuild(connection, plan, direction)
        connection.exec_driver_sql(f'UPDATE "{CHILD}" SET "par id" = NULL WHERE id IN (3, 4)')

    def dangling_reference(connection: sa.Connection, plan: Any, direction: str) -> None:
        rebuild(connection, plan, direction)
        connection.exec_driver_sql(f'UPDATE "{CHILD}" SET "par id" = \'nothing\' WHERE id = 9')

    cases = [
        (losing_a_row, re.escape(f"{OTHER}: 30 rows before, 29 after")),
        (nulling_a_reference, r"rows where it is NULL now: 10, first id=3; id=4"),
        (
            dangling_reference,
            re.escape(f"1 references have no {PARENT} row (first: id=9 par id='nothing')"),
        ),
    ]
    for broken, named in cases:
        monkeypatch.setattr(sqlite_offline, "rebuild", broken)
        with pytest.raises(MigrationVerificationError) as caught, engine.begin() as conn:
            migrate_pk_to_uuid7(conn, PARENT)
        message = str(caught.value)
        assert re.search(named, message), message
        assert "nothing has changed" in message, message
        if broken is not dangling_reference:
            assert "run migrate_pk_to_uuid7 again" in message, message
        with engine.connect() as conn:
            assert _state(conn) == original

    # A mapping that misses a row: the row is named.
    monkeypatch.setattr(sqlite_offline, "rebuild", rebuild)
    strategy = sqlite_offline.Rebuild
    fill = strategy.fill_mapping

    def short_mapping(self: Any, connection: sa.Connection, plan: Any) -> None:
        fill(self, connection, plan)
        mapping = connection.dialect.identifier_preparer.quote(plan.mapping_table)
        connection.exec_driver_sql(f"DELETE FROM {mapping} WHERE old_key = 17")

    monkeypatch.setattr(strategy, "fill_mapping", short_mapping)
    with pytest.raises(MigrationVerificationError) as caught, engine.begin() as conn:
        migrate_pk_to_uuid7(conn, PARENT)
    message = str(caught.value)
    assert "has 29 rows for 30 rows" in message and "rows without a mapping row: i d=17" in (
        message
    ), message
    assert "nothing has changed" in message and "run migrate_pk_to_uuid7 again" in message
    with engine.connect() as conn:
        assert _state(conn) == original


def test_alembic_batch_column_added_after_the_migration(
    database: tuple[sa.Engine, Path], tmp_path: Path
) -> None:
    """Flask-Migrate's shape: a later revision adds a column (and a named CHECK) in
    batch mode -- Alembic rebuilds the table from reflection -- and its downgrade
    keeps it; ``downgrade base`` restores the key and keeps the column's values."""
    engine, _ = database
    with engine.connect() as conn:
        original_sql = dict(
            conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all()
        )
    with engine.connect() as conn:
        config = project(tmp_path, conn, sa.MetaData(), render_as_batch=True)
        versions = tmp_path / "migrations" / "versions"
        (versions / "0001_keys.py").write_text(
            textwrap.dedent(
                f"""
                from alembic import op
                import sqla_ids.alembic

                revision = "0001"
                down_revision = None


                def upgrade():
                    op.migrate_pk_to_uuid7({PARENT!r}, seed="batch")


                def downgrade():
                    op.restore_pk_from_uuid7({PARENT!r})
                """
            )
        )
        (versions / "0002_note.py").write_text(
            textwrap.dedent(
                f"""
                import sqlalchemy as sa
                from alembic import op

                revision = "0002"
                down_revision = "0001"


                def upgrade():
                    with op.batch_alter_table({CHILD!r}) as batch_op:
                        batch_op.add_column(sa.Column("stamp", sa.String(20)))
                        batch_op.create_check_constraint("ck stamp", "length(stamp) < 20")
                    op.execute(sa.text({f"UPDATE {QC} SET stamp = 's' || id"!r}))


                def downgrade():
                    pass  # the application keeps the column
                """
            )
        )
        command.upgrade(config, "head")
        conn.commit()
        command.downgrade(config, "base")
        conn.commit()
        after = dict(
            conn.exec_driver_sql("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all()
        )
        stamps = conn.exec_driver_sql(f'SELECT id, stamp, "par id" FROM "{CHILD}"').all()
    assert after[PARENT] == original_sql[PARENT]
    assert after[OTHER] == original_sql[OTHER]
    child = original_sql[CHILD]
    # The original text, the column where ADD COLUMN puts it, the CHECK at the end.
    body_end = child.rindex("/* a comment")
    assert after[CHILD].startswith(child[: child.index("'a, (b)'") + len("'a, (b)'")])
    assert ", stamp VARCHAR(20)" in after[CHILD]
    assert after[CHILD].endswith(', CONSTRAINT "ck stamp" CHECK (length(stamp) < 20))')
    assert child[body_end:-1].strip() in after[CHILD]
    assert stamps == [(i, f"s{i}", i % 30 + 1 if i % 7 else None) for i in range(1, 61)]
    assert "sqla_ids_pk_migrations" not in after and f"{PARENT}_uuid7_map" not in after


def test_create_sql_edits() -> None:
    """The text edits alone: types, NOT NULL, AUTOINCREMENT, added columns."""
    sql = (
        'CREATE TABLE "t(" ([k] int(11) PRIMARY KEY AUTOINCREMENT, "a,b" text, `c` '
        "REFERENCES x(y) ON DELETE CASCADE, CHECK (\"a,b\" <> ')'))"
    )
    up = create_sql.upgraded(
        sql, {"k": True, "c": False}, "CHAR(32)", ['"k_old" int(11)'], drop_autoincrement=True
    )
    assert up == (
        'CREATE TABLE "t(" ([k] CHAR(32) PRIMARY KEY NOT NULL, "a,b" text, `c` CHAR(32) '
        'REFERENCES x(y) ON DELETE CASCADE, "k_old" int(11), CHECK ("a,b" <> \')\'))'
    )
    now = up.replace('"k_old" int(11)', '"k_old" int(11), d BLOB')
    assert create_sql.restored(sql, now, lambda c: c == "k_old") == sql.replace(
        "ON DELETE CASCADE,", "ON DELETE CASCADE, d BLOB,"
    )


PLAIN_ENV = """\
import sqlalchemy as sa
from alembic import context

engine = sa.create_engine(context.config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
"""

UPGRADE = """\
import sys
from alembic import command
from alembic.config import Config

config = Config()
config.set_main_option("script_location", sys.argv[1])
config.set_main_option("sqlalchemy.url", sys.argv[2])
command.upgrade(config, "head")
"""


@pytest.mark.slow  # two fresh interpreters importing sqla_ids and Alembic (~10 s)
def test_autogenerated_key_revision_runs_without_the_import_in_env_py(tmp_path: Path) -> None:
    """Issue 32 item 16: the autogenerated revision imports ``sqla_ids.alembic``
    itself, so an ``env.py`` that does not (Flask-Migrate's, Alembic's own) runs
    ``op.migrate_pk_to_uuid7`` instead of failing with a bare ``AttributeError``.
    Run in a fresh interpreter: this one has the operations registered already."""
    import subprocess
    import sys

    from sqla_ids.alembic.render import OPERATIONS_IMPORT, render_item
    from sqla_ids.alembic.rewriter import rewrite_pk_migrations
    from sqla_ids.types.uuid7 import UUIDv7
    from tests.alembic_project import revision_text

    url = f"sqlite:///{tmp_path / 'env.sqlite3'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE orders (id INTEGER PRIMARY KEY, n TEXT)")
        conn.exec_driver_sql("INSERT INTO orders VALUES (1, 'a'), (2, 'b')")
    model = sa.MetaData()
    sa.Table("orders", model, sa.Column("id", UUIDv7(), primary_key=True), sa.Column("n", sa.Text))
    with engine.connect() as conn:
        config = project(
            tmp_path,
            conn,
            model,
            compare_type=True,
            render_item=render_item,
            process_revision_directives=rewrite_pk_migrations,
        )
        text = revision_text(config, "0001")
    engine.dispose()
    assert OPERATIONS_IMPORT in text and "op.migrate_pk_to_uuid7('orders')" in text
    location = tmp_path / "migrations"
    (location / "env.py").write_text(PLAIN_ENV)
    (revision,) = (location / "versions").glob("*.py")

    def upgrade() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", UPGRADE, str(location), url],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
            check=False,
        )

    # Without the rendered import: Alembic's bare AttributeError (what users saw).
    revision.write_text(text.replace(OPERATIONS_IMPORT, ""))
    failed = upgrade()
    assert failed.returncode != 0 and "AttributeError" in failed.stderr, failed.stderr
    assert "migrate_pk_to_uuid7" in failed.stderr
    revision.write_text(text)
    done = upgrade()
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "env.sqlite3") as db:
        assert db.execute("SELECT id_old, n FROM orders ORDER BY id_old").fetchall() == [
            (1, "a"),
            (2, "b"),
        ]


def test_foreign_key_enforcement_comes_back_with_the_connection(tmp_path: Path) -> None:
    """The migration turns ``PRAGMA foreign_keys`` off on the connection it runs on;
    the pool must not hand that connection to the application without enforcement."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'fk.db'}")
    sa.event.listen(engine, "connect", lambda dbapi, _: dbapi.execute("PRAGMA foreign_keys=ON"))
    with engine.begin() as conn:
        conn.exec_driver_sql('CREATE TABLE "pa rent" (id INTEGER PRIMARY KEY)')
        conn.exec_driver_sql(
            'CREATE TABLE "chi`ld" (id INTEGER PRIMARY KEY,'
            ' p INTEGER NOT NULL REFERENCES "pa rent"(id) ON DELETE CASCADE)'
        )
        conn.exec_driver_sql('INSERT INTO "pa rent" VALUES (1), (2)')
        conn.exec_driver_sql('INSERT INTO "chi`ld" VALUES (1, 1), (2, 2)')
    for run in (migrate_pk_to_uuid7, restore_pk_from_uuid7):
        with engine.begin() as conn:
            run(conn, "pa rent")
        with engine.connect() as conn:  # the same database connection, from the pool
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            with pytest.raises(sa.exc.IntegrityError):
                conn.exec_driver_sql('INSERT INTO "chi`ld" VALUES (9, 12345)')
            conn.rollback()
    with engine.begin() as conn:  # and the cascade fires again
        conn.exec_driver_sql('DELETE FROM "pa rent" WHERE id = 1')
        assert conn.exec_driver_sql('SELECT count(*) FROM "chi`ld"').scalar() == 1
