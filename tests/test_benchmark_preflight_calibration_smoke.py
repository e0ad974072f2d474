"""The preflight calibration script runs, measures and re-estimates (no timing
assertions): a small SQLite run for each target, then ``--table --again``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripts import run_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "preflight_calibration.py"


def _run(*args: str) -> str:
    return run_script(SCRIPT, *args, timeout=300)


# A benchmark script's smoke run (three interpreters, two migrations measured):
# with the slow tests, like the other benchmarks' smoke runs.
# quick cover: what it calls of the package -- the preflight and its estimates
# with a UUIDv7 and a UUID192 key: tests/test_migration_preflight.py::
#   test_offline_preflight_statements_are_the_ones_run[sqlite] and
#   test_uuid192_preflight_statements_are_the_ones_run[sqlite],
#   tests/test_migration_preflight_uuid192.py::
#   test_a_uuid192_key_changes_the_disk_and_log_estimates_by_its_width
@pytest.mark.slow
def test_a_small_run_of_each_target_and_its_table(tmp_path: Path) -> None:
    results = []
    for target in (["--target", "uuid7"], ["--target", "uuid192", "--segment-sql", "7"]):
        out = tmp_path / f"{target[1]}.json"
        common = ["--sqlite", str(tmp_path), "--sizes", "300", "--no-chinook", "--out", str(out)]
        printed = _run(*common, *target)
        assert "| sqlite, offline | benchmark 300" in printed
        results += json.loads(out.read_text())
    [uuid7, uuid192] = results
    assert uuid7["shape"]["new_key_bytes"] is None and uuid192["shape"]["new_key_bytes"] == 24
    assert uuid192["dataset"] == "benchmark 300, uuid192"
    for result in results:
        assert result["measured"]["peak_disk"] > 0 and result["estimate"]["peak_disk"][1] > 0
    both = tmp_path / "both.json"
    both.write_text(json.dumps(results))
    table = _run("--table", str(both), "--again")
    assert "benchmark 300, uuid192" in table
    assert "| database, mode | seconds | peak_disk |" in table  # the errors, per mode
