"""The privileges the key migration needs, checked before anything changes.

MariaDB's DDL commits statement by statement and the online mode commits
phase by phase on both servers: a privilege missing halfway (``TRIGGER`` for
the sync triggers, ``CREATE`` for a version database or schema) would leave a
half-made migration behind. So the planner asks the catalog first and
refuses by name, and a user with what the migration needs (not more) runs
it. Each test runs as a user of its own, made and dropped here.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import (
    PkMigrationOptions,
    add_uuid7_key,
    drop_uuid7_key,
    migrate_pk_to_uuid7,
    restore_pk_from_uuid7,
)

PARENT = "pa`rent s"
CHILD = 'chi"ld'


def _columns(engine: Engine, table: str) -> list[str]:
    return [c["name"] for c in sa.inspect(engine).get_columns(table)]


def _tables(engine: Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names())


def _shop(engine: Engine) -> None:
    q = engine.dialect.identifier_preparer.quote
    key = "bigserial" if engine.dialect.name == "postgresql" else "BIGINT AUTO_INCREMENT"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {q(PARENT)} (id {key} PRIMARY KEY, name TEXT)")
        conn.exec_driver_sql(
            f"CREATE TABLE {q(CHILD)} (id {key} PRIMARY KEY, parent_id BIGINT,"
            f" FOREIGN KEY (parent_id) REFERENCES {q(PARENT)} (id))"
        )
        conn.exec_driver_sql(f"INSERT INTO {q(PARENT)} (name) VALUES ('a'), ('b')")
        conn.exec_driver_sql(f"INSERT INTO {q(CHILD)} (parent_id) VALUES (1), (2), (2)")


def _unchanged(engine: Engine, tables: set[str]) -> None:
    """Nothing of the migration's: no new table, no new column."""
    assert _tables(engine) == tables
    assert _columns(engine, PARENT) == ["id", "name"]
    assert _columns(engine, CHILD) == ["id", "parent_id"]


def _refused(engine: Engine, options: PkMigrationOptions, *phrases: str) -> None:
    tables = _tables(engine)
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as refused:
        migrate_pk_to_uuid7(conn, PARENT, options, phase="prepare" if options.online else "all")
    for phrase in phrases:
        assert phrase in str(refused.value), str(refused.value)
    _unchanged(engine, tables)


# --- PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture
def pg_role(postgresql_private_engine: Engine) -> Iterator[tuple[Engine, Engine, str]]:
    """The shop (owned by the fixture's superuser), a role of this test's own that
    may use the schema and read and update the tables, and an engine as that role."""
    admin = postgresql_private_engine
    _shop(admin)
    role = f"sqla_ids_r_{secrets.token_hex(4)}"
    schema = str(admin.url.query["options"]).split("=", 1)[1].split(",")[0]
    q = admin.dialect.identifier_preparer.quote
    with admin.begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {q(role)} LOGIN")
        conn.exec_driver_sql(f"GRANT USAGE ON SCHEMA {q(schema)} TO {q(role)}")
        conn.exec_driver_sql(f"GRANT SELECT, UPDATE ON {q(PARENT)}, {q(CHILD)} TO {q(role)}")
    engine = sa.create_engine(admin.url.set(username=role))
    try:
        yield admin, engine, role
    finally:
        engine.dispose()
        with admin.begin() as conn:
            for version in ("before", "after"):
                conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {q(role + '_' + version)} CASCADE")
            conn.exec_driver_sql(
                f"REVOKE ALL ON DATABASE {q(str(admin.url.database))} FROM {q(role)}"
            )
            conn.exec_driver_sql(f"REASSIGN OWNED BY {q(role)} TO CURRENT_USER")
            conn.exec_driver_sql(f"DROP OWNED BY {q(role)}")
            conn.exec_driver_sql(f"DROP ROLE {q(role)}")


def test_postgresql_refuses_a_role_that_does_not_own_the_tables(
    pg_role: tuple[Engine, Engine, str],
) -> None:
    _, engine, role = pg_role
    for online in (True, False):
        _refused(
            engine,
            PkMigrationOptions(online=online),
            f"the role {role} does not own",
            "pa`rent s",
            'chi""ld',
            "which ALTER TABLE, CREATE TRIGGER and CREATE INDEX need",
            "lacks CREATE on the schema",
        )


