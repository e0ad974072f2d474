"""Issue 30: the write-pattern matrix through the versions, as a rolling deploy runs it.

Every pattern of :mod:`write_patterns` is sent by two application versions
(docs/migration.md, "Rolling deploys"), interleaved pattern by pattern, before
each phase of an online migration with ``versions``, in the middle of the
parent's and a child's backfill, and after the contract:

* the *old code* (integer keys) through *before* from before the expand until
  the contract -- on PostgreSQL one ``search_path`` all along; on MariaDB the
  application's database until the prepare's end, then *before*'s database;
* the *new code* (UUID keys) through *after* from the prepare's end on -- on
  MariaDB pointed at the application's database from the swap on.

Each application then reads every row back in its own version, and after the
contract every row must point where either wrote it to point. The rollback:
the old code alone, through *before*, across the swap and its online undo.
What the versions cannot serve (``TRUNCATE`` of a view; ``COPY`` into one on
PostgreSQL; on MariaDB a row the new code writes referring to itself in one
statement) the patterns send as the docs say, and its exact error or reading
is asserted, so the docs' list stays true.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
import write_patterns
from sqlalchemy.engine import Engine

from sqla_ids import uuid7
from sqla_ids.migration import (
    PkMigrationOptions,
    migrate_pk_to_uuid7,
    restore_pk_from_uuid7,
    version_connect_args,
)
from sqla_ids.migration.core.versions import version_database, version_schema

# The quick loop runs PostgreSQL's matrix; MariaDB's (5-6 s) is with the slow tests.
# quick cover: tests/test_migration_online_versions_mariadb.py::
#   test_rows_written_through_either_version_are_complete_in_both
# (both codes writing through MariaDB's versions, across the prepare and the swap)
QUICK = {("postgresql", "plain")}
CASES = [
    pytest.param(case, id=f"{case[0]}-{case[1]}", marks=() if case in QUICK else pytest.mark.slow)
    for case in write_patterns.CASES
]
PREFIX = "v"


class Shop:
    """The patterns' shop in a database of the test's own, and its versions' engines;
    the version schemas/databases are dropped whatever happens."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.pg = engine.dialect.name == "postgresql"
        with engine.connect() as conn:
            self.home = str(
                conn.exec_driver_sql(
                    "SELECT current_schema()" if self.pg else "SELECT DATABASE()"
                ).scalar_one()
            )
        # A prefix of the test's own on PostgreSQL (schemas are per database,
        # shared by the tests running at once); MariaDB's names hold the database.
        self.prefix = f"{self.home}_{PREFIX}" if self.pg else PREFIX
        self.engines: dict[str, Engine] = {}

    def version(self, version: str) -> Engine:
        """The engine of an application instance on ``version``."""
        if version not in self.engines:
            url = self.engine.url
            args = version_connect_args(
                url.drivername,
                version,  # type: ignore[arg-type]
                self.home,
                versions=self.prefix,
            )
            if self.pg:
                url = url.difference_update_query(["options"])
            else:
                args["local_infile"] = True
            self.engines[version] = sa.create_engine(url, connect_args=args)
        return self.engines[version]

    def names(self) -> list[str]:
        """The version schemas (PostgreSQL) or databases (MariaDB) of this test."""
        if self.pg:
            return [version_schema(self.prefix, v) for v in ("before", "after")]  # type: ignore[arg-type]
        return [version_database(self.prefix, v, self.home) for v in ("before", "after")]  # type: ignore[arg-type]

    def existing(self) -> set[str]:
        """Which of :meth:`names` exist now."""
        sql = (
            "SELECT nspname FROM pg_namespace WHERE nspname IN :n"
            if self.pg
            else "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN :n"
        )
        with self.engine.connect() as conn:
            return set(
                conn.execute(
                    sa.text(sql).bindparams(sa.bindparam("n", expanding=True)),
                    {"n": self.names()},
                ).scalars()
            )

    def old_code(self, phase: str | None) -> Engine | None:
        """Where the old code serves: *before* (on MariaDB once pointed there, at
        the prepare's end, until an undo has swapped the tables back: then the
        application's database again, before the undo drops *before*)."""
        if phase == "done":
            return None
        if self.pg:
            return self.version("before")
        with self.engine.connect() as conn:
            swapped = write_patterns.has_column(conn, "shop", "id_old")
        before = version_database(self.prefix, "before", self.home)
        if (phase == "online:prepared" or swapped) and before in self.existing():
            return self.version("before")
        return self.engine

    def new_code(self, phase: str | None) -> Engine | None:
        """Where the new code serves: *after* from the prepare's end (ready at
        ``online:prepared``); on MariaDB the application's database from the swap."""
        if phase == "online:prepared" or (self.pg and phase in ("online:swapped", "done")):
            return self.version("after")
        return self.engine if phase in ("online:swapped", "done") else None

    def options(self) -> PkMigrationOptions:
        return PkMigrationOptions(online=True, versions=self.prefix, batch_size=8, batch_time=0)

    def close(self) -> None:
        for engine in self.engines.values():
            engine.dispose()
        quote = self.engine.dialect.identifier_preparer.quote
        with self.engine.begin() as conn:
            for name in self.names():
                kind = "SCHEMA" if self.pg else "DATABASE"
                conn.exec_driver_sql(
                    f"DROP {kind} IF EXISTS {quote(name)}" + (" CASCADE" if self.pg else "")
                )


