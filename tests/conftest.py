"""Shared fixtures: one real database per dialect, each in a throw-away schema.

PostgreSQL and MariaDB URLs come from ``SQLA_IDS_TEST_POSTGRESQL_URL`` and
``SQLA_IDS_TEST_MARIADB_URL`` (defaulting to the local servers). A test run
creates its own schema/database with a random name and drops it at the end, so
runs never see each other's tables. An unreachable server skips the tests that
need it, with the reason -- unless ``SQLA_IDS_REQUIRE_DIALECTS=1`` (set by
``.ci/run``), which turns that skip into a failure.
"""

from __future__ import annotations

import sys

# PYTHONDONTWRITEBYTECODE (set on many CI images and containers) makes pytest
# parse and rewrite the asserts of every test module again in every worker:
# about 10 s of CPU per worker for ~280 modules, a sixth of the quick loop on
# two cores. So the test run caches compiled modules (tests/__pycache__ and the
# package's, ignored by git) whatever that setting says; it still applies
# outside the test run. Set before the imports below, which bring sqla_ids.
sys.dont_write_bytecode = False

# ruff: noqa: E402 (the imports follow the setting above on purpose)
import importlib
import os
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sqla_ids.dialects.sql import execute_sql, quote_name

DEFAULT_POSTGRESQL_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_MARIADB_URL = "mysql+pymysql://root@127.0.0.1:3306/test"

DIALECTS = requires.DATABASES


def _require_dialects() -> bool:
    return os.environ.get("SQLA_IDS_REQUIRE_DIALECTS", "") not in ("", "0", "false", "no")


def _unavailable(name: str, url: URL, error: Exception) -> None:
    reason = (
        f"{name} not reachable at {url.render_as_string(hide_password=True)}: "
        f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    )
    if _require_dialects():
        pytest.fail(f"SQLA_IDS_REQUIRE_DIALECTS is set and {reason}", pytrace=False)
    pytest.skip(reason)


def _scratch_name() -> str:
    return f"sqla_ids_t_{secrets.token_hex(4)}"


# One administrative engine per server and worker, for creating and dropping the
# tests' own schemas/databases: a new engine per test connected and initialised
# its dialect again each time (15-40 ms, for hundreds of tests).
_ADMINS: dict[str, Engine] = {}


def _admin(base: URL) -> Engine:
    key = base.render_as_string(hide_password=False)
    if key not in _ADMINS:
        _ADMINS[key] = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    return _ADMINS[key]


def pytest_unconfigure(config: pytest.Config) -> None:
    for admin in _ADMINS.values():
        admin.dispose()


@contextmanager
def _postgresql_scratch(base: URL, name: str = "") -> Iterator[URL]:
    """A new schema first in ``search_path``; dropped with everything in it afterwards.

    ``name``: how its name starts (any characters: names are data), else ``sqla_ids_t_``."""
    schema = f"{name} {secrets.token_hex(4)}" if name else _scratch_name()
    admin = _admin(base)
    quoted = quote_name(admin.dialect, schema)
    try:
        with admin.connect() as conn:
            execute_sql(conn, f"CREATE SCHEMA {quoted}")
    except sa.exc.OperationalError as error:
        _unavailable("PostgreSQL", base, error)
    query = dict(base.query)
    # libpq's options: a backslash escapes a space or a backslash (then the
    # server reads search_path's quoted name).
    path = quoted.replace("\\", "\\\\").replace(" ", "\\ ")
    query["options"] = f"-csearch_path={path},public"
    try:
        yield base.set(query=query)
    finally:
        with admin.connect() as conn:
            execute_sql(conn, f"DROP SCHEMA {quoted} CASCADE")


@contextmanager
def _mariadb_scratch(base: URL, name: str = "") -> Iterator[URL]:
    """A new database; dropped afterwards. ``name`` as for :func:`_postgresql_scratch`."""
    database = f"{name} {secrets.token_hex(4)}" if name else _scratch_name()
    admin = _admin(base)
    quoted = quote_name(admin.dialect, database)
    try:
        with admin.connect() as conn:
            execute_sql(conn, f"CREATE DATABASE {quoted} CHARACTER SET utf8mb4")
    except sa.exc.OperationalError as error:
        _unavailable("MariaDB", base, error)
    try:
        yield base.set(database=database)
    finally:
        with admin.connect() as conn:
            execute_sql(conn, f"DROP DATABASE IF EXISTS {quoted}")


