"""``--url`` on the command line: passwords masked, drivers named, typos refused.

Issue 14, items 7 (passwords), 8 (missing SQLite file or schema) and 9
(missing driver).
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

from sqla_ids.cli import database, main

SECRET = "Hunter2-s3cret"
VALUE = "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"

COMMANDS = {
    "find": ["find", VALUE],
    "relations": ["relations"],
    "bench": ["bench", "--writers", "1", "--rows", "1000"],
    "demo": ["demo", "--customers", "1", "--orders", "1"],
}

# Each fails before a single statement runs: nothing listens on port 1.
FAILING_URLS = [
    f"postgresql+psycopg://postgres:{SECRET}@127.0.0.1:1/test",
    f"mysql+pymysql://root:{SECRET}@127.0.0.1:1/test",
    f"postgresql+psycopg://postgres@127.0.0.1:1/test?password={SECRET}",
    f"postgresql+psycopg://postgres:{SECRET}@127.0.0.1:port/test",  # not a port number
    f"mysql+nodriver://root:{SECRET}@127.0.0.1:1/test",  # no such driver
    f"nosuchdb://root:{SECRET}@127.0.0.1:1/test",  # no such database
    "postgresql+psycopg://postgres:Hunter2%2Ds3cret@127.0.0.1:1/test",  # percent-encoded
]


@pytest.mark.parametrize("url", FAILING_URLS)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_password_never_shown(
    command: str,
    url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*COMMANDS[command], "--url", url]) == 2
    out, err = capsys.readouterr()
    assert f"sqla-ids {command}: error:" in err
    assert "***" in err or "://" not in err  # the URL, when shown, is masked
    assert SECRET not in out + err and "Hunter2" not in out + err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_password_never_shown_when_the_driver_is_missing(
    command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "MySQLdb", None)  # mysqlclient: not installed
    url = f"mysql://root:{SECRET}@127.0.0.1:1/test"
    assert main([*COMMANDS[command], "--url", url]) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err
    assert "mysql://root:***@127.0.0.1:1/test" in err


@pytest.mark.parametrize(
    ("url", "blocked", "extra", "form"),
    [
        ("mysql://root@127.0.0.1/test", "MySQLdb", "mysql", "mysql+pymysql://"),
        ("mariadb://root@127.0.0.1/test", "MySQLdb", "mysql", "mariadb+pymysql://"),
        ("mysql+pymysql://root@127.0.0.1/test", "pymysql", "mysql", None),
        ("postgresql+psycopg://postgres@127.0.0.1/test", "psycopg", "postgresql", None),
        ("postgresql+psycopg2://postgres@127.0.0.1/test", "psycopg2", "postgresql", "+psycopg://"),
    ],
)
@pytest.mark.parametrize("command", ["find", "relations"])
def test_missing_driver_names_the_extra_and_the_url_form(
    command: str,
    url: str,
    blocked: str,
    extra: str,
    form: str | None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)
    assert main([*COMMANDS[command], "--url", url]) == 2
    err = capsys.readouterr().err
    assert "needs a database driver" in err and f"pip install 'sqla-ids[{extra}]'" in err
    if form:
        assert form in err


def test_postgres_spelling_points_to_postgresql(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["find", VALUE, "--url", "postgres://me@db/shop"]) == 2
    err = capsys.readouterr().err
    assert "postgresql+psycopg://" in err and "sqla-ids[postgresql]" in err


# -- missing SQLite file or schema (item 8) ----------------------------------------------


@pytest.mark.parametrize("command", ["find", "relations"])
def test_missing_sqlite_file_is_an_error_and_is_not_created(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*COMMANDS[command], "--url", "sqlite:///typo.db"]) == 2
    assert main([*COMMANDS[command], "--url", f"sqlite:///{tmp_path / 'no' / 'such.db'}"]) == 2
    err = capsys.readouterr().err
    assert "'typo.db' does not exist" in err and "such.db' does not exist" in err
    assert list(tmp_path.iterdir()) == []
    assert main([*COMMANDS[command], "--url", f"sqlite:///{tmp_path}"]) == 2
    assert "is not a file" in capsys.readouterr().err


def test_in_memory_sqlite_is_still_fine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["relations", "--url", "sqlite://"]) == 0


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql", "mariadb"])
@pytest.mark.parametrize("command", ["find", "relations"])
def test_missing_schema_is_an_error(
    command: str, dialect: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = request.getfixturevalue(f"{dialect}_engine")
    with engine.connect():  # creates the SQLite file
        pass
    url: URL = engine.url
    text = url.render_as_string(hide_password=False)
    assert main([*COMMANDS[command], "--url", text, "--schema", "nope_sqla_ids"]) == 2
    err = capsys.readouterr().err
    assert "schema 'nope_sqla_ids' does not exist" in err
    status = main([*COMMANDS[command], "--url", text, "--schema", _default_schema(dialect, url)])
    assert status in (0, 1)  # found or not found, but looked


def _default_schema(dialect: str, url: URL) -> str:
    if dialect == "sqlite":
        return "main"
    if dialect == "mariadb":
        assert url.database
        return url.database
    return str(url.query["options"]).split("=")[1].split(",")[0]  # the run's schema


def test_doctests_of_the_url_helpers() -> None:
    results = doctest.testmod(database, optionflags=doctest.ELLIPSIS)
    assert results.attempted >= 5 and results.failed == 0
