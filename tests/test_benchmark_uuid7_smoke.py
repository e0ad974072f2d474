"""The UUIDv7 benchmark script runs and prints its tables (no timing assertions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "uuid7_generation.py"


def test_uuid7_benchmark_quick_run(tmp_path: Path) -> None:
    svg = tmp_path / "chart.svg"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--svg", str(svg)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    for row in ("sqla_ids.uuid7()", "uuid.uuid4()", "uuid6.uuid7()", "uuid_utils.compat.uuid7()"):
        assert row in result.stdout
    assert "sqla_ids.uuid7_batch(20,000)" in result.stdout
    assert svg.read_text().startswith("<svg") and "M/s" in svg.read_text()
