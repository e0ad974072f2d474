"""benchmarks/pk_migration.py runs end to end on tiny sizes (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy.engine import URL

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "pk_migration.py"


def test_pk_migration_benchmark_quick_run(postgresql_url: URL) -> None:
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--parents",
            "300",
            "--children",
            "600",
            "--batch-size",
            "100",
            "--url",
            postgresql_url.render_as_string(hide_password=False),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "hand-written SQL" in result.stdout and "sqla_ids" in result.stdout
    assert "peak lock s" in result.stdout
