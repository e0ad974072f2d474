"""``find_uuid`` / ``sqla-ids find`` on real SQLite, PostgreSQL and MariaDB databases."""

from __future__ import annotations

import json
import uuid as uuid_module
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.cli import main
from sqla_ids.dialects import UnsupportedDialectError, for_dialect
from sqla_ids.identifiers import UUIDFormatError, to_base32, uuid7, uuid7_batch
from sqla_ids.tools.find import ABSENT, FOUND, SKIPPED, find_uuid, format_report

TARGET = uuid7()
OTHERS = uuid7_batch(3)

# Per dialect: extra DDL for storage forms only that database has, the rows to
# insert, and the (table, column) pairs that must be reported.
EXTRA: dict[str, tuple[list[str], list[str], set[tuple[str, str]]]] = {
    "postgresql": (
        ["CREATE TABLE fx_pg (id serial PRIMARY KEY, ids uuid[], tags text[], doc jsonb)"],
        [
            f"INSERT INTO fx_pg (ids, tags, doc) VALUES "
            f"(ARRAY['{OTHERS[0]}'::uuid, '{TARGET}'::uuid], ARRAY['x'], '{{\"a\": 1}}'),"
            f"(ARRAY['{OTHERS[1]}'::uuid], ARRAY['y', '{TARGET.hex.upper()}'],"
            f' \'{{"deep": {{"ref": "{TARGET}"}}}}\')'
        ],
        {("fx_pg", "ids"), ("fx_pg", "tags"), ("fx_pg", "doc")},
    ),
    "mariadb": (
        [
            "CREATE TABLE fx_my (id int AUTO_INCREMENT PRIMARY KEY, native uuid,"
            " raw binary(16), doc json)"
        ],
        [
            f"INSERT INTO fx_my (native, raw, doc) VALUES "
            f"('{TARGET}', NULL, '[\"{OTHERS[0]}\"]'),"
            f"('{OTHERS[1]}', X'{TARGET.hex}', '{{\"ref\": \"{str(TARGET).upper()}\"}}')"
        ],
        {("fx_my", "native"), ("fx_my", "raw"), ("fx_my", "doc")},
    ),
    "sqlite": (
        ["CREATE TABLE fx_lite (id integer PRIMARY KEY, anything uuid, doc json)"],
        [
            f"INSERT INTO fx_lite (anything, doc) VALUES "
            f"(X'{TARGET.hex}', '{{\"ref\": \"{TARGET.hex}\"}}'), ('{OTHERS[0]}', NULL)"
        ],
        {("fx_lite", "anything"), ("fx_lite", "doc")},
    ),
}


def _dialect_key(engine: Engine) -> str:
    return "mariadb" if engine.dialect.name in ("mysql", "mariadb") else engine.dialect.name


def _rows(*rows: dict[str, Any]) -> list[dict[str, Any]]:
    names = {name for row in rows for name in row}
    return [{name: row.get(name) for name in names} for row in rows]


