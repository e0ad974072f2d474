"""Coarse time buckets from a UUIDv7's leftmost bits, for partitioning.

A bucket is ``unix_ts_ms >> bucket_bits``; the default 31 bits make buckets
of 2**31 ms (about 24.9 days), close to a month and computable from the first
hex digits of the UUID alone. ``month_partitions`` gives calendar-month bounds
by UUIDv7 value for PostgreSQL ``PARTITION BY RANGE (id)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from uuid import UUID

from sqla_ids.identifiers.inspection import lowest_uuid7, uuid7_timestamp_ms

DEFAULT_BUCKET_BITS = 31


def partition_bucket(uuid: UUID, bucket_bits: int = DEFAULT_BUCKET_BITS) -> int:
    """Return the time bucket of a UUIDv7: its millisecond timestamp >> ``bucket_bits``.

    >>> partition_bucket(UUID("01890a5d-ac96-774b-bcce-b302099a8057"))
    786
    >>> partition_bucket(UUID("01890a5d-ac96-774b-bcce-b302099a8057"), bucket_bits=40)
    1
    """
    if not 0 <= bucket_bits < 48:
        raise ValueError(f"bucket_bits must be from 0 to 47, got {bucket_bits}")
    return uuid7_timestamp_ms(uuid) >> bucket_bits


def bucket_bounds(bucket: int, bucket_bits: int = DEFAULT_BUCKET_BITS) -> tuple[UUID, UUID]:
    """Half-open ``[low, high)`` UUIDv7 bounds of one bucket.

    >>> low, high = bucket_bounds(786)
    >>> print(low, high)
    01890000-0000-7000-8000-000000000000 01898000-0000-7000-8000-000000000000
    >>> low <= UUID("01890a5d-ac96-774b-bcce-b302099a8057") < high
    True
    """
    width = 1 << bucket_bits
    if not 0 <= bucket < 1 << (48 - bucket_bits):
        raise ValueError(f"bucket {bucket} is outside the 48-bit timestamp range")
    return lowest_uuid7(bucket * width), lowest_uuid7(min((bucket + 1) * width, (1 << 48) - 1))


@dataclass(frozen=True)
class MonthPartition:
    """One calendar month (UTC) as a half-open range of UUIDv7 values.

    See :func:`month_partitions` for an example.
    """

    name: str
    month: date
    low: UUID
    high: UUID


def _next_month(day: date) -> date:
    return date(day.year + day.month // 12, day.month % 12 + 1, 1)


def month_partitions(first: date, months: int, *, prefix: str = "p") -> Iterator[MonthPartition]:
    """Yield ``months`` consecutive calendar-month partitions starting at ``first``'s month.

    >>> for part in month_partitions(date(2023, 12, 15), 2):
    ...     print(part.name, part.month, part.low, part.high)
    p2023_12 2023-12-01 018c22ac-d000-7000-8000-000000000000 018cc251-f400-7000-8000-000000000000
    p2024_01 2024-01-01 018cc251-f400-7000-8000-000000000000 018d61f7-1800-7000-8000-000000000000
    """
    if months < 0:
        raise ValueError(f"months must not be negative, got {months}")
    month = date(first.year, first.month, 1)
    for _ in range(months):
        following = _next_month(month)
        yield MonthPartition(
            name=f"{prefix}{month:%Y_%m}",
            month=month,
            low=lowest_uuid7(datetime(month.year, month.month, 1, tzinfo=UTC)),
            high=lowest_uuid7(datetime(following.year, following.month, 1, tzinfo=UTC)),
        )
        month = following
