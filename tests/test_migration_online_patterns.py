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

import pytest
import write_patterns
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions

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
    matrix = write_patterns.Matrix(shop)
    matrix.around_every_phase(monkeypatch, mid_backfill=(2, 9))  # the parent's walk, a child's
    options = PkMigrationOptions(online=True, batch_size=8, batch_time=0)
    matrix.migrate(options)