@pytest.fixture
def shop(engine: Engine, metadata: sa.MetaData) -> Iterator[tuple[Engine, set[tuple[str, str]]]]:
    """Tables holding ``TARGET`` in generic storage forms plus the dialect's own ones."""
    customers = sa.Table(
        "fx_customers",
        metadata,
        sa.Column("id", sa.Uuid(), primary_key=True),
        sa.Column("name", sa.String(40)),
    )
    orders = sa.Table(
        "fx_orders",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("customer_ref", sa.CHAR(36)),
        sa.Column("customer_hex", sa.String(32)),
        sa.Column("raw", sa.LargeBinary()),
        sa.Column("note", sa.Text()),
        sa.Column("amount", sa.Integer),
    )
    unrelated = sa.Table(
        "fx_unrelated",
        metadata,
        sa.Column("code", sa.String(36), primary_key=True),
    )
    metadata.create_all(engine)
    key = _dialect_key(engine)
    ddl, inserts, extra_expected = EXTRA[key]
    with engine.begin() as conn:
        conn.execute(
            customers.insert(), [{"id": TARGET, "name": "Ada"}, {"id": OTHERS[0], "name": None}]
        )
        conn.execute(
            orders.insert(),
            _rows(
                {"id": 1, "customer_ref": str(TARGET), "customer_hex": None, "note": "plain"},
                {"id": 2, "customer_ref": str(OTHERS[0]), "customer_hex": TARGET.hex.upper()},
                {"id": 3, "raw": TARGET.bytes, "note": f"see {to_base32(TARGET)} for details"},
                {"id": 4, "customer_ref": str(TARGET), "amount": 5},
            ),
        )
        conn.execute(unrelated.insert(), [{"code": str(OTHERS[2])}])
        for statement in [*ddl, *inserts]:
            conn.exec_driver_sql(statement)
    expected = {
        ("fx_customers", "id"),
        ("fx_orders", "customer_ref"),
        ("fx_orders", "customer_hex"),
        ("fx_orders", "raw"),
        ("fx_orders", "note"),
        *extra_expected,
    }
    yield engine, expected
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {ddl[0].split()[2]}")


def _found(report: Any) -> set[tuple[str, str]]:
    return {(m.table, m.column) for m in report.matches if m.table.startswith("fx_")}


@pytest.mark.parametrize(
    "spelling",
    [str(TARGET), TARGET.hex.upper(), "{" + str(TARGET).upper() + "}", to_base32(TARGET)],
    ids=["canonical", "hex-upper", "braced", "base32"],
)
def test_finds_every_storage_form(shop: tuple[Engine, set[tuple[str, str]]], spelling: str) -> None:
    engine, expected = shop
    report = find_uuid(engine, spelling)
    assert report.value == TARGET
    assert _found(report) == expected
    assert report.complete and not report.interrupted
    by_column = {(m.table, m.column): m for m in report.matches}
    ref = by_column["fx_orders", "customer_ref"]
    assert ref.key_columns == ("id",)
    assert sorted(ref.keys) == [("1",), ("4",)]
    scanned = {(s.table, s.column): s.status for s in report.scanned}
    assert scanned["fx_unrelated", "code"] == ABSENT
    assert ("fx_orders", "amount") not in scanned  # integers cannot hold a UUID
    assert all(scanned[column] == FOUND for column in expected)


def test_explicit_schema(shop: tuple[Engine, set[tuple[str, str]]]) -> None:
    engine, expected = shop
    with engine.connect() as conn:
        schema = sa.inspect(conn).default_schema_name
    report = find_uuid(engine, TARGET, schema=schema)
    assert report.schema == schema
    assert _found(report) == expected


def test_absent_uuid_reports_what_was_scanned(shop: tuple[Engine, set[tuple[str, str]]]) -> None:
    engine, expected = shop
    report = find_uuid(engine, uuid_module.uuid4().bytes)
    assert report.matches == []
    assert report.complete
    assert {(s.table, s.column) for s in report.scanned} >= expected
    assert "not found" in format_report(report)


def test_limit_rows_truncates(shop: tuple[Engine, set[tuple[str, str]]]) -> None:
    engine, _ = shop
    report = find_uuid(engine, TARGET, tables=["fx_orders"], limit_rows=1)
    ref = next(m for m in report.matches if m.column == "customer_ref")
    assert ref.truncated and len(ref.keys) == 1 and ref.rows == "1+"
    assert {s.table for s in report.scanned} == {"fx_orders"}


def test_interrupt_returns_partial_report(shop: tuple[Engine, set[tuple[str, str]]]) -> None:
    engine, _ = shop
    seen: list[str] = []

    def stop_after_two(scanned: Any) -> None:
        seen.append(scanned.column)
        if len(seen) == 2:
            raise KeyboardInterrupt

    report = find_uuid(engine, TARGET, progress=stop_after_two)
    assert report.interrupted and not report.complete
    statuses = [s.status for s in report.scanned]
    assert statuses[:2] != [SKIPPED, SKIPPED]
    assert set(statuses[2:]) == {SKIPPED}
    assert len(report.scanned) > 2


