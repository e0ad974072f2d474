"""Issue 29: the online migration of tables that views read.

The shop (tests/online_app.py) with views over the parent's key, over a join
of a child to its parent through the reference, over a view, with a comment,
a grant and options (PostgreSQL: ``security_barrier``, ``CHECK OPTION``, a
materialized view populated and one ``WITH NO DATA``; MariaDB: ``ALGORITHM``,
``SQL SECURITY``, ``DEFINER``, ``CHECK OPTION``), named with quotes, spaces and
non-ASCII letters. The migration runs online with the application writing:
after the swap the views read the UUID columns under the original names and
return what their queries return on the tables, their definitions and
properties as they were; undone after the swap, the schema and the rows are
the original ones.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
import requirements as requires
import sqlalchemy as sa
from dbsnapshot import rows, structure
from online_app import check_new_keys, migrate_online, quoted, run_with_writer
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import restore_pk_from_uuid7

BY_KEY = 'shop "by" key ü'
"""A view over the parent's key."""
JOINED = "item's `shop` view"
"""A view joining the child to its parent through the reference."""
OVER = "über the view"
"""A view over ``JOINED``."""
COUNTS = 'shop "counts"'
"""PostgreSQL: a populated materialized view over the key (with a unique index)."""
LATER = "later counts"
"""PostgreSQL: a materialized view ``WITH NO DATA``."""

#: view -> the query it stands for, run on the tables to compare.
QUERIES = {
    BY_KEY: "SELECT id, name FROM {shop} WHERE id IS NOT NULL",
    JOINED: "SELECT i.label, i.shop_id, s.id AS sid, s.name FROM item i"
    " JOIN {shop} s ON s.id = i.shop_id",
    OVER: "SELECT name, count(*) AS n FROM ({joined}) j GROUP BY name",
}


def _q(engine: Engine, name: str) -> str:
    return quoted(engine, name)


def partial_q(engine: Engine) -> Callable[[str], str]:
    """``_q`` on ``engine``."""
    return lambda name: _q(engine, name)


@pytest.fixture
def role(online_private_engine: Engine) -> Iterator[str | None]:
    """PostgreSQL: a role of this test's own (roles are cluster-wide: a unique
    random name, dropped at the end); MariaDB: none."""
    engine = online_private_engine
    if requires.database_name(engine) != "postgresql":
        yield None
        return
    name = f"vi'ew reader {uuid.uuid4().hex[:12]}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE ROLE {_q(engine, name)}")
    yield name
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP OWNED BY {_q(engine, name)}")
        conn.exec_driver_sql(f"DROP ROLE {_q(engine, name)}")


@pytest.fixture
def shop(online_shop: Engine, role: str | None) -> Engine:
    """The shop with its views."""
    engine = online_shop
    q = partial_q(engine)
    shop = quoted(engine)
    joined = QUERIES[JOINED].format(shop=shop)
    with engine.begin() as conn:
        if role is not None:  # PostgreSQL
            conn.exec_driver_sql(
                f"CREATE VIEW {q(BY_KEY)} WITH (security_barrier = true) AS"
                f" {QUERIES[BY_KEY].format(shop=shop)} WITH LOCAL CHECK OPTION"
            )
            conn.exec_driver_sql(f"COMMENT ON VIEW {q(BY_KEY)} IS 'the shops'' keys'")
            conn.exec_driver_sql(f"GRANT SELECT ON {q(BY_KEY)} TO {q(role)}")
            conn.exec_driver_sql(f"CREATE VIEW {q(JOINED)} AS {joined}")
            conn.exec_driver_sql(
                f"CREATE VIEW {q(OVER)} AS SELECT name, count(*) AS n FROM {q(JOINED)}"
                " GROUP BY name"
            )
            conn.exec_driver_sql(f"GRANT SELECT ON {q(OVER)} TO {q(role)} WITH GRANT OPTION")
            conn.exec_driver_sql(
                f"CREATE MATERIALIZED VIEW {q(COUNTS)} AS SELECT s.id, count(i.id) AS items"
                f" FROM {shop} s LEFT JOIN item i ON i.shop_id = s.id GROUP BY s.id"
            )
            conn.exec_driver_sql(f"CREATE UNIQUE INDEX {q('counts by id')} ON {q(COUNTS)} (id)")
            conn.exec_driver_sql(f"COMMENT ON MATERIALIZED VIEW {q(COUNTS)} IS 'per shop'")
            conn.exec_driver_sql(
                f"CREATE MATERIALIZED VIEW {q(LATER)} AS SELECT shop_id, count(*) AS reviews"
                " FROM review GROUP BY shop_id WITH NO DATA"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE ALGORITHM=MERGE DEFINER=CURRENT_USER SQL SECURITY INVOKER VIEW"
                f" {q(BY_KEY)} AS {QUERIES[BY_KEY].format(shop=shop)} WITH LOCAL CHECK OPTION"
            )
            conn.exec_driver_sql(
                f"CREATE ALGORITHM=TEMPTABLE SQL SECURITY DEFINER VIEW {q(JOINED)} AS {joined}"
            )
            conn.exec_driver_sql(
                f"CREATE VIEW {q(OVER)} AS SELECT name, count(*) AS n FROM {q(JOINED)}"
                " GROUP BY name"
            )
    return engine


