"""COMB GUIDs, SQL Server ordering, UUID192 and partition helpers."""

from __future__ import annotations

import functools
import random
import uuid
from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqla_ids import uuid7, uuid7_batch, uuid7_datetime
from sqla_ids.identifiers import (
    UUID192,
    SequentialAsBinary,
    SequentialAsString,
    SequentialAtEnd,
    SqlServerOrderedGenerator,
    bucket_bounds,
    comb_guid,
    comb_timestamp_ms,
    from_sqlserver_order,
    month_partitions,
    partition_bucket,
    segment_of,
    sqlserver_sort_key,
    to_sqlserver_order,
    uuid7_from_timestamp,
)
from sqla_ids.identifiers.encoding import UUIDFormatError

pytestmark = pytest.mark.pure_python

# SQL Server's documented comparison of uniqueidentifier (SqlGuid.CompareTo):
# bytes of Guid.ToByteArray() compared in this order. ToByteArray stores the
# first three groups little-endian, so convert from RFC bytes with bytes_le.
_DOTNET_ORDER = (10, 11, 12, 13, 14, 15, 8, 9, 6, 7, 4, 5, 0, 1, 2, 3)


def sqlserver_compare(a: uuid.UUID, b: uuid.UUID) -> int:
    """Independent model of SQL Server's comparison, from the .NET definition."""
    x, y = a.bytes_le, b.bytes_le
    for index in _DOTNET_ORDER:
        if x[index] != y[index]:
            return -1 if x[index] < y[index] else 1
    return 0


uuids = st.integers(0, (1 << 128) - 1).map(lambda n: uuid.UUID(int=n))


@given(st.lists(uuids, min_size=2, max_size=50))
def test_sort_key_matches_the_sqlserver_model(values: list[uuid.UUID]) -> None:
    by_model = sorted(values, key=functools.cmp_to_key(sqlserver_compare))
    by_key = sorted(values, key=sqlserver_sort_key)
    assert [sqlserver_sort_key(v) for v in by_model] == [sqlserver_sort_key(v) for v in by_key]


def test_uuid7_is_not_time_ordered_in_sqlserver_but_the_permutation_is() -> None:
    values = uuid7_batch(3000)
    naive = sorted(values, key=functools.cmp_to_key(sqlserver_compare))
    assert naive != values
    stored = [to_sqlserver_order(v) for v in values]
    assert sorted(stored, key=functools.cmp_to_key(sqlserver_compare)) == stored
    assert [from_sqlserver_order(s) for s in stored] == values


@given(uuids)
def test_sqlserver_permutation_round_trips(value: uuid.UUID) -> None:
    assert from_sqlserver_order(to_sqlserver_order(value)) == value
    assert sqlserver_sort_key(to_sqlserver_order(value)) == value.bytes


def test_comb_layouts_sort_by_time_where_each_is_meant_to() -> None:
    stamps = sorted(random.sample(range(1, 1 << 47), 500))
    for layout, key in (
        (SequentialAsString, lambda u: str(u)),
        (SequentialAsString, lambda u: u.bytes),
        (SequentialAsBinary, lambda u: u.bytes_le),
        (SequentialAtEnd, functools.cmp_to_key(sqlserver_compare)),
    ):
        values = [comb_guid(layout, timestamp_ms=ms) for ms in stamps]
        assert sorted(values, key=key) == values, layout
        assert [comb_timestamp_ms(v, layout) for v in values] == stamps
        assert {v.version for v in values} == {4} and {v.variant for v in values} == {uuid.RFC_4122}
    assert (
        abs(
            comb_timestamp_ms(comb_guid(SequentialAtEnd), SequentialAtEnd)
            - uuid7().int // (1 << 80)
        )
        < 1000
    )
    with pytest.raises(ValueError, match="48 bits"):
        comb_guid(SequentialAtEnd, timestamp_ms=1 << 48)


@given(uuids, st.one_of(st.none(), st.integers(0, (1 << 64) - 1)))
def test_uuid192_round_trips(value: uuid.UUID, segment: int | None) -> None:
    item = UUID192(value, segment)
    assert UUID192.parse(str(item)) == item
    assert UUID192.from_bytes(item.bytes) == item
    assert item.uuid == value and item.segment == segment
    if segment is not None:
        assert segment_of(str(item)) == segment == segment_of(item.bytes)
        assert len(str(item)) == 53 and len(item.bytes) == 24


def test_uuid192_order_hash_and_errors() -> None:
    base = uuid7()
    a, b, c = UUID192(base, 1), UUID192(base, 2), UUID192(base)
    assert c < a < b and len({a, UUID192(str(base), 1), b}) == 2
    assert repr(a) == f"UUID192('{base}', 1)"
    with pytest.raises(AttributeError, match="immutable"):
        a.segment = 3  # type: ignore[misc]
    with pytest.raises(ValueError, match="segment must be an integer"):
        UUID192(base, 1 << 64)
    with pytest.raises(UUIDFormatError, match="16 or 24 bytes"):
        UUID192.from_bytes(b"\x00" * 20)
    with pytest.raises(UUIDFormatError, match="not a dash and 16 hex digits"):
        segment_of(f"{base}-00000000000000zz")
    with pytest.raises(ValueError, match="not a UUID"):
        UUID192.parse(f"{base}-123")


def test_partition_buckets_and_month_bounds() -> None:
    when = datetime(2026, 11, 21, 12, tzinfo=UTC)
    value = uuid7_from_timestamp(when)
    bucket = partition_bucket(value)
    low, high = bucket_bounds(bucket)
    assert low <= value < high
    assert partition_bucket(low) == bucket and partition_bucket(high) == bucket + 1
    # The bucket is the value's leftmost 17 bits: readable from the hex text.
    assert bucket == int(str(value).replace("-", "")[:5], 16) >> 3
    months = list(month_partitions(date(2026, 11, 5), 3))
    assert [m.name for m in months] == ["p2026_11", "p2026_12", "p2027_01"]
    assert months[0].low <= value < months[0].high == months[1].low
    assert uuid7_datetime(months[2].low) == datetime(2027, 1, 1, tzinfo=UTC)
    assert uuid7_datetime(months[2].high) == datetime(2027, 2, 1, tzinfo=UTC)
    with pytest.raises(ValueError, match="bucket_bits"):
        partition_bucket(value, 48)


def test_sqlserver_ordered_generator_sorts_by_time_under_sqlserver_comparison() -> None:
    generator = SqlServerOrderedGenerator()
    values = generator.batch(500) + [generator() for _ in range(500)]
    assert sorted(values, key=functools.cmp_to_key(sqlserver_compare)) == values
    originals = [from_sqlserver_order(v) for v in values]
    assert originals == sorted(originals) and {v.version for v in originals} == {7}
