"""tests/requirements.py: the capabilities the tests rest on, read from the
migration backends and the database registry, and the skips they give."""

from __future__ import annotations

import pytest
import requirements as requires
import sqlalchemy as sa
from sqlalchemy.engine import URL

# What each test database can do, as docs/migration.md and the SPEC describe it.
# The shared online scenarios (tests/test_migration_online.py) run where
# ``online`` holds: a backend that lost its online mode would silently take
# them off that server, which this table catches.
EXPECTED = {
    requires.online: ["postgresql", "mariadb"],
    requires.commits_each_ddl: ["mariadb"],
    requires.offline_in_one_transaction: ["sqlite", "postgresql"],
    requires.view_dependencies: ["postgresql"],
    requires.function_in_default: ["sqlite", "postgresql"],
}


@pytest.mark.parametrize("capability", list(EXPECTED), ids=lambda c: c.what.split(" (")[0])
def test_each_capability_is_where_the_documentation_says(
    capability: requires.Capability,
) -> None:
    assert capability.databases() == EXPECTED[capability]


def _skip(capability: requires.Capability, name: str) -> str | None:
    """The reason ``skip_unless`` skips with on test database ``name`` (``None``: it does not)."""
    try:
        capability.skip_unless(name)
    except pytest.skip.Exception as skipped:
        return str(skipped.msg)
    return None


def test_a_test_needing_an_online_mode_is_skipped_on_sqlite_with_the_reason() -> None:
    assert _skip(requires.online, "sqlite") == (
        "needs an online mode (the application writes while the key changes), which SQLite"
        " does not have (SQLiteBackend.online is None)"
    )
    assert _skip(requires.online, "postgresql") is None
    assert _skip(requires.online, "mariadb") is None


def test_a_half_done_step_is_skipped_where_ddl_is_transactional() -> None:
    reason = _skip(requires.commits_each_ddl, "postgresql")
    assert reason is not None and "which PostgreSQL does not have" in reason
    assert "(PostgreSQLBackend.transactional_ddl is True: its DDL is rolled back" in reason
    assert _skip(requires.commits_each_ddl, "mariadb") is None


def test_the_registry_answers_for_the_dialect_registry_capabilities() -> None:
    assert requires.function_in_default.reason("mariadb").endswith(
        "(MariaDB.function_in_default is False: a BEFORE INSERT trigger fills the key)"
    )


def test_an_unknown_test_database_is_named() -> None:
    with pytest.raises(ValueError, match=r"no test database 'oracle' \(there are: sqlite, "):
        requires.online("oracle")


def test_a_mysql_url_on_mariadb_is_mariadb_before_its_first_connection(
    mariadb_url: URL,
) -> None:
    """``mysql+pymysql://`` learns that the server is MariaDB when it connects:
    asked before that, the helpers connect first (else MySQL, refused)."""
    engine = sa.create_engine(mariadb_url)
    try:
        assert engine.dialect.server_version_info is None
        assert requires.database_name(engine) == "mariadb"
        assert requires.online(engine) and requires.commits_each_ddl(engine)
    finally:
        engine.dispose()