def test_time_budget_skips_the_rest(shop: tuple[Engine, set[tuple[str, str]]]) -> None:
    engine, _ = shop
    # Only this fixture's tables: other tests' tables in the schema would use
    # up the budget before the matching columns are reached.
    own = [t for t in sa.inspect(engine).get_table_names() if t.startswith("fx_")]
    ticks = iter(range(1000))  # a fake clock: one second per reading
    report = find_uuid(engine, TARGET, tables=own, timeout=4, clock=lambda: float(next(ticks)))
    statuses = [s.status for s in report.scanned]
    assert SKIPPED in statuses and FOUND in statuses
    assert not report.complete
    assert "time budget" in next(s.detail for s in report.scanned if s.status == SKIPPED)


SLOW_QUERY = {
    "postgresql": "SELECT pg_sleep(5)",
    "mariadb": "SELECT SLEEP(5)",
    "sqlite": "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c"
    " WHERE n < 1000000000) SELECT count(*) FROM c",
}


def test_server_side_time_limit_cancels_a_statement(engine: Engine) -> None:
    with engine.connect() as conn, conn.begin():
        sql = for_dialect(conn.dialect).scanning()
        with pytest.raises(sa.exc.DBAPIError) as caught, sql.time_limit(conn, 0.2):
            conn.exec_driver_sql(SLOW_QUERY[_dialect_key(engine)]).all()
        assert sql.is_timeout(caught.value)


def test_bad_input_is_rejected_before_connecting() -> None:
    unusable = sa.create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    with pytest.raises(UUIDFormatError, match="not a UUID"):
        find_uuid(unusable, "not-a-uuid")
    with pytest.raises(ValueError, match="limit_rows"):
        find_uuid(unusable, TARGET, limit_rows=0)


def test_unsupported_dialect_is_named() -> None:
    with pytest.raises(UnsupportedDialectError, match=r"searching for UUIDs .* SQL Server"):
        for_dialect("mssql").scanning()
    with pytest.raises(UnsupportedDialectError, match="oracle"):
        for_dialect("oracle").scanning()


def test_unknown_table_is_an_error(sqlite_engine: Engine) -> None:
    with pytest.raises(ValueError, match="no table"):
        find_uuid(sqlite_engine, TARGET, tables=["fx_nope"])


def test_cli_find_json_and_table(
    shop: tuple[Engine, set[tuple[str, str]]], capsys: pytest.CaptureFixture[str]
) -> None:
    engine, expected = shop
    url = engine.url.render_as_string(hide_password=False)
    assert main(["find", TARGET.hex, "--url", url, "--json", "--limit-rows", "5"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["value"] == str(TARGET) and document["complete"] is True
    assert {(m["table"], m["column"]) for m in document["matches"]} >= expected
    assert main(["find", str(TARGET), "--url", url, "--timeout", "30"]) == 0
    text = capsys.readouterr().out
    assert "fx_orders" in text and "customer_ref" in text and "complete" in text
    assert main(["find", str(uuid_module.uuid4()), "--url", url]) == 1  # like grep
    assert "not found" in capsys.readouterr().out


def test_cli_find_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["find", "xyz", "--url", "sqlite://"]) == 2
    assert "not a UUID" in capsys.readouterr().err
    assert main(["find", str(TARGET), "--url", "nonsense://"]) == 2
    assert "--url" in capsys.readouterr().err
    unreachable = "postgresql+psycopg://nobody@127.0.0.1:1/none"
    assert main(["find", str(TARGET), "--url", unreachable]) == 2
    assert "cannot use the database" in capsys.readouterr().err
    assert main(["find", str(TARGET), "--url", "mssql+pyodbc://u@dsn"]) == 2
    assert "mssql" in capsys.readouterr().err  # driver missing or dialect unsupported
    assert main(["find", str(TARGET), "--url", "sqlite://", "--limit-rows", "0"]) == 2
    assert "--limit-rows" in capsys.readouterr().err
