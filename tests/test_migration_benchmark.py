"""benchmarks/pk_migration.py runs end to end on tiny sizes (no timing assertions):
every mode on PostgreSQL and MariaDB, with its log bytes and the ratios to the
hand-written SQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from scripts import run_script
from sqlalchemy.engine import URL

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "pk_migration.py"


@pytest.mark.slow  # a benchmark script's smoke run
@pytest.mark.parametrize("server", ["postgresql_url", "mariadb_url"])
def test_pk_migration_benchmark_quick_run(server: str, request: pytest.FixtureRequest) -> None:
    url: URL = request.getfixturevalue(server)
    base = url.render_as_string(hide_password=False).split("?")[0]  # it makes its own schema
    args = ["--quick", "--sizes", "300", "--batch-size", "100", "--profile", "--url", base]
    out = run_script(SCRIPT, *args, timeout=300)
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("parents"))
    assert "vs hand" in header
    assert ("wal MB" in header) if server == "postgresql_url" else ("redo MB" in header)
    modes = [line.split()[1] for line in lines if line.startswith("300 ")]
    assert modes == ["hand", "offline", "online"], out
    assert "offline: SQL statements" in out
    assert "the online runner's steps" in out