def test_postgresql_an_owner_needs_create_on_the_database_for_versions(
    pg_role: tuple[Engine, Engine, str],
) -> None:
    """The owner of the tables with CREATE on their schema migrates them (online,
    and undoes it); serving versions, it also needs CREATE on the database
    (the version schemas), refused by name until it has it."""
    admin, engine, role = pg_role
    q = admin.dialect.identifier_preparer.quote
    schema = str(admin.url.query["options"]).split("=", 1)[1].split(",")[0]
    with admin.begin() as conn:
        for table in (PARENT, CHILD):
            conn.exec_driver_sql(f"ALTER TABLE {q(table)} OWNER TO {q(role)}")
        conn.exec_driver_sql(f"GRANT CREATE ON SCHEMA {q(schema)} TO {q(role)}")
    versions = PkMigrationOptions(online=True, versions=role)
    _refused(
        engine,
        versions,
        f"versions: the role {role} lacks CREATE on the database",
        f"({role}_before, {role}_after)",
    )
    with admin.begin() as conn:
        conn.exec_driver_sql(f"GRANT CREATE ON DATABASE {q(str(admin.url.database))} TO {q(role)}")
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, versions, phase="prepare")
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
    assert _columns(admin, PARENT) == ["id", "name"]


# --- MariaDB ------------------------------------------------------------------------------


@pytest.fixture
def mariadb_user(mariadb_private_engine: Engine) -> Iterator[tuple[Engine, Engine, str]]:
    """The shop, a user of this test's own with every privilege on its database
    but ``TRIGGER``, and an engine as that user."""
    admin = mariadb_private_engine
    _shop(admin)
    database = str(admin.url.database)
    user = f"sqla_ids_u_{secrets.token_hex(4)}"
    with admin.begin() as conn:
        conn.execute(sa.text("CREATE USER :u@'%'"), {"u": user})
        conn.exec_driver_sql(
            "GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, ALTER, INDEX, CREATE ROUTINE,"
            f" ALTER ROUTINE, EXECUTE ON `{database}`.* TO '{user}'@'%%'"
        )
    engine = sa.create_engine(admin.url.set(username=user, password=None))
    try:
        yield admin, engine, user
    finally:
        engine.dispose()
        with admin.begin() as conn:
            for version in ("before", "after"):
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `sqla_ids_{version}_{database}`")
            conn.execute(sa.text("DROP USER IF EXISTS :u@'%'"), {"u": user})


def test_mariadb_trigger_and_temporary_tables_where_the_migration_needs_them(
    mariadb_user: tuple[Engine, Engine, str],
) -> None:
    """Without ``TRIGGER`` the online mode is refused by name for every table (its
    sync triggers come after the new columns, which would be left behind), and
    without ``CREATE TEMPORARY TABLES`` (its batches'); the offline mode needs
    ``TRIGGER`` on the key's table only, for the trigger giving new rows their
    UUID -- without a server default it needs none, and runs and is undone."""
    admin, engine, _ = mariadb_user
    database = str(admin.url.database)
    _refused(
        engine,
        PkMigrationOptions(online=True),
        f"the user lacks TRIGGER on {database}.`pa``rent s`",
        f'the user lacks TRIGGER on {database}.`chi"ld`',
        f"the user lacks CREATE TEMPORARY TABLES on the database {database}",
    )
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as refused:
        migrate_pk_to_uuid7(conn, PARENT)
    assert f"the user lacks TRIGGER on {database}.`pa``rent s`" in str(refused.value)
    assert "chi" not in str(refused.value)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, server_default=False)
        conn.commit()
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
    assert _columns(admin, PARENT) == ["id", "name"]


