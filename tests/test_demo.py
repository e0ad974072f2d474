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
from sqla_ids.demo.tour import SAMPLE_KEY, SAMPLE_TWEAK, masked, run_tour

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


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
        assert SAMPLE_KEY not in text and "sqla-ids order-number decode --key demo" in text
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
    # The sample key is named and recognisable, never printed in full.
    for secret in (SAMPLE_KEY, SAMPLE_TWEAK):
        assert secret.lower() not in text.lower()
    assert masked(SAMPLE_KEY) in text and "SAMPLE key 'demo'" in text
    # No raw log lines (Alembic's "Context impl ..." and friends).
    assert "[alembic" not in text and "Context impl" not in text
    command = re.search(r"^\s+sqla-ids (order-number decode --key demo \S+)$", text, re.M)
    assert command, text
    expected = lines[lines.index(command.group(0)) + 2].strip()
    documented = _documented_sample_key()
    assert documented == {
        "SQLA_IDS_ORDER_KEY_DEMO": SAMPLE_KEY,
        "SQLA_IDS_ORDER_TWEAK_DEMO": SAMPLE_TWEAK,
    }
    for variable, value in documented.items():
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