def _base_url(dialect: str) -> URL:
    if dialect == "postgresql":
        return make_url(os.environ.get("SQLA_IDS_TEST_POSTGRESQL_URL", DEFAULT_POSTGRESQL_URL))
    return make_url(os.environ.get("SQLA_IDS_TEST_MARIADB_URL", DEFAULT_MARIADB_URL))


# --- the ``postgresql`` and ``mariadb`` markers ---------------------------------------
# Every test that reaches PostgreSQL is marked ``postgresql`` at collection, so
# ``SQLA_IDS_TEST_POSTGRESQL_URL=<another server> pytest -m postgresql`` runs
# just those against another release (.ci/run does so on PostgreSQL 14, 16, 17
# and 18): the tests using the PostgreSQL fixtures, and those parametrized by
# dialect name (``engine``, ``dialect``...) with a PostgreSQL case. ``mariadb``
# likewise (.ci/run's run on another Python leaves both out).


def pytest_configure(config: pytest.Config) -> None:
    for server, name in (("postgresql", "PostgreSQL"), ("mariadb", "MariaDB")):
        config.addinivalue_line(
            "markers", f"{server}: reaches {name} (set at collection, see tests/conftest.py)"
        )


def _reaches(item: pytest.Item, server: str) -> bool:
    if any(name.startswith(server) for name in getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    return callspec is not None and server in callspec.id


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _reaches(item, "postgresql"):
            item.add_marker(pytest.mark.postgresql)
        if _reaches(item, "mariadb"):
            item.add_marker(pytest.mark.mariadb)
        for marker in item.iter_markers("slow_on"):
            if any(_reaches(item, server) for server in marker.args):
                item.add_marker(pytest.mark.slow)


# PyMySQL (2.2 and later) asked for nothing about TLS "prefers" it: each
# connection builds a default SSL context, loading the system's CA certificates
# (about 20 ms), even from a server without TLS such as the local one: over
# the quick loop's thousands of connections, the largest single item of a
# sampling profile (15% of its samples). The tests' connections say "no TLS"
# unless their URL asks for TLS itself.
@sa.event.listens_for(Engine, "do_connect")
def _pymysql_without_unasked_tls(
    dialect: sa.engine.Dialect, conn_rec: Any, cargs: Any, cparams: dict[str, Any]
) -> None:
    if dialect.driver == "pymysql" and not any(name.startswith("ssl") for name in cparams):
        cparams["ssl_disabled"] = True


# PostgreSQL compiled the catalog queries of the migration engine and SQLAlchemy's
# inspector with LLVM (JIT): on a server whose catalogs hold many dead rows --
# the local one runs with autovacuum off, and every run creates and drops
# thousands of tables -- their estimated cost passes ``jit_above_cost``, and
# the compilation took 20-60 ms of a query that runs in 2-3 ms without it
# (measured on the routines query of a key migration, EXPLAIN ANALYZE). The
# tests' connections run without JIT, whatever their URL says; results are
# the same. (Set at connection, not in the URL: tests read its ``options``.)
@sa.event.listens_for(Engine, "do_connect")
def _postgresql_without_jit(
    dialect: sa.engine.Dialect, conn_rec: Any, cargs: Any, cparams: dict[str, Any]
) -> None:
    if dialect.name != "postgresql":
        return
    if dialect.driver == "asyncpg":
        cparams["server_settings"] = {"jit": "off", **cparams.get("server_settings", {})}
    elif dialect.driver in ("psycopg", "psycopg_async", "psycopg2"):
        options = str(cparams.get("options") or "")
        if "jit=" not in options:
            cparams["options"] = f"{options} -cjit=off".strip()


# The same dead rows slow the catalog queries themselves, more with every run:
# a quick loop leaves about 21,000 in pg_attribute (and their like in pg_depend,
# pg_class, pg_type...) on a server that never vacuums them, and the next
# loop's reflection and migration-engine queries read through them (after ten
# loops, 230,000 dead rows in pg_attribute: the PostgreSQL server spent 38 s
# of CPU on the quick loop, 29 s on the same loop right after a VACUUM of the
# catalogs). So a developer's run first vacuums the system catalogs holding
# more than DEAD_CATALOG_ROWS dead rows (under a second; nothing else, and
# nothing on a clean server). Not where ``CI`` is set (.ci/run vacuums its
# server before the first run); not in xdist's workers (the run's controller does it
# once) nor for ``--collect-only``. The tests see the same catalogs, less
# their dead rows.
DEAD_CATALOG_ROWS = 1_000


def _vacuum_postgresql_catalogs(config: pytest.Config) -> None:
    if os.environ.get("CI") or hasattr(config, "workerinput") or config.option.collectonly:
        return
    try:
        engine = sa.create_engine(
            _base_url("postgresql"),
            isolation_level="AUTOCOMMIT",
            connect_args={"connect_timeout": 2},
        )
    except ImportError:  # no PostgreSQL driver (a pure-Python environment)
        return
    try:
        with engine.connect() as conn:
            bloated = (
                conn.execute(
                    sa.text(
                        "SELECT relname FROM pg_stat_sys_tables WHERE schemaname = 'pg_catalog'"
                        " AND n_dead_tup > :dead ORDER BY relname"
                    ),
                    {"dead": DEAD_CATALOG_ROWS},
                )
                .scalars()
                .all()
            )
            if bloated:
                quote = conn.dialect.identifier_preparer.quote
                names = ", ".join(f"pg_catalog.{quote(name)}" for name in bloated)
                conn.exec_driver_sql(f"VACUUM (ANALYZE) {names}")
    except sa.exc.DBAPIError:
        pass  # unreachable or not allowed: the tests say so themselves, or need no server
    finally:
        engine.dispose()


def pytest_sessionstart(session: pytest.Session) -> None:
    _vacuum_postgresql_catalogs(session.config)


@pytest.fixture(scope="session")
def postgresql_url() -> Iterator[URL]:
    """URL of a fresh PostgreSQL schema (first in ``search_path``), dropped afterwards."""
    with _postgresql_scratch(_base_url("postgresql")) as url:
        yield url


@pytest.fixture(scope="session")
def mariadb_url() -> Iterator[URL]:
    """URL of a fresh MariaDB database, dropped afterwards."""
    with _mariadb_scratch(_base_url("mariadb")) as url:
        yield url


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> URL:
    """URL of a fresh SQLite file database."""
    path: Path = tmp_path_factory.mktemp("sqlite") / "test.sqlite3"
    return make_url(f"sqlite:///{path}")


def _engine(url: URL) -> Iterator[Engine]:
    engine = sa.create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def postgresql_engine(postgresql_url: URL) -> Iterator[Engine]:
    """Engine on the run's PostgreSQL schema."""
    yield from _engine(postgresql_url)


@pytest.fixture
def mariadb_engine(mariadb_url: URL) -> Iterator[Engine]:
    """Engine on the run's MariaDB database."""
    yield from _engine(mariadb_url)


@pytest.fixture
def sqlite_engine(sqlite_url: URL) -> Iterator[Engine]:
    """Engine on the run's SQLite file."""
    yield from _engine(sqlite_url)


@pytest.fixture(params=DIALECTS)
def engine(request: pytest.FixtureRequest) -> Engine:
    """The same test once per dialect: SQLite, PostgreSQL, MariaDB."""
    fixture: Engine = request.getfixturevalue(f"{request.param}_engine")
    return fixture


@pytest.fixture
def metadata(engine: Engine) -> Iterator[sa.MetaData]:
    """A MetaData whose tables are dropped from ``engine`` after the test."""
    md = sa.MetaData()
    yield md
    md.drop_all(engine)


@pytest.fixture
def private_engine(engine: Engine, tmp_path: Path) -> Iterator[Engine]:
    """Like ``engine`` (same dialect), on a schema/database of this test's own.

    For tests that create or drop objects other tests may depend on, such as
    the server-side ``sqla_ids_uuid7()`` function.
    """
    name = engine.dialect.name
    if name == "sqlite":
        yield from _engine(make_url(f"sqlite:///{tmp_path / 'private.sqlite3'}"))
        return
    scratch = _postgresql_scratch if name == "postgresql" else _mariadb_scratch
    with scratch(_base_url(name)) as url:
        yield from _engine(url)


@pytest.fixture
def postgresql_private_engine(postgresql_url: URL) -> Iterator[Engine]:
    """A PostgreSQL engine on a schema of this test's own (PostgreSQL-only tests)."""
    with _postgresql_scratch(_base_url("postgresql")) as url:
        yield from _engine(url)


@pytest.fixture
def postgresql_database_engine(postgresql_url: URL) -> Iterator[Engine]:
    """A PostgreSQL engine on a database of this test's own (dropped after it),
    for what reaches across a database: ``CREATE INDEX CONCURRENTLY`` waits for
    every older transaction in its database, another test's application in
    another schema included."""
    base = _base_url("postgresql")
    name = _scratch_name()
    admin = _admin(base)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield from _engine(base.set(database=name))
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=requires.online.databases())
def online_private_engine(request: pytest.FixtureRequest) -> Engine:
    """The same test once per database with an online mode (tests/requirements.py:
    PostgreSQL, MariaDB), on a schema/database of this test's own."""
    engine: Engine = request.getfixturevalue(f"{request.param}_private_engine")
    return engine


