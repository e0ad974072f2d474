"""benchmarks/pk_migration.py runs end to end on tiny sizes (no timing assertions):
every mode on PostgreSQL and MariaDB, with its log bytes and the ratios to the
hand-written SQL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "pk_migration.py"


@pytest.mark.slow  # a benchmark script's smoke run
@pytest.mark.parametrize("server", ["postgresql_url", "mariadb_url"])
def test_pk_migration_benchmark_quick_run(server: str, request: pytest.FixtureRequest) -> None:
    url: URL = request.getfixturevalue(server)
    base = url.render_as_string(hide_password=False).split("?")[0]  # it makes its own schema
    args = ["--quick", "--sizes", "300", "--batch-size", "100", "--profile", "--url", base]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    lines = result.stdout.splitlines()
    header = next(line for line in lines if line.startswith("parents"))
    assert "vs hand" in header
    assert ("wal MB" in header) if server == "postgresql_url" else ("redo MB" in header)
    modes = [line.split()[1] for line in lines if line.startswith("300 ")]
    assert modes == ["hand", "offline", "online"], result.stdout
    assert "offline: SQL statements" in result.stdout
    assert "the online runner's steps" in result.stdout
