"""The online migration's own connections act for the caller's (issue 28, items 16, 18).

* A multi-tenant application points each connection at its tenant (PostgreSQL's
  ``search_path``, MariaDB's ``USE``): the migration, which works on connections
  of its own from the same pool, migrates the caller's tenant -- not the one the
  pool's connections default to, whose table has the same name.
* Two runs of one table's migration at once (two deploys, a retry while the
  first still runs) would interleave their batches: the second is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
from sqla_ids.migration import online as online_module

ONLINE = PkMigrationOptions(online=True, batch_size=50)


def _shop(conn: sa.Connection, rows: int) -> None:
    conn.exec_driver_sql("CREATE TABLE shop (id BIGINT PRIMARY KEY, name VARCHAR(20) NOT NULL)")
    conn.execute(
        sa.text("INSERT INTO shop (id, name) VALUES (:i, :n)"),
        [{"i": i, "n": f"s{i}"} for i in range(1, rows + 1)],
    )


def _key_type(conn: sa.Connection, where: str) -> str:
    if conn.dialect.name == "postgresql":
        return str(
            conn.execute(
                sa.text(
                    "SELECT data_type FROM information_schema.columns WHERE table_schema = :s"
                    " AND table_name = 'shop' AND column_name = 'id'"
                ),
                {"s": where},
            ).scalar_one()
        )
    return str(
        conn.execute(
            sa.text(
                "SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = :s"
                " AND TABLE_NAME = 'shop' AND COLUMN_NAME = 'id'"
            ),
            {"s": where},
        ).scalar_one()
    )


@pytest.fixture(params=["postgresql", "mariadb"])
def tenants(request: pytest.FixtureRequest) -> Iterator[tuple[Engine, str, str]]:
    """An engine whose connections default to tenant ``a``, and tenant ``b``; both
    have a table ``shop``."""
    engine: Engine = request.getfixturevalue(f"{request.param}_private_engine")
    with engine.begin() as conn:
        if request.param == "postgresql":
            home = str(conn.exec_driver_sql("SELECT current_schema()").scalar())
            other = f"{home}_b"
            conn.exec_driver_sql(f'CREATE SCHEMA "{other}"')
            _shop(conn, 30)
            conn.exec_driver_sql(f'SET LOCAL search_path TO "{other}"')
            _shop(conn, 20)
        else:
            home = str(conn.exec_driver_sql("SELECT DATABASE()").scalar())
            other = f"{home}_b"
            conn.exec_driver_sql(f"CREATE DATABASE `{other}`")
            _shop(conn, 30)
            conn.exec_driver_sql(f"USE `{other}`")
            _shop(conn, 20)
            conn.exec_driver_sql(f"USE `{home}`")
    try:
        yield engine, home, other
    finally:
        with engine.begin() as conn:
            if request.param == "postgresql":
                conn.exec_driver_sql(f'DROP SCHEMA "{other}" CASCADE')
            else:
                conn.exec_driver_sql(f"DROP DATABASE `{other}`")


def _use(conn: sa.Connection, tenant: str) -> None:
    """The connection's session in ``tenant`` (its search_path / database), committed."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f'SET search_path TO "{tenant}"')
    else:
        conn.exec_driver_sql(f"USE `{tenant}`")
    conn.commit()


# quick cover: the [postgresql] case (the caller's schema, then its session as
# it was); MariaDB's run on the caller's database and its connection handed
# back: test_a_run_keeps_one_connection_for_its_transactions_and_hands_all_back_clean[mariadb]
@pytest.mark.slow_on("mariadb")
def test_the_callers_tenant_is_migrated(tenants: tuple[Engine, str, str]) -> None:
    engine, home, other = tenants
    with engine.connect() as conn:
        _use(conn, other)
        migrate_pk_to_uuid7(conn, "shop", ONLINE)
        # The caller's connection is as it was.
        here = conn.exec_driver_sql(
            "SELECT current_schema()" if conn.dialect.name == "postgresql" else "SELECT DATABASE()"
        ).scalar()
        assert here == other
        conn.rollback()
    with engine.connect() as conn:
        assert _key_type(conn, other) == "uuid"
        assert _key_type(conn, home) == "bigint"  # the pool's default tenant untouched
        rows = conn.exec_driver_sql(
            "SELECT count(*) FROM shop"  # the pool's default: tenant a, 30 rows
        ).scalar()
        assert rows == 30


