"""``sqla-ids bench``: the insert benchmark on a real database (no timing assertions).

Each run uses tiny sizes; what is checked is the shape of the result, the
ratios' arithmetic, and that the scratch area goes while the user's own
tables stay exactly as they were.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import URL, Engine

from sqla_ids.cli import main
from sqla_ids.identifiers import Layout
from sqla_ids.tools.insert_benchmark import clock_drift_ms, keys_at_rate, scratch_area
from sqla_ids.tools.layout_benchmark import counter_bits_for

DIALECTS = ["postgresql", "mariadb", "sqlite"]
LAYOUTS = ["default", "no-counter"]
RATES = [1, 64]


def _user_table(engine: Engine) -> sa.Table:
    table = sa.Table(
        "customers_bench_guard",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(20)),
    )
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}])
    return table


def _scratch_exists(dialect: str, engine: Engine, url: URL, name: str) -> bool:
    if dialect == "sqlite":
        folder = Path(url.database or "").parent
        return any(path.name.startswith(name) for path in folder.iterdir())
    with engine.connect() as conn:
        found = conn.execute(
            sa.text("SELECT count(*) FROM information_schema.schemata WHERE schema_name = :n"),
            {"n": name},
        ).scalar_one()
    return bool(found)


def _bench(capsys: pytest.CaptureFixture[str], url: URL, *options: str) -> tuple[int, str, str]:
    status = main(["bench", "--url", url.render_as_string(hide_password=False), *options])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.slow
@pytest.mark.parametrize("dialect", DIALECTS)
def test_bench_json_on_each_dialect(
    dialect: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    url: URL = request.getfixturevalue(f"{dialect}_url")
    engine: Engine = request.getfixturevalue(f"{dialect}_engine")
    user_table = _user_table(engine)
    tables_before = sorted(sa.inspect(engine).get_table_names())
    # Concurrent writers spawn processes: measured once (PostgreSQL), skipped on SQLite.
    writers = {"postgresql": "2", "mariadb": "1", "sqlite": "2"}[dialect]
    status, out, _ = _bench(
        capsys,
        url,
        "--rows",
        "300",
        "--rates",
        ",".join(map(str, RATES)),
        "--writers",
        writers,
        "--layouts",
        ",".join(LAYOUTS),
        "--json",
    )
    assert status == 0
    report: dict[str, Any] = json.loads(out)
    assert report["rates"] == RATES and report["layouts"] == LAYOUTS
    results = report["results"]
    singles = [row for row in results if row["writers"] == 1]
    assert [row["key"] for row in singles[:2]] == ["bigint", "UUIDv4"]
    measured = {(row["layout"], row["rows_per_ms"]) for row in singles if row["layout"]}
    assert measured == {(layout, rate) for layout in LAYOUTS for rate in RATES}
    assert any(row["key"] == "UUIDv7 server fn" for row in singles)

    # Ratios are to bigint measured in the same run, with the same number of writers.
    for group in {row["writers"] for row in results}:
        rows = [row for row in results if row["writers"] == group]
        bigint = rows[0]
        assert bigint["key"] == "bigint" and bigint["time_ratio"] == 1.0
        for row in rows:
            assert row["rows"] == 300
            assert row["time_ratio"] == pytest.approx(row["seconds"] / bigint["seconds"], rel=1e-3)
            if bigint["index_bytes"] and row["index_bytes"] is not None:
                expected = row["index_bytes"] / bigint["index_bytes"]
                assert row["size_ratio"] == pytest.approx(expected, rel=1e-3)
    if dialect == "postgresql":
        assert all(row["leaf_density"] is not None for row in results)
        assert {row["writers"] for row in results} == {1, 2}
    if dialect == "sqlite":
        assert any("concurrent writers" in reason for reason in report["skipped"])

    # A counter keeps the stored times on the clock; no counter runs ahead at 64 rows/ms.
    drift = {(row["layout"], row["rows_per_ms"]): row["clock_drift_ms"] for row in singles}
    assert drift[("default", 64)] == 0 and drift[("no-counter", 64)] > 0
    assert "'default'" in report["recommendation"]

    # The scratch area is gone; the user's tables and rows are as they were.
    assert not _scratch_exists(dialect, engine, url, report["scratch"])
    assert sorted(sa.inspect(engine).get_table_names()) == tables_before
    with engine.connect() as conn:
        rows_now = conn.execute(sa.select(user_table).order_by(user_table.c.id)).all()
    assert [tuple(row) for row in rows_now] == [(1, "Ada"), (2, "Bob")]
    user_table.drop(engine)


@pytest.mark.slow  # a whole benchmark run (the JSON runs, per dialect, are slow too)
def test_bench_text_output(sqlite_url: URL, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _bench(capsys, sqlite_url, "--rows", "200", "--rates", "1,512")
    assert status == 0
    assert "ratios to bigint" in out and "drift ms" in out
    for key in ("bigint", "UUIDv4", "UUIDv7 default", "UUIDv7 cpython314", "UUIDv7 no-counter"):
        assert f"\n{key} " in out
    assert out.strip().splitlines()[-1].startswith("recommendation: layout 'default'")


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("mssql+pyodbc://u:p@host/db", [], "insert benchmark is not supported on SQL Server"),
        ("oracle://u:p@host/db", [], "not supported"),
        ("not a url", [], "not a usable database URL"),
        ("postgresql+psycopg://postgres@127.0.0.1:1/test", [], "cannot use the database"),
        ("sqlite://", ["--layouts", "default,bogus"], "unknown layout 'bogus'"),
        ("sqlite://", ["--rates", "1,fast"], "--rates must be"),
        ("sqlite://", ["--rates", "0"], "rates must be"),
        ("sqlite://", ["--rows", "1"], "rows must be at least"),
    ],
)
def test_bench_user_errors(
    url: str, options: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "--url", url, *options]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("per_ms", [1, 64, 4096, 20_000])
def test_counter_sized_for_the_rate_never_drifts(per_ms: int) -> None:
    bits = counter_bits_for(per_ms)
    assert bits >= 1 and (1 << bits) - (1 << (bits - 1)) >= per_ms
    keys = keys_at_rate(Layout(bits, 1), 3 * per_ms, per_ms)
    assert clock_drift_ms(keys, per_ms) == 0
    assert keys == sorted(keys)
    if per_ms > 1:
        assert clock_drift_ms(keys_at_rate(Layout.NO_COUNTER, 3 * per_ms, per_ms), per_ms) > 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_scratch_area_is_dropped_on_error(dialect: str, request: pytest.FixtureRequest) -> None:
    url: URL = request.getfixturevalue(f"{dialect}_url")
    engine: Engine = request.getfixturevalue(f"{dialect}_engine")
    with pytest.raises(KeyboardInterrupt), scratch_area(url) as scratch:
        with scratch.engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE half_done (id INTEGER PRIMARY KEY)")
        assert scratch.server_function_error is None
        assert _scratch_exists(dialect, engine, url, scratch.name)
        raise KeyboardInterrupt  # the user pressed Ctrl-C mid-run
    assert not _scratch_exists(dialect, engine, url, scratch.name)
