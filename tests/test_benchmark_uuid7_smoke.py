"""The UUIDv7 benchmark script runs and prints its tables (no timing assertions)."""

from __future__ import annotations

from pathlib import Path

from scripts import run_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "uuid7_generation.py"


def test_uuid7_benchmark_quick_run(tmp_path: Path) -> None:
    svg = tmp_path / "chart.svg"
    out = run_script(SCRIPT, "--quick", "--svg", str(svg), timeout=120)
    for row in ("sqla_ids.uuid7()", "uuid.uuid4()", "uuid6.uuid7()", "uuid_utils.compat.uuid7()"):
        assert row in out
    assert "sqla_ids.uuid7_batch(20,000)" in out
    assert svg.read_text().startswith("<svg") and "M/s" in svg.read_text()
