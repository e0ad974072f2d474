"""The online tests' applications and the online benchmark do not assume a rate.

On a busy machine an application thread (or the benchmark's spawned
processes) may get few statements in before the migration ends. The checks
count on a minimum, so the applications keep going until they reach it,
however early they are stopped; the benchmark waits for its processes' first
statement and summarises even a run without samples.
"""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import pytest
from online_app import SHOPS_SQL, Writer, mariadb_schema, postgresql_schema
from sqlalchemy.engine import Engine

BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "online_migration.py"


@pytest.mark.parametrize("dialect", ["postgresql", "mariadb"])
def test_a_writer_stopped_at_once_still_writes_what_the_checks_need(
    dialect: str, request: pytest.FixtureRequest
) -> None:
    engine: Engine = request.getfixturevalue(f"{dialect}_private_engine")
    if dialect == "postgresql":
        postgresql_schema(engine)
        writer = Writer(engine, key_updates=False)
    else:
        mariadb_schema(engine)
        writer = Writer(engine, key_updates=False, shops=SHOPS_SQL)
    writer.stop.set()  # before it has written anything
    writer.start()
    writer.join()
    assert writer.failures == []
    assert writer.statements > 50  # what check_relations asks for


def test_the_benchmark_summary_takes_a_run_without_samples() -> None:
    summary = runpy.run_path(str(BENCHMARK))["_summary"]
    empty = {
        "latencies": [],
        "slow": [],
        "failures": [],
        "failed_at": [],
        "steps": [],
        "logs": {"wal_bytes": 7},
    }
    result = summary(1.0, empty, {"latencies": [], "slow": [], "failures": []}, "OK")
    assert result["statements"] == 0 and result["wal_bytes"] == 7
    assert math.isnan(result["max_ms"]) and math.isnan(result["p99_ms"])
    one = summary(1.0, {**empty, "latencies": [0.5]}, {**empty, "latencies": []}, "OK")
    assert one["max_ms"] == 500.0 and math.isnan(one["p99_ms"])
    # A failed statement is named with the migration step it met.
    failed = {
        **empty,
        "failures": ["7: deadlock"],
        "failed_at": [(100.0, 0.2)],
        "steps": [(99.5, 100.5, "indexes of child_a")],
    }
    assert summary(1.0, failed, {**empty}, "OK")["failed"] == ["7: deadlock [indexes of child_a]"]
