"""Timestamps, counters, time-range bounds and deterministic construction."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqla_ids import (
    UUIDv7Generator,
    is_uuid7,
    uuid7,
    uuid7_bounds,
    uuid7_datetime,
    uuid7_timestamp_ms,
)
from sqla_ids.identifiers import (
    Layout,
    highest_uuid7,
    lowest_uuid7,
    ordered_uuid7s,
    to_unix_ms,
    uuid7_from_timestamp,
)

pytestmark = pytest.mark.pure_python

moments = st.integers(0, (1 << 48) - 1)


@given(moments)
def test_bounds_enclose_exactly_their_millisecond(ms: int) -> None:
    low, high = lowest_uuid7(ms), highest_uuid7(ms)
    assert is_uuid7(low) and is_uuid7(high)
    assert uuid7_timestamp_ms(low) == uuid7_timestamp_ms(high) == ms
    inside = uuid7_from_timestamp(ms, counter=12345)
    assert low <= inside <= high
    if ms:
        assert highest_uuid7(ms - 1) < low
    if ms < (1 << 48) - 1:
        assert high < lowest_uuid7(ms + 1)


def test_bounds_select_the_values_of_a_time_range() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    values = []
    for hour in range(48):
        generator = UUIDv7Generator(clock=lambda h=hour: to_unix_ms(start + timedelta(hours=h)))
        values += [generator() for _ in range(5)]
    low, high = uuid7_bounds(start + timedelta(hours=10), start + timedelta(hours=20))
    selected = [v for v in values if low <= v <= high]
    assert len(selected) == 11 * 5
    assert {uuid7_datetime(v) for v in selected} == {
        start + timedelta(hours=h) for h in range(10, 21)
    }
    with pytest.raises(ValueError, match="before its start"):
        uuid7_bounds(start + timedelta(hours=1), start)


def test_time_points_in_every_accepted_form() -> None:
    moment = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2)))
    ms = to_unix_ms(moment)
    assert ms == int(moment.timestamp() * 1000)
    assert to_unix_ms(moment.timestamp()) == ms
    assert uuid7_datetime(lowest_uuid7(moment)) == moment.replace(microsecond=123000)
    with pytest.raises(ValueError, match="naive datetime"):
        to_unix_ms(datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="outside the UUIDv7 timestamp range"):
        to_unix_ms(1 << 48)
    with pytest.raises(TypeError, match="time point"):
        to_unix_ms("2024-01-01")  # type: ignore[arg-type]


def test_non_v7_values_are_refused_by_v7_inspection() -> None:
    with pytest.raises(ValueError, match="is not a UUIDv7 \\(version 4"):
        uuid7_datetime(uuid.uuid4())
    assert not is_uuid7(uuid.uuid4()) and is_uuid7(uuid7())


def test_deterministic_construction_with_seed() -> None:
    when = datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    a = uuid7_from_timestamp(when, counter=7, seed="migration-42")
    assert a == uuid7_from_timestamp(when, counter=7, seed="migration-42")
    assert a != uuid7_from_timestamp(when, counter=7, seed="other")
    assert uuid7_from_timestamp(when, counter=7) != uuid7_from_timestamp(when, counter=7)
    assert uuid7_datetime(a) == when
    with pytest.raises(ValueError, match="does not fit"):
        uuid7_from_timestamp(when, counter=1 << 18)


@given(st.lists(st.one_of(st.none(), st.integers(1, 10_000)), min_size=1, max_size=300))
def test_ordered_uuid7s_follow_input_order(stamps: list[int | None]) -> None:
    if stamps[0] is None:
        stamps[0] = 1
    values = list(ordered_uuid7s(stamps, seed=1))
    assert values == sorted(values) and len(set(values)) == len(values)
    assert values == list(ordered_uuid7s(stamps, seed=1))
    running = 0
    for stamp, value in zip(stamps, values, strict=True):
        running = max(running, stamp or 0)
        assert uuid7_timestamp_ms(value) >= running


def test_ordered_uuid7s_counter_overflow_moves_to_next_ms() -> None:
    layout = Layout(counter_bits=2, guard_bits=0)
    values = list(ordered_uuid7s([5] * 9, layout=layout, seed=0))
    assert [uuid7_timestamp_ms(v) for v in values] == [5, 5, 5, 5, 6, 6, 6, 6, 7]
    assert values == sorted(values)