def _view_rows(engine: Engine) -> dict[str, tuple[list[tuple[str, ...]], list[tuple[str, ...]]]]:
    """view -> (its rows, its query's rows on the tables), in one snapshot."""
    q = partial_q(engine)
    shop = quoted(engine)
    joined = QUERIES[JOINED].format(shop=shop)
    out = {}
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        else:
            conn.exec_driver_sql("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        for view, query in QUERIES.items():
            got = conn.exec_driver_sql(f"SELECT * FROM {q(view)}").all()
            expected = conn.exec_driver_sql(query.format(shop=shop, joined=joined)).all()
            out[view] = (
                sorted(tuple(str(v) for v in r) for r in got),
                sorted(tuple(str(v) for v in r) for r in expected),
            )
    return out


def _properties(engine: Engine) -> list[str]:
    """How each view is defined, as the database prints it: its definition,
    options, comment, grants, indexes (a materialized view's), populated or not
    (PostgreSQL); ``SHOW CREATE VIEW`` (MariaDB: algorithm, definer, security,
    check option)."""
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            found = conn.exec_driver_sql(
                "SELECT c.relname, c.relkind, pg_get_viewdef(c.oid), c.reloptions::text,"
                " obj_description(c.oid, 'pg_class'), c.relacl::text, c.relispopulated,"
                " ARRAY(SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i"
                " WHERE i.indrelid = c.oid)::text"
                " FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace"
                " AND c.relkind IN ('v', 'm') ORDER BY 1"
            ).all()
            return [repr(tuple(r)) for r in found]
        names = conn.exec_driver_sql(
            "SELECT TABLE_NAME FROM information_schema.VIEWS WHERE TABLE_SCHEMA = DATABASE()"
            " ORDER BY 1"
        ).scalars()
        return [
            str(conn.exec_driver_sql(f"SHOW CREATE VIEW {_q(engine, n)}").one()[1]) for n in names
        ]


def _check_views(engine: Engine) -> None:
    for view, (got, expected) in _view_rows(engine).items():
        assert got == expected, view
        assert got, view


def _key_type_of(engine: Engine, view: str, column: str) -> str:
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            return str(
                conn.execute(
                    sa.text(
                        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
                        " WHERE attrelid = to_regclass(:v) AND attname = :c"
                    ),
                    {"v": _q(engine, view), "c": column},
                ).scalar_one()
            )
        return str(
            conn.execute(
                sa.text(
                    "SELECT DATA_TYPE FROM information_schema.COLUMNS"
                    " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :v AND COLUMN_NAME = :c"
                ),
                {"v": view, "c": column},
            ).scalar_one()
        )


def _counts(engine: Engine) -> tuple[bool, list[tuple[str, int]], list[tuple[str, int]]]:
    """PostgreSQL's materialized view: populated?, its rows and its query's rows."""
    q = partial_q(engine)
    with engine.connect() as conn:
        populated = bool(
            conn.execute(
                sa.text("SELECT relispopulated FROM pg_class WHERE oid = to_regclass(:v)"),
                {"v": q(COUNTS)},
            ).scalar_one()
        )
        got = conn.exec_driver_sql(f"SELECT id::text, items FROM {q(COUNTS)}").all()
        expected = conn.exec_driver_sql(
            f"SELECT s.id::text, count(i.id) FROM {quoted(engine)} s"
            " LEFT JOIN item i ON i.shop_id = s.id GROUP BY s.id"
        ).all()
    return populated, sorted(map(tuple, got)), sorted(map(tuple, expected))


def _unpopulated(engine: Engine) -> bool:
    with engine.connect() as conn:
        return not conn.execute(
            sa.text("SELECT relispopulated FROM pg_class WHERE oid = to_regclass(:v)"),
            {"v": _q(engine, LATER)},
        ).scalar_one()


def _fingerprint(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return structure(conn)


class Reader(threading.Thread):
    """Another application session reading every view, over and over, each
    failure recorded (a view missing or half-built while the swap runs)."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(daemon=True)
        self.engine = engine
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.reads = 0
        views = [*QUERIES, *((COUNTS,) if engine.dialect.name == "postgresql" else ())]
        self.sql = [f"SELECT count(*) FROM {_q(engine, v)}" for v in views]

    def run(self) -> None:
        while not self.stop.is_set() or self.reads < 20:
            for sql in self.sql:
                try:
                    with self.engine.connect() as conn:
                        conn.exec_driver_sql(sql).scalar()
                    self.reads += 1
                except sa.exc.DBAPIError as error:
                    self.failures.append(f"{sql}: {str(error.orig).splitlines()[0]}")
                time.sleep(0.002)  # at an application's pace, as the writer


@pytest.mark.slow_on("mariadb")  # quick loop: MariaDB with a writer is test_migration_online
def test_views_are_recreated_online_with_the_application_writing(shop: Engine) -> None:
    """Every phase with the application writing and reading the views: the views
    read the UUID columns, return what their queries return, and are defined as
    they were; no read of a view failed meanwhile."""
    before = _properties(shop)
    _check_views(shop)
    reader = Reader(shop)
    reader.start()
    try:
        writer = run_with_writer(shop, True, "prepare", "swap", "contract", recreate_views=True)
    finally:
        reader.stop.set()
        reader.join()
    assert reader.failures == [], reader.failures[:5]
    check_new_keys(shop, writer)
    _check_views(shop)
    assert _properties(shop) == before
    uuid_type = "uuid" if shop.dialect.name == "postgresql" else None
    for view, column in ((BY_KEY, "id"), (JOINED, "shop_id"), (JOINED, "sid")):
        found = _key_type_of(shop, view, column)
        assert found == uuid_type if uuid_type else found != "bigint", (view, column, found)
    if shop.dialect.name == "postgresql":
        assert _key_type_of(shop, COUNTS, "id") == "uuid"
        assert _unpopulated(shop)
        populated, got, _now = _counts(shop)
        # Refreshed in the swap's transaction: populated, one row per shop
        # then (the application has written since, so not compared to now).
        assert populated and got


@pytest.mark.slow
def test_views_undone_after_the_swap_are_the_original(shop: Engine) -> None:
    """Swapped, then undone online: the schema (views, their definitions,
    comments, grants, options) and the rows are the original ones, and the
    views read the old keys again."""
    before, data, properties = _fingerprint(shop), _rows(shop), _properties(shop)
    views_before = _view_rows(shop)
    counts_before = _counts(shop) if shop.dialect.name == "postgresql" else None
    migrate_online(shop, "swap", recreate_views=True)
    _check_views(shop)
    assert _view_rows(shop).keys() == views_before.keys()
    if counts_before is not None:
        populated, got, expected = _counts(shop)
        assert populated and got == expected
        assert _unpopulated(shop)
    with shop.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
        conn.commit()
    assert _fingerprint(shop) == before
    assert _rows(shop) == data
    assert _properties(shop) == properties
    assert _view_rows(shop) == views_before
    if counts_before is not None:
        assert _counts(shop) == counts_before
        assert _unpopulated(shop)


@pytest.mark.slow
def test_views_undone_after_the_swap_with_the_application_writing(shop: Engine) -> None:
    """The undo of the swap while the application writes: the views are back over
    the old columns, defined as they were."""
    before, properties = _fingerprint(shop), _properties(shop)
    writer = run_with_writer(shop, True, "prepare", "swap", recreate_views=True)
    assert writer.failures == [], writer.failures[:5]
    with shop.connect() as conn:
        restore_pk_from_uuid7(conn, "shop s")
        conn.commit()
    assert _fingerprint(shop) == before
    assert _properties(shop) == properties
    _check_views(shop)


def test_views_online_need_recreate_views(shop: Engine) -> None:
    """As offline: views over the columns are recreated only when asked."""
    with pytest.raises(MigrationRefusedError, match="recreate_views=True") as refused:
        migrate_online(shop, "prepare")
    assert "online mode does not recreate views" not in str(refused.value)
    with shop.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {_q(shop, BY_KEY)}").scalar()


def _rows(engine: Engine) -> dict[str, list[tuple[str, ...]]]:
    with engine.connect() as conn:
        return rows(conn)


def test_a_view_that_cannot_read_the_uuids_stops_the_swap_unchanged(
    postgresql_private_engine: Engine,
) -> None:
    """PostgreSQL: a view comparing the key with a number cannot be created over
    the UUID column: the swap stops, naming the view and the way out, and its
    transaction rolls back (the keys and the view as they were); with the view
    dropped, the swap goes through."""
    from online_app import postgresql_schema

    from sqla_ids.errors import MigrationVerificationError
    from sqla_ids.migration.core.state import steps

    engine = postgresql_private_engine
    postgresql_schema(engine)
    view = _q(engine, 'low "keys"')
    with engine.connect() as conn:
        qualified = f"{_q(engine, conn.exec_driver_sql('SELECT current_schema()').scalar())}.{view}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE VIEW {view} AS SELECT id FROM "shop s" WHERE id < 10')
    migrate_online(engine, "prepare", recreate_views=True)
    with pytest.raises(MigrationVerificationError) as stopped:
        migrate_online(engine, "swap", recreate_views=True)
    message = str(stopped.value)
    assert f"could not recreate view {qualified}" in message, message
    assert "nothing has changed" in message
    with engine.connect() as conn:
        assert str(steps(conn)["shop s"]) == "online:prepared"
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {view}").scalar() == 9
    assert _key_type_of(engine, "shop s", "id") == "bigint"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP VIEW {view}")
    migrate_online(engine, "swap", recreate_views=True)
    assert _key_type_of(engine, "shop s", "id") == "uuid"


def test_preflight_shows_the_views_in_the_swap(shop: Engine) -> None:
    """The preflight prints the swap as it will run: on PostgreSQL the views
    locked before the tables, dropped first, created again (and the populated
    materialized view refreshed) last; on MariaDB no view statement at all."""
    from sqla_ids.migration.dry_run import preflight

    with shop.connect() as conn:
        report = preflight(conn, "shop s", online=True, recreate_views=True)
        conn.rollback()
    (table,) = report.tables
    assert not table.refused, table.refused
    sql = [str(s) for s in table.statements]
    if shop.dialect.name != "postgresql":
        assert not [s for s in sql if re.match(r"(CREATE|DROP)\b.*?\bVIEW\b", s)]
        return

    # The swap's lock: one block naming what it locks as literals, in order.
    def lit(name: str) -> str:
        return _q(shop, name).replace("'", "''")

    lock = next(s for s in sql if "LOCK TABLE" in s and lit(OVER) in s)
    assert lock.index(lit(OVER)) < lock.index(lit(JOINED)) < lock.index("'\"shop s\"'")
    assert _q(shop, COUNTS) not in lock  # a materialized view cannot be locked
    swap = sql[sql.index(lock) :]
    drops = [n for n, s in enumerate(swap) if s.startswith("DROP ") and " VIEW " in s]
    creates = [n for n, s in enumerate(swap) if s.startswith("CREATE ") and " VIEW " in s]
    assert len(drops) == len(creates) == 5 and max(drops) < min(creates)
    assert f"REFRESH MATERIALIZED VIEW {_q(shop, COUNTS)}" in "\n".join(swap)
    assert f"REFRESH MATERIALIZED VIEW {_q(shop, LATER)}" not in "\n".join(swap)