def test_mariadb_versions_need_the_version_databases(
    mariadb_user: tuple[Engine, Engine, str],
) -> None:
    """With ``TRIGGER`` (and ``CREATE TEMPORARY TABLES``), serving versions still
    needs ``CREATE``, ``DROP``, ``CREATE VIEW``... on the version databases and
    to read the other users' grants (which the expand carries to the views) -- with ``GRANT OPTION``
    there once another user holds some -- each refused by name before anything
    changes; granted on a pattern (as a DBA would), the migration runs and the
    other user reaches its version."""
    admin, engine, user = mariadb_user
    database = str(admin.url.database)
    other = f"{user}_app"
    with admin.begin() as conn:
        conn.exec_driver_sql(
            f"GRANT TRIGGER, CREATE TEMPORARY TABLES ON `{database}`.* TO '{user}'@'%%'"
        )
        conn.execute(sa.text("CREATE USER :u@'%'"), {"u": other})
    versions = PkMigrationOptions(online=True, versions=True)
    pattern = "`sqla\\_ids\\_%%`.*"
    try:
        _refused(
            engine,
            versions,
            "versions: the user lacks CREATE, DROP, CREATE VIEW, SHOW VIEW, SELECT on the"
            f" version database sqla_ids_before_{database}",
            f"sqla_ids_after_{database}",
            f"versions: the user cannot read the other users' grants on {database} (SELECT on"
            " mysql.*)",
        )
        with admin.begin() as conn:
            conn.exec_driver_sql(f"GRANT ALL ON {pattern} TO '{user}'@'%%'")
            conn.exec_driver_sql(f"GRANT SELECT ON mysql.* TO '{user}'@'%%'")
            conn.exec_driver_sql(f"GRANT SELECT ON `{database}`.* TO '{other}'@'%%'")
        _refused(engine, versions, "versions: the user lacks GRANT OPTION on the version database")
        with admin.begin() as conn:
            conn.exec_driver_sql(f"GRANT ALL ON {pattern} TO '{user}'@'%%' WITH GRANT OPTION")
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, PARENT, versions, phase="prepare")
        # The other user's database grant, carried to each version database by
        # its escaped name: ``_`` is a wildcard in a database-level GRANT.
        with admin.connect() as conn:
            held = conn.execute(
                sa.text("SELECT Db FROM mysql.db WHERE User = :u ORDER BY Db"), {"u": other}
            ).scalars()
            escaped = database.replace("_", "\\_")
            assert sorted(held) == sorted(
                [database, *(f"sqla\\_ids\\_{v}\\_{escaped}" for v in ("after", "before"))]
            )
        as_other = sa.create_engine(
            admin.url.set(username=other, password=None, database=f"sqla_ids_after_{database}")
        )
        try:
            with as_other.connect() as conn:
                assert conn.exec_driver_sql("SELECT COUNT(*) FROM `pa``rent s`").scalar() == 2
        finally:
            as_other.dispose()
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
            conn.commit()
    finally:
        with admin.begin() as conn:  # (the user's own grants go with it: see mariadb_user)
            conn.execute(sa.text("DROP USER IF EXISTS :u@'%'"), {"u": other})
    assert _columns(admin, PARENT) == ["id", "name"]


def test_mariadb_adding_a_key_needs_trigger_for_its_server_default(
    mariadb_user: tuple[Engine, Engine, str],
) -> None:
    """``add_uuid7_key`` gives new rows their key with a trigger (the server
    default): refused by name without ``TRIGGER``, before the column is added;
    without a server default it needs none, and runs and is dropped again."""
    admin, engine, user = mariadb_user
    database = str(admin.url.database)
    with admin.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE `lo g` (at DATETIME NOT NULL, body TEXT)")
        conn.exec_driver_sql("INSERT INTO `lo g` VALUES (NOW(), 'a'), (NOW(), 'b')")
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as refused:
        add_uuid7_key(conn, "lo g")
    assert f"the user lacks TRIGGER on {database}.`lo g`" in str(refused.value)
    # (its batches' keys go through a temporary table)
    assert "lacks CREATE TEMPORARY TABLES on the database" in str(refused.value)
    assert _columns(admin, "lo g") == ["at", "body"]
    with admin.begin() as conn:
        conn.exec_driver_sql(f"GRANT CREATE TEMPORARY TABLES ON `{database}`.* TO '{user}'@'%%'")
    engine.dispose()  # (a database grant reaches a session at its next USE)
    with engine.connect() as conn:
        add_uuid7_key(conn, "lo g", server_default=False)
        conn.commit()
    assert _columns(admin, "lo g") == ["at", "body", "id"]
    with engine.connect() as conn:
        drop_uuid7_key(conn, "lo g")
        conn.commit()
    assert _columns(admin, "lo g") == ["at", "body"]