@pytest.fixture
def online_shop(online_private_engine: Engine) -> Engine:
    """``online_private_engine`` with the shop application's tables and rows
    (tests/online_app.py): ``shop s``, ``item``, ``review``."""
    from online_app import shop_schema

    shop_schema(online_private_engine)
    return online_private_engine


# --- one fixture per DBAPI driver ------------------------------------------------
# The same run's database through other drivers. A missing driver skips (fails
# under ``SQLA_IDS_REQUIRE_DIALECTS``), except the optional ones: mysqlclient is
# not in the test extra because it builds from source against libmariadb-dev.

MARIADB_DRIVERS = {"pymysql": "pymysql", "mysqlconnector": "mysql.connector", "mysqldb": "MySQLdb"}
"""SQLAlchemy driver name -> module, for ``mariadb_driver_engine``."""
ASYNC_DRIVERS = {
    "sqlite+aiosqlite": "aiosqlite",
    "postgresql+psycopg_async": "psycopg",
    "postgresql+asyncpg": "asyncpg",
}
"""Async SQLAlchemy dialect+driver -> module, for ``async_engine_factory``."""
OPTIONAL_DRIVERS = {
    "MySQLdb": "mysqlclient is optional (pip install 'sqla-ids[mysqlclient]', needs libmariadb-dev)"
}


