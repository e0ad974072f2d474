"""Online backfill batches sized by the time they take (``batch_time``).

A batch holds its row locks until it commits; an application statement that
needs one of those rows waits that long. On MariaDB with a buffer pool smaller
than the data a 10,000-row batch takes seconds, so batches follow the measured
rate toward ``batch_time`` seconds instead.
"""

from __future__ import annotations

import pytest

from sqla_ids.migration import PkMigrationOptions
from sqla_ids.migration.core import progress
from sqla_ids.migration.core.progress import FIRST_BATCH, Batches, next_batch_size

pytestmark = pytest.mark.pure_python


def test_a_batch_that_took_too_long_makes_the_next_smaller() -> None:
    # 10,000 rows in 3.7 s at a 0.5 s target: 1,351 rows take 0.5 s.
    assert next_batch_size(10_000, 10_000, 3.7, 0.5, 10_000) == 2_500  # at most a quarter less
    assert next_batch_size(2_000, 2_000, 1.0, 0.5, 10_000) == 1_000


def test_a_quick_batch_makes_the_next_larger_up_to_the_batch_size() -> None:
    assert next_batch_size(1_000, 1_000, 0.01, 0.5, 10_000) == 2_000  # at most doubled
    assert next_batch_size(8_000, 8_000, 0.1, 0.5, 10_000) == 10_000
    assert next_batch_size(1_000, 1_000, 0.0, 0.5, 10_000) == 2_000  # a clock that did not move


def test_it_settles_where_a_batch_takes_the_target() -> None:
    size = 1_000
    for _ in range(20):  # 0.25 ms per row: 2,000 rows take 0.5 s
        size = next_batch_size(size, size, size * 0.00025, 0.5, 10_000)
    assert size == 2_000


def test_fixed_batches_when_there_is_no_target() -> None:
    assert next_batch_size(5, 5, 100.0, 0, 10_000) == 10_000
    assert Batches("s", 10, largest=97, target=0, pause=lambda: None).next() == 97


def test_never_below_one_row() -> None:
    assert next_batch_size(1, 1, 60.0, 0.5, 10_000) == 1


def test_batches_follow_the_clock_count_progress_and_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    pauses: list[int] = []
    batches = Batches("t.c", 5_000, largest=10_000, target=0.5, pause=lambda: pauses.append(1))
    sizes, per_row = [], 0.0001
    for number in range(16):
        if number == 7:
            per_row = 0.001  # the cache went cold: ten times slower per row
        n = batches.next()
        sizes.append(n)
        clock[0] += n * per_row
        batches.done(n)
    assert sizes[0] == FIRST_BATCH == 100
    assert sizes[1:7] == [200, 400, 800, 1_600, 3_200, 5_000]  # doubling, capped by the rate
    assert sizes[7] == 5_000 and sizes[8] == 1_250  # one slow batch: a quarter
    assert sizes[-1] == 500  # 0.001 s per row: 500 rows in 0.5 s
    assert len(pauses) == 16
    assert batches.progress.done == 5_000  # counted up to the total, not past it


def test_the_first_batch_is_small_unless_the_batch_size_is() -> None:
    assert Batches("s", 10, largest=37, target=0.5, pause=lambda: None).next() == 37 < FIRST_BATCH
    assert Batches("s", 10, largest=10**6, target=0.5, pause=lambda: None).next() == FIRST_BATCH


def test_batch_time_is_an_option_in_seconds() -> None:
    assert PkMigrationOptions().batch_time == 0.5
    assert PkMigrationOptions(batch_time=0).to_dict() == {"batch_time": 0}
    with pytest.raises(ValueError, match="batch_time must be a number of seconds"):
        PkMigrationOptions(batch_time=-1)


def test_each_batch_is_followed_by_a_rest_in_proportion_to_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: clock[0])
    rests: list[float] = []
    batches = Batches(
        "t.c", 1_000, largest=500, target=0, pause=lambda: None, nice_ratio=1.5, sleep=rests.append
    )
    for took in (0.4, 0.2):
        batches.next()
        clock[0] += took
        batches.done(500)
    assert rests == pytest.approx([0.6, 0.3])
    quiet = Batches("t.c", 10, largest=5, target=0, pause=lambda: None, sleep=rests.append)
    quiet.next()
    quiet.done(5)
    assert len(rests) == 2  # nice_ratio 0: no rest


def test_nice_ratio_is_a_bounded_number() -> None:
    assert PkMigrationOptions().nice_ratio == 0
    assert PkMigrationOptions(nice_ratio=1).to_dict() == {"nice_ratio": 1}
    for wrong in (-0.5, 101, True, "1"):
        with pytest.raises(ValueError, match="nice_ratio must be a number from 0 to 100"):
            PkMigrationOptions(nice_ratio=wrong)  # type: ignore[arg-type]
