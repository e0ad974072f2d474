"""``sqla-ids demo``: the whole tour on each dialect, twice (idempotent)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids import UUIDv7, uuid7_datetime
from sqla_ids.cli import main
from sqla_ids.demo.tour import SAMPLE_KEY, SAMPLE_TWEAK, run_tour

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


@pytest.mark.slow_on("mariadb")  # the quick loop tours SQLite and PostgreSQL
def test_tour_on_each_dialect_twice(engine: Engine, capsys: pytest.CaptureFixture[str]) -> None:
    url = engine.url
    for run in (1, 2):
        lines: list[str] = []
        run_tour(url, customers=6, orders=40, out=lines.append)
        printed = capsys.readouterr()
        text = "\n".join([*lines, printed.out, printed.err])
        assert "revenue per customer through the new keys matches the bigint keys" in text
        assert ("found an earlier demo" in text) == (run == 2)
        assert "Context impl" not in text and "Running upgrade" not in text  # no raw log lines
        assert f"export SQLA_IDS_ORDER_KEY_DEMO={SAMPLE_KEY}" in text  # whole, to copy
        assert "sqla-ids order-number decode --key demo" in text
        # A note common to the three tables is said once, naming them.
        assert text.count("gets no server default") <= 1
    demo_orders = sa.table(
        "demo_orders",
        sa.column("id", UUIDv7()),
        sa.column("id_old", sa.BigInteger()),
        sa.column("number", sa.String()),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    with engine.connect() as conn:
        orders = conn.execute(sa.select(demo_orders)).all()
        lines_count = conn.execute(sa.text("SELECT count(*) FROM demo_order_lines")).scalar()
    assert len(orders) == 43  # 40 migrated + 3 added through the ORM
    assert all(r.id.version == 7 for r in orders)
    migrated = sorted((r for r in orders if r.id_old is not None), key=lambda r: r.id_old)
    assert [r.id_old for r in migrated] == list(range(1, 41))
    # New keys sort like the old ones, and carry each order's creation time.
    assert [r.id for r in migrated] == sorted(r.id for r in migrated)
    for row in migrated:
        created = row.created_at.replace(tzinfo=None)
        assert abs(uuid7_datetime(row.id).replace(tzinfo=None) - created) < timedelta(seconds=1)
    assert len({r.number for r in orders}) == 43 and lines_count and lines_count > 43


def test_demo_command_on_default_sqlite_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["demo", "--customers", "5", "--orders", "20"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "sqla_ids_demo.sqlite3").exists()
    assert "matches the bigint keys" in out and UUID_RE.search(out)


def test_demo_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--orders", "0"]) == 2
    assert "--customers must be 1…100,000 and --orders 1…1,000,000" in capsys.readouterr().err
    assert main(["demo", "--url", "nosuchdb://x"]) == 2
    assert "--url nosuchdb://x is not a usable database URL" in capsys.readouterr().err


def _documented_sample_key() -> dict[str, str]:
    """The ``export`` lines of docs/index.md's "The demo" section."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "index.md").read_text()
    section = page.split("## The demo", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"export (SQLA_IDS_ORDER_\w+)=(\w+)", section))


def test_tour_numbers_decode_with_the_documented_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines: list[str] = []
    run_tour(f"sqlite:///{tmp_path / 'decode.sqlite3'}", customers=3, orders=10, out=lines.append)
    text = "\n".join(lines)
    assert "SAMPLE key 'demo'" in text
    # No raw log lines (Alembic's "Context impl ..." and friends).
    assert "[alembic" not in text and "Context impl" not in text
    command = re.search(r"^\s+sqla-ids (order-number decode --key demo \S+)$", text, re.M)
    assert command, text
    expected = lines[lines.index(command.group(0)) + 2].strip()
    # The tour prints the published sample key whole, as the lines to copy,
    # the same as docs/index.md's.
    printed = dict(re.findall(r"^\s+export (SQLA_IDS_ORDER_\w+)=(\w+)", text, re.M))
    documented = _documented_sample_key()
    assert (
        printed
        == documented
        == {
            "SQLA_IDS_ORDER_KEY_DEMO": SAMPLE_KEY,
            "SQLA_IDS_ORDER_TWEAK_DEMO": SAMPLE_TWEAK,
        }
    )
    for variable, value in printed.items():
        monkeypatch.setenv(variable, value)
    capsys.readouterr()
    assert main(command.group(1).split()) == 0
    assert capsys.readouterr().out.strip() == expected
    assert expected.endswith("\t13")  # the last of 10 migrated + 3 new orders


def test_documented_decode_example_matches_the_sample_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable, value in _documented_sample_key().items():
        monkeypatch.setenv(variable, value)
    page = (Path(__file__).resolve().parent.parent / "docs" / "index.md").read_text()
    number = re.search(r"sqla-ids order-number decode --key demo (\S+)", page)
    assert number
    assert main(["order-number", "decode", "--key", "demo", number.group(1)]) == 0
    assert capsys.readouterr().out == f"{number.group(1)}\t23\n"


def _objects(conn: sa.Connection) -> dict[str, list[str]]:
    """Tables, sequences and routines of the connection's current schema/database."""
    inspector = sa.inspect(conn)
    found = {"tables": sorted(inspector.get_table_names())}
    if conn.dialect.name == "postgresql":
        found["sequences"] = sorted(inspector.get_sequence_names())
        found["routines"] = sorted(
            conn.exec_driver_sql(
                "SELECT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace"
            ).scalars()
        )
    elif conn.dialect.name != "sqlite":
        found["sequences"] = sorted(inspector.get_sequence_names())
        found["routines"] = sorted(
            conn.exec_driver_sql(
                "SELECT ROUTINE_NAME FROM information_schema.ROUTINES"
                " WHERE ROUTINE_SCHEMA = DATABASE()"
            ).scalars()
        )
    return found


@pytest.mark.slow_on("mariadb")  # the quick loop cleans up on SQLite and PostgreSQL
def test_clean_removes_what_the_demo_made_and_nothing_else(
    private_engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    """``sqla-ids demo --url … --clean``: the tables, mapping tables, sequence,
    version table, state table and UUIDv7 function go; a table of the user's
    whose name starts like the demo's stays."""
    engine = private_engine
    mine = sa.Table("demo_accounts", sa.MetaData(), sa.Column("id", sa.Integer, primary_key=True))
    mine.create(engine)
    with engine.connect() as conn:
        before = _objects(conn)
    run_tour(engine.url, customers=4, orders=12, out=lambda line: None)
    with engine.connect() as conn:
        during = _objects(conn)
    assert {"demo_orders", "demo_orders_uuid7_map", "sqla_ids_pk_migrations"} <= set(
        during["tables"]
    )
    assert "sqla_ids_uuid7" in during.get("routines", ["sqla_ids_uuid7"])  # not on SQLite
    url = engine.url.render_as_string(hide_password=False)
    assert main(["demo", "--url", url, "--clean"]) == 0
    out = capsys.readouterr().out
    assert "removed demo_customers, demo_customers_uuid7_map" in out
    with engine.connect() as conn:
        assert _objects(conn) == before  # demo_accounts (the user's) included
    assert main(["demo", "--url", url, "--clean"]) == 0  # nothing left: says so
    assert "no demo tables found" in capsys.readouterr().out


def test_the_end_of_the_tour_says_how_to_clean_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'shop.sqlite3'}"
    assert main(["demo", "--url", url, "--customers", "3", "--orders", "6"]) == 0
    out = capsys.readouterr().out
    assert "`sqla-ids demo --url URL --clean` removes it" in out