def _require_driver(module: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as error:
        reason = OPTIONAL_DRIVERS.get(module) or f"driver {module} not installed: {error}"
        if module not in OPTIONAL_DRIVERS and _require_dialects():
            pytest.fail(f"SQLA_IDS_REQUIRE_DIALECTS is set and {reason}", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(params=list(MARIADB_DRIVERS))
def mariadb_driver_engine(request: pytest.FixtureRequest, mariadb_url: URL) -> Iterator[Engine]:
    """Engine on the run's MariaDB database, once per driver: PyMySQL,
    mysql-connector-python, mysqlclient (same URL scheme, driver swapped)."""
    driver: str = request.param
    _require_driver(MARIADB_DRIVERS[driver])
    yield from _engine(mariadb_url.set(drivername=f"{mariadb_url.get_backend_name()}+{driver}"))


@pytest.fixture(params=list(ASYNC_DRIVERS))
def async_engine_factory(request: pytest.FixtureRequest) -> Callable[[], AsyncEngine]:
    """Makes an ``AsyncEngine`` on the run's SQLite/PostgreSQL database, once
    per async driver: aiosqlite, psycopg, asyncpg.

    Call it inside the test's event loop and ``await engine.dispose()`` there.
    """
    drivername: str = request.param
    _require_driver(ASYNC_DRIVERS[drivername])
    backend = drivername.partition("+")[0]
    url: URL = request.getfixturevalue(f"{backend}_url")
    url = url.set(drivername=drivername)
    kwargs: dict[str, Any] = {}
    options = url.query.get("options")
    if drivername == "postgresql+asyncpg" and isinstance(options, str):
        # asyncpg takes settings as ``server_settings``, not libpq's ``options``.
        settings = dict(
            option.removeprefix("-c").split("=", 1) for option in options.split() if "=" in option
        )
        url = url.difference_update_query(["options"])
        kwargs["connect_args"] = {"server_settings": settings}
    return lambda: create_async_engine(url, **kwargs)


@pytest.fixture
def mariadb_private_engine(mariadb_url: URL) -> Iterator[Engine]:
    """A MariaDB engine on a database of this test's own (MariaDB-only tests)."""
    with _mariadb_scratch(_base_url("mariadb")) as url:
        yield from _engine(url)
