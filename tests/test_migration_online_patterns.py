"""Issue 28's rule: any application statement that succeeds without a migration
succeeds during every phase of an online one, with the same result.

Every write pattern of :mod:`write_patterns` runs before each phase (expand,
backfill, prepare, swap, contract), in the middle of the parent's and a
child's backfill, and after the contract, on PostgreSQL and MariaDB; then
every row must point where it was written to point, and the application's
own triggers must have seen only the application's writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import write_patterns
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7
from sqla_ids.migration import online as online_module

pytestmark = pytest.mark.slow


CASES = write_patterns.CASES


@pytest.fixture(params=CASES, ids=[f"{db}-{item}" for db, item in CASES])
def shop(request: pytest.FixtureRequest) -> Iterator[Engine]:
    """A database of its own with the patterns' shop in each ``item`` layout."""
    yield from write_patterns.layout_shop(request)


def _swapped(engine: Engine) -> bool:
    with engine.connect() as conn:
        return write_patterns.has_column(conn, "shop", "id_old")


def test_every_write_pattern_in_every_phase(shop: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = write_patterns.Expected()
    expected.items.update(
        {f"seed-i{n}": f"seed{1 + n % write_patterns.SEED_SHOPS}" for n in range(200)}
    )
    failures: dict[str, str] = {}

    def run(where: str) -> None:
        failures.update(write_patterns.run_all(shop, _swapped(shop), expected, where))

    original_tasks = online_module.OnlineRun.run_tasks
    phases = iter(["the plan", "expand", "backfill", "prepare", "swap", "contract"])

    def before_each_phase(self: Any, tasks: Any, then: Any = None) -> None:
        run(f"before {next(phases, 'a phase')}")
        original_tasks(self, tasks, then)

    original_pause = online_module.OnlineRun.pause
    pauses = {"n": 0}

    def mid_backfill(self: Any) -> None:
        pauses["n"] += 1
        if pauses["n"] in (2, 9):  # in the parent's walk, then in a child's
            run(f"mid-backfill ({pauses['n']})")
        original_pause(self)

    monkeypatch.setattr(online_module.OnlineRun, "run_tasks", before_each_phase)
    monkeypatch.setattr(online_module.OnlineRun, "pause", mid_backfill)
    options = PkMigrationOptions(online=True, batch_size=8, batch_time=0)
    try:
        for phase in ("prepare", "swap", "contract"):
            with shop.connect() as conn:
                migrate_pk_to_uuid7(conn, "shop", options, phase=phase)
    except Exception as error:  # the failures first: they say why it stopped
        raise AssertionError(f"{error}; the application's failures: {failures}") from error
    run("after the contract")
    assert failures == {}
    problems = write_patterns.check(shop, expected)
    assert not problems, "\n".join(problems)