def test_a_second_run_at_once_is_refused(
    tenants: tuple[Engine, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine, _home, _other = tenants
    first_paused, go_on = threading.Event(), threading.Event()
    original = online_module.OnlineRun.pause

    def pause(self: Any) -> None:
        if threading.current_thread().name == "first":
            first_paused.set()
            go_on.wait(30)
        original(self)

    monkeypatch.setattr(online_module.OnlineRun, "pause", pause)
    errors: list[BaseException] = []

    def first() -> None:
        try:
            with engine.connect() as conn:
                migrate_pk_to_uuid7(conn, "shop", ONLINE.replace(batch_size=5, batch_time=0))
        except BaseException as error:  # reported below
            errors.append(error)

    thread = threading.Thread(target=first, name="first")
    thread.start()
    try:
        assert first_paused.wait(30)
        with (
            engine.connect() as conn,
            pytest.raises(MigrationRefusedError, match="another run of the migration of shop"),
        ):
            migrate_pk_to_uuid7(conn, "shop", ONLINE)
    finally:
        go_on.set()
        thread.join(60)
    assert errors == []
    with engine.connect() as conn:  # the first run finished, untroubled
        assert (
            conn.exec_driver_sql("SELECT count(*) FROM shop WHERE id_old IS NOT NULL").scalar()
            == 30
        )


def test_names_and_comments_stay_data_with_standard_conforming_strings_off(
    postgresql_url: sa.URL,
) -> None:
    """PostgreSQL reads a backslash in a plain string literal as an escape when
    ``standard_conforming_strings`` is off: a comment or schema name holding
    ``\\'`` must still arrive as written, and nothing after it run as SQL."""
    schema = "tenant\\' x"
    admin = sa.create_engine(postgresql_url, isolation_level="AUTOCOMMIT")
    quoted = admin.dialect.identifier_preparer.quote(schema)
    comment = "the key\\'; DROP TABLE shop; --"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {quoted}")
    url = postgresql_url.set(query={"options": "-cstandard_conforming_strings=off"})
    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _tenant(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET search_path TO {quoted}")
        dbapi_connection.commit()

    try:
        with engine.begin() as conn:
            assert conn.exec_driver_sql("SHOW standard_conforming_strings").scalar() == "off"
            _shop(conn, 10)
            conn.execute(sa.text("SELECT set_config('sqla_ids.c', :c, false)"), {"c": comment})
            conn.exec_driver_sql(
                "DO $$ BEGIN EXECUTE format('COMMENT ON COLUMN shop.id IS %%L',"
                " current_setting('sqla_ids.c')); END $$"
            )
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop", ONLINE)
        with engine.connect() as conn:
            assert _key_type(conn, schema) == "uuid"
            kept = conn.exec_driver_sql(
                "SELECT col_description('shop'::regclass, attnum) FROM pg_attribute"
                " WHERE attrelid = 'shop'::regclass AND attname = 'id'"
            ).scalar()
            assert kept == comment
            assert conn.exec_driver_sql("SELECT count(*) FROM shop").scalar() == 10
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {quoted} CASCADE")
        admin.dispose()


def test_a_publication_with_a_column_list_is_refused_by_name(postgresql_engine: Engine) -> None:
    with postgresql_engine.begin() as conn:
        if (conn.dialect.server_version_info or (0,)) < (15,):
            pytest.skip("column lists in publications are new in PostgreSQL 15")
        _shop(conn, 3)
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
        name = f"pub_{schema}"
        conn.exec_driver_sql(f'CREATE PUBLICATION "{name}" FOR TABLE shop (id, name)')
    try:
        for online in (False, True):
            with (
                postgresql_engine.connect() as conn,
                pytest.raises(
                    MigrationRefusedError,
                    # (schema-qualified: another schema may have its own shop)
                    match=f"publication {name} publishes {schema}.shop with a column list.*"
                    f'ALTER PUBLICATION "?{name}"? DROP TABLE {schema}.shop',
                ),
            ):
                migrate_pk_to_uuid7(conn, "shop", online=online)
    finally:
        with postgresql_engine.begin() as conn:
            conn.exec_driver_sql(f'DROP PUBLICATION "{name}"')
            conn.exec_driver_sql("DROP TABLE shop")


def test_a_run_keeps_one_connection_for_its_transactions_and_hands_all_back_clean(
    tenants: tuple[Engine, str, str],
) -> None:
    """The backfill's batches are transactions of their own, on one connection
    the run keeps (not one from the pool each: four round trips more per
    batch); every connection goes back to the pool as the pool gave it --
    the caller's tenant left, the lock timeouts at the server's defaults."""
    engine, home, other = tenants
    checkouts, errors = [], []
    sa.event.listen(engine, "checkout", lambda *args: checkouts.append(1))
    # A statement that fails (a lock timeout on a busy machine) gives its
    # connection back and the retry takes another: at most one more each.
    sa.event.listen(engine, "handle_error", lambda *args: errors.append(1))
    with engine.connect() as conn:
        _use(conn, other)
        plan = migrate_pk_to_uuid7(conn, "shop", PkMigrationOptions(online=True, batch_size=3))
        conn.rollback()
        # Back to the pool's tenant before this connection goes back too.
        _use(conn, home)
    assert plan.row_count == 20
    # 20 rows in batches of 3: more than 10 transactions, a handful of connections.
    assert len(checkouts) <= 8 + len(errors), (len(checkouts), len(errors))
    pooled = [engine.connect() for _ in range(engine.pool.checkedin() or 1)]
    try:
        for conn in pooled:
            if conn.dialect.name == "postgresql":
                where, timeout = conn.exec_driver_sql(
                    "SELECT current_schema(), current_setting('lock_timeout')"
                ).one()
                assert (where, timeout) == (home, "0")
            else:
                where, timeout = conn.exec_driver_sql(
                    "SELECT DATABASE(), @@session.lock_wait_timeout = @@global.lock_wait_timeout"
                ).one()
                assert (where, timeout) == (home, 1)
    finally:
        for conn in pooled:
            conn.close()
