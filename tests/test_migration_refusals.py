"""What the key migration refuses -- with a message naming the object, before any change."""

from __future__ import annotations

import secrets
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import migrate_pk_to_uuid7, restore_pk_from_uuid7


def _tables(metadata: sa.MetaData, engine: Engine, p: str) -> None:
    parent = sa.Table(
        f"{p}parent",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(20)),
    )
    sa.Table(
        f"{p}child",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey(parent.c.id, name=f"{p}fk_child")),
    )
    sa.Table(
        f"{p}note",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("parent_ref", sa.Integer),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(parent.insert(), [{"id": i, "name": f"p{i}"} for i in (1, 2, 3)])
        conn.exec_driver_sql(f"INSERT INTO {p}child (id, parent_id) VALUES (1, 1), (2, 3)")
        conn.exec_driver_sql(f"INSERT INTO {p}note (id, parent_ref) VALUES (1, 2), (2, 99)")


def _unchanged(engine: Engine, p: str) -> None:
    inspector = sa.inspect(engine)
    column = {c["name"]: c for c in inspector.get_columns(f"{p}parent")}["id"]
    assert isinstance(column["type"], sa.Integer)
    assert f"{p}parent_uuid7_map" not in inspector.get_table_names()
    assert {c["name"] for c in inspector.get_columns(f"{p}child")} == {"id", "parent_id"}


def _view(conn: Connection, p: str) -> None:
    conn.exec_driver_sql(f"CREATE VIEW {p}v AS SELECT id, name FROM {p}parent")


def _trigger(conn: Connection, p: str) -> None:
    """A trigger the migration cannot carry over as it is: PostgreSQL pins the column
    with ``UPDATE OF``; on MariaDB and SQLite its body uses the converted column (to
    be acknowledged: an UPDATE trigger alone is set aside by MariaDB's offline mode,
    see test_migration_mariadb_offline.py)."""
    name = conn.dialect.name
    if name == "postgresql":
        conn.exec_driver_sql(
            f"CREATE FUNCTION {p}f() RETURNS trigger LANGUAGE plpgsql"
            " AS $$ BEGIN RETURN NEW; END $$"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER {p}trg BEFORE UPDATE OF parent_id ON {p}child"
            f" FOR EACH ROW EXECUTE FUNCTION {p}f()"
        )
    elif name == "mysql":
        conn.exec_driver_sql(
            f"CREATE TRIGGER {p}trg BEFORE UPDATE ON {p}child FOR EACH ROW"
            " SET NEW.parent_id = NEW.parent_id"
        )
    else:
        conn.exec_driver_sql(
            f"CREATE TRIGGER {p}trg AFTER UPDATE ON {p}child BEGIN SELECT NEW.parent_id; END"
        )


CASES: dict[str, tuple[Callable[[Connection, str], None] | None, dict[str, object], str]] = {
    "view on the key": (_view, {}, "{p}v depends on "),
    "trigger on a child": (_trigger, {}, "{p}trg"),
    "dangling plain reference": (
        None,
        {"extra_references": [("{p}note", "parent_ref")]},
        "{p}note.parent_ref holds 1 value(s) with no matching {p}parent.id",
    ),
    "missing extra column": (
        None,
        {"extra_references": [("{p}note", "nope")]},
        "extra reference column {p}note.nope does not exist",
    ),
    "missing timestamp column": (
        None,
        {"timestamp_column": "created_at"},
        "timestamp column {p}parent.created_at does not exist",
    ),
    "old column name taken": (None, {"old_column": "name"}, "column {p}parent.name already exists"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_before_any_change(engine: Engine, metadata: sa.MetaData, case: str) -> None:
    p = f"r{secrets.token_hex(2)}_"
    _tables(metadata, engine, p)
    setup, raw_options, message = CASES[case]
    options = {
        k: [(t.format(p=p), c) for t, c in v] if k == "extra_references" else v  # type: ignore[attr-defined]
        for k, v in raw_options.items()
    }
    with engine.begin() as conn:
        if setup is not None:
            setup(conn, p)
    try:
        with engine.connect() as conn, pytest.raises(MigrationRefusedError) as error:
            migrate_pk_to_uuid7(conn, f"{p}parent", **options)
        assert message.format(p=p) in str(error.value)
        assert "nothing was changed" in str(error.value)
        _unchanged(engine, p)
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP VIEW IF EXISTS {p}v")
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {p}trg ON {p}child")
            else:
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {p}trg")


def test_composite_and_uuid_keys_refused(engine: Engine, metadata: sa.MetaData) -> None:
    p = f"r{secrets.token_hex(2)}_"
    sa.Table(
        f"{p}pair",
        metadata,
        sa.Column("a", sa.Integer, primary_key=True),
        sa.Column("b", sa.Integer, primary_key=True),
    )
    sa.Table(f"{p}u", metadata, sa.Column("id", sa.Uuid, primary_key=True))
    metadata.create_all(engine)
    with engine.connect() as conn:
        with pytest.raises(MigrationRefusedError, match="primary key of 2 columns"):
            migrate_pk_to_uuid7(conn, f"{p}pair")
        stored = sa.inspect(conn).get_columns(f"{p}u")[0]["type"]
        if isinstance(stored, sa.Uuid):  # CHAR(32) on SQLite (and MariaDB on SA 2.0): text
            with pytest.raises(MigrationRefusedError, match="already a UUID"):
                migrate_pk_to_uuid7(conn, f"{p}u")
        with pytest.raises(MigrationRefusedError, match=f"table '{p}missing' does not exist"):
            migrate_pk_to_uuid7(conn, f"{p}missing")
        with pytest.raises(ValueError, match="batch_size"):
            migrate_pk_to_uuid7(conn, f"{p}u", batch_size=0)


def test_fk_to_a_child_key_is_refused(engine: Engine, metadata: sa.MetaData) -> None:
    """A grandchild pointing at a child's key that contains the reference would break."""
    p = f"r{secrets.token_hex(2)}_"
    parent = sa.Table(f"{p}parent", metadata, sa.Column("id", sa.Integer, primary_key=True))
    child = sa.Table(
        f"{p}child",
        metadata,
        sa.Column("parent_id", sa.Integer, sa.ForeignKey(parent.c.id), primary_key=True),
    )
    sa.Table(
        f"{p}grandchild",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("child_id", sa.Integer, sa.ForeignKey(child.c.parent_id, name=f"{p}fk_gc")),
    )
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(parent.insert(), [{"id": 1}, {"id": 2}])
        conn.execute(child.insert(), [{"parent_id": 2}])
        conn.exec_driver_sql(f"INSERT INTO {p}grandchild (id, child_id) VALUES (1, 2)")
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as error:
        migrate_pk_to_uuid7(conn, f"{p}parent")
    message = str(error.value)
    assert f"references {p}child.parent_id" in message
    extra = f"extra_references=[('{p}grandchild', 'child_id')]"
    assert extra in message
    if engine.dialect.name == "sqlite":
        return  # (no ALTER TABLE ... DROP CONSTRAINT there)
    # The way out the message gives, followed: the migration goes through.
    drop = message.split("drop it first (", 1)[1].split("), pass", 1)[0]
    with engine.begin() as conn:
        conn.exec_driver_sql(drop)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, f"{p}parent", extra_references=[(f"{p}grandchild", "child_id")])
        conn.commit()
        joined = conn.exec_driver_sql(
            f"SELECT count(*) FROM {p}grandchild g JOIN {p}child c ON c.parent_id = g.child_id"
            f" JOIN {p}parent p ON p.id = c.parent_id"
        ).scalar_one()
        assert joined == 1
        restore_pk_from_uuid7(conn, f"{p}parent")  # (nothing of it left in the shared schema)
        conn.commit()
        assert f"{p}parent_uuid7_map" not in sa.inspect(conn).get_table_names()


def test_sqlite_refuses_enforced_foreign_keys_in_a_transaction(sqlite_engine: Engine) -> None:
    p = f"r{secrets.token_hex(2)}_"
    metadata = sa.MetaData()
    _tables(metadata, sqlite_engine, p)
    try:
        with sqlite_engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA foreign_keys=ON")
            conn.exec_driver_sql(f"UPDATE {p}parent SET name = name")  # opens a transaction
            with pytest.raises(MigrationRefusedError, match="ON DELETE CASCADE"):
                migrate_pk_to_uuid7(conn, f"{p}parent")
            conn.rollback()
        _unchanged(sqlite_engine, p)
    finally:
        metadata.drop_all(sqlite_engine)


def test_sqlite_dangling_declared_reference_is_refused(sqlite_engine: Engine) -> None:
    """SQLite does not enforce FKs by default, so a declared FK can hold a value with
    no parent row; it would have no new key, so the migration refuses."""
    p = f"r{secrets.token_hex(2)}_"
    metadata = sa.MetaData()
    _tables(metadata, sqlite_engine, p)
    try:
        with sqlite_engine.begin() as conn:
            conn.exec_driver_sql(f"INSERT INTO {p}child (id, parent_id) VALUES (3, 42)")
        with sqlite_engine.connect() as conn, pytest.raises(MigrationRefusedError) as error:
            migrate_pk_to_uuid7(conn, f"{p}parent")
        assert f"{p}child.parent_id holds 1 value(s) with no matching {p}parent.id" in str(
            error.value
        )
        _unchanged(sqlite_engine, p)
    finally:
        metadata.drop_all(sqlite_engine)