@pytest.fixture(params=CASES)
def shop(request: pytest.FixtureRequest) -> Iterator[Shop]:
    """The patterns' shop, ``item`` in each layout, with its versions."""
    for engine in write_patterns.layout_shop(request):
        shop = Shop(engine)
        try:
            yield shop
        finally:
            shop.close()


def _deployments(shop: Shop, new_code: bool = True) -> list[write_patterns.Deployment]:
    apps = [write_patterns.Deployment("old", False, shop.old_code, shop.home)]
    if new_code:
        apps.append(write_patterns.Deployment("new", True, shop.new_code, shop.home))
    return apps


def _checked(matrix: write_patterns.Matrix, shop: Shop) -> None:
    failed = [f"{where}: {error}" for where, error in matrix.failures.items()]
    problems = write_patterns.check(shop.engine, matrix.expected)
    assert not failed and not problems, "\n".join(
        [f"{len(failed)} failed:", *failed, f"{len(problems)} wrong:", *problems]
    )
    assert shop.existing() == set()


def test_every_write_pattern_through_both_versions(
    shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    matrix = write_patterns.Matrix(shop.engine, deployments=_deployments(shop))
    matrix.around_every_phase(monkeypatch, mid_backfill=(2, 9))  # the parent's walk, a child's
    for phase in ("prepare", "swap", "contract"):
        with shop.engine.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop", shop.options(), phase=phase)  # type: ignore[arg-type]
    matrix.run("after the contract")
    _checked(matrix, shop)
    # The deploy sequence of docs/migration.md: the old code on *before*'s
    # search_path all along (PostgreSQL), on the application's database until
    # the prepare's end (MariaDB); the new code on *after* from the prepare's
    # end, on the application's database from the swap (MariaDB).
    old_first = "before" if shop.pg else "home"
    new_last = "after" if shop.pg else "home"
    assert _deploy(matrix, shop) == [
        ("before the plan", "None", "old", old_first),
        ("before expand", "online:planned", "old", old_first),
        ("before backfill", "online:expanded", "old", old_first),
        ("mid-backfill (2)", "online:expanded", "old", old_first),
        ("mid-backfill (9)", "online:expanded", "old", old_first),
        ("before prepare", "online:backfilled", "old", old_first),
        ("before swap", "online:prepared", "old", "before"),
        ("before swap", "online:prepared", "new", "after"),
        ("before contract", "online:swapped", "old", "before"),
        ("before contract", "online:swapped", "new", new_last),
        ("after the contract", "done", "new", new_last),
    ]


def _deploy(matrix: write_patterns.Matrix, shop: Shop) -> list[tuple[str, str, str, str]]:
    """Where each application ran: the version its engine names (PostgreSQL: in
    its search path, which resolves to the base tables while that version's
    schema does not exist), or ``home`` (the application's own database)."""
    runs = []
    versions = dict(zip(shop.names(), ("before", "after"), strict=True))
    for where, phase, app in matrix.served:
        name, _, on = app.partition(" on ")
        found = [version for target, version in versions.items() if target in on]
        runs.append((where, phase, name, found[0] if found else "home"))
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("shop", [c for c in CASES if c.values[0][1] == "plain"], indirect=True)
def test_the_old_code_through_the_swap_and_its_undo(
    shop: Shop, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rollback: the old code alone, through *before*, across the swap and
    ``restore_pk_from_uuid7``, then on the restored tables."""
    matrix = write_patterns.Matrix(shop.engine, deployments=_deployments(shop, new_code=False))
    matrix.around_every_phase(monkeypatch, mid_backfill=(2, 9))
    for phase in ("prepare", "swap"):
        with shop.engine.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop", shop.options(), phase=phase)  # type: ignore[arg-type]
    with shop.engine.connect() as conn:
        restore_pk_from_uuid7(conn, "shop")
    matrix.run("after the undo")
    _checked(matrix, shop)


# --- what the versions cannot serve (docs/migration.md, "Rolling deploys") ----------


def _refused(engine: Engine, sql: str) -> tuple[str, str]:
    """``sql``'s error through ``engine``: (SQLSTATE or MariaDB's error number, message)."""
    with engine.connect() as conn:
        try:
            if sql.startswith("COPY"):
                cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
                with cursor.copy(sql) as copy:
                    copy.write_row(("1", "x"))
            else:
                conn.exec_driver_sql(sql)
        except sa.exc.DBAPIError as error:
            orig: Any = error.orig
        except Exception as error:  # psycopg's COPY, below SQLAlchemy
            orig = error
        else:
            raise AssertionError(f"{sql} succeeded")
    if hasattr(orig, "diag"):  # psycopg
        return str(orig.sqlstate), str(orig).splitlines()[0]
    return str(orig.args[0]), str(orig.args[1])


def _self_parent(engine: Engine, name: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(
            sa.text("SELECT parent_id FROM shop WHERE name = :n"), {"n": name}
        ).scalar_one()


@pytest.mark.slow
@pytest.mark.parametrize("shop", [c for c in CASES if c.values[0][1] == "plain"], indirect=True)
def test_what_the_versions_cannot_serve(shop: Shop) -> None:
    """The docs' list, each version's error or reading exactly: ``TRUNCATE`` of a
    view (both databases), ``COPY`` into one (PostgreSQL); on MariaDB a row the
    new code writes referring to itself in one statement, whose old
    self-reference *before* reads as ``NULL``."""
    key = str(uuid7())
    insert = "INSERT INTO shop (id, name, parent_id) VALUES (:k, :n, :k)"
    for phase, version in (("prepare", "after"), ("swap", "before")):
        with shop.engine.connect() as conn:
            migrate_pk_to_uuid7(conn, "shop", shop.options(), phase=phase)  # type: ignore[arg-type]
        engine = shop.version(version)
        if shop.pg:
            assert _refused(engine, "TRUNCATE TABLE note") == (
                "42809",
                '"note" is not a table',
            )
            assert _refused(engine, "COPY item (shop_id, label) FROM STDIN") == (
                "42809",
                'cannot copy to view "item"',
            )
            continue
        database = version_database(shop.prefix, version, shop.home)  # type: ignore[arg-type]
        assert _refused(engine, "TRUNCATE TABLE note") == (
            "1146",
            f"Table '{database}.note' doesn't exist",
        )
        # The new code: through *after* before the swap, on the tables after it.
        name = f"self {version}"
        new_code = engine if version == "after" else shop.engine
        with new_code.begin() as conn:
            conn.execute(
                sa.text(insert), {"k": key if version == "after" else str(uuid7()), "n": name}
            )
        # *before*: the tables before the swap, its views after it.
        old_code = shop.engine if version == "after" else engine
        assert _self_parent(old_code, name) is None
        assert _self_parent(new_code, name) is not None
    with shop.engine.connect() as conn:
        restore_pk_from_uuid7(conn, "shop")
    assert shop.existing() == set()


# --- a child before its parent, through the other version, hostile names ------------

PARENT, KEY, CHILD, REF = 'sh"op` s', "i d", "it'em\"s", "sh`op id"


@pytest.mark.slow
@pytest.mark.parametrize("database", ["postgresql", "mariadb"])
def test_a_child_before_its_parent_through_the_other_version(
    request: pytest.FixtureRequest, database: str
) -> None:
    """A child written before its parent (a deferred foreign key; foreign key
    checks off) by each application through its version -- the new code
    before the swap, the old code after it -- points at its parent in both
    versions; names with quotes, backticks and spaces."""
    engine: Engine = request.getfixturevalue(f"{database}_private_engine")
    shop = Shop(engine)
    q = engine.dialect.identifier_preparer.quote
    p, k, c, r = q(PARENT), q(KEY), q(CHILD), q(REF)
    with engine.begin() as conn:
        if shop.pg:
            conn.exec_driver_sql(
                f"CREATE TABLE {p} ({k} bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
                " name text NOT NULL UNIQUE)"
            )
            conn.exec_driver_sql(
                f"CREATE TABLE {c} (id bigserial PRIMARY KEY, {r} bigint NOT NULL REFERENCES {p}"
                f" ({k}) DEFERRABLE INITIALLY DEFERRED, label text NOT NULL UNIQUE)"
            )
        else:
            conn.exec_driver_sql(
                f"CREATE TABLE {p} ({k} BIGINT AUTO_INCREMENT PRIMARY KEY,"
                " name VARCHAR(60) NOT NULL UNIQUE)"
            )
            conn.exec_driver_sql(
                f"CREATE TABLE {c} (id BIGINT AUTO_INCREMENT PRIMARY KEY, {r} BIGINT NOT NULL,"
                f" label VARCHAR(60) NOT NULL UNIQUE, FOREIGN KEY ({r}) REFERENCES {p} ({k}))"
            )
        conn.exec_driver_sql(f"INSERT INTO {p} (name) VALUES ('s1'), ('s2')")

    def child_first(engine: Engine, key: Any, name: str) -> None:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "SET CONSTRAINTS ALL DEFERRED" if shop.pg else "SET foreign_key_checks = 0"
            )
            conn.execute(
                sa.text(f"INSERT INTO {c} ({r}, label) VALUES (:k, :n)"), {"k": key, "n": name}
            )
            conn.execute(
                sa.text(f"INSERT INTO {p} ({k}, name) VALUES (:k, :n)"), {"k": key, "n": name}
            )
            if not shop.pg:
                conn.exec_driver_sql("SET foreign_key_checks = 1")

    def parents(engine: Engine) -> dict[str, str]:
        with engine.connect() as conn:
            return dict(
                conn.exec_driver_sql(
                    f"SELECT i.label, s.name FROM {c} i LEFT JOIN {p} s ON s.{k} = i.{r}"
                ).all()
            )

    try:
        options = PkMigrationOptions(online=True, versions=shop.prefix)
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, PARENT, options, phase="prepare")
        child_first(shop.version("after"), str(uuid7()), "new")
        # *before*: the tables before the swap.
        assert parents(shop.version("after")) == parents(engine) == {"new": "new"}
        with engine.connect() as conn:
            migrate_pk_to_uuid7(conn, PARENT, options, phase="swap")
        child_first(shop.version("before"), 10**6, "old")
        new_code = shop.version("after") if shop.pg else engine
        assert parents(shop.version("before")) == parents(new_code) == {"new": "new", "old": "old"}
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, PARENT)
        assert parents(engine) == {"new": "new", "old": "old"}
        assert shop.existing() == set()
    finally:
        shop.close()
