"""benchmarks/online_migration.py runs end to end on a tiny size, on PostgreSQL and
MariaDB (no timing assertions): the migration and the online downgrade, each with
the application running, no failed statement and every relationship checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import requirements as requires
from sqlalchemy.engine import URL

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "online_migration.py"


def _run(url: URL, *options: str) -> list[str]:
    """The script's output lines, run ``--quick`` with ``options`` (it must succeed)."""
    base = url.render_as_string(hide_password=False).split("?")[0]  # it makes its own schema
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", *options, "--url", base],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("server", requires.online.databases())
def test_online_benchmark_quick(server: str, request: pytest.FixtureRequest) -> None:
    lines = _run(request.getfixturevalue(f"{server}_url"))
    checked = next(line for line in lines if line.startswith("relationships after it"))
    assert checked.count("OK (") == 2, checked  # after the migration and after the downgrade
    failed = next(line for line in lines if line.startswith("failed statements"))
    assert failed.split()[2:] == ["0", "0"], failed


@pytest.mark.slow
def test_online_benchmark_quick_with_two_application_versions(postgresql_url: URL) -> None:
    """``--versions``: the old code on *before* throughout, the new code on *after*
    from the prepare's end; both write, none fails, every child of either checked."""
    lines = _run(postgresql_url, "--online-only", "--versions")
    statements = next(line for line in lines if line.startswith("application statements"))
    assert "by the new code" in statements, statements
    checked = next(line for line in lines if line.startswith("relationships after it"))
    assert checked.count("OK (") == 2, checked
    failed = next(line for line in lines if line.startswith("failed statements"))
    assert failed.split()[2:] == ["0", "0"], failed
