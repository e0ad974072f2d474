"""benchmarks/online_migration.py runs end to end on a tiny size (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import URL

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "online_migration.py"


@pytest.mark.slow
def test_online_benchmark_quick(postgresql_url: URL) -> None:
    url = postgresql_url.render_as_string(hide_password=False)
    base = url.split("?")[0]  # the script makes its own schema
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--url", base],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "relationships after the run  OK" in result.stdout
    assert "failed statements            0" in result.stdout
