"""Reading UUIDv7 values back: timestamps, counters, and time-range bounds.

``lowest_uuid7(t)`` / ``highest_uuid7(t)`` are the smallest and largest
UUIDv7 whose timestamp is the millisecond of ``t``, so
``WHERE id BETWEEN lowest_uuid7(t0) AND highest_uuid7(t1)`` selects the rows
created from ``t0`` to ``t1`` through the primary-key index.
"""

from __future__ import annotations

import uuid as uuid_module
from datetime import UTC, datetime, timedelta
from uuid import UUID

from sqla_ids.identifiers.generator import make_uuid
from sqla_ids.identifiers.layout import MAX_TIMESTAMP_MS, VERSION_VARIANT, Layout

_NON_TIMESTAMP_BITS = (1 << 80) - 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TimePoint = datetime | int | float
"""A point in time: an aware ``datetime``, or Unix time as int milliseconds or float seconds."""


def to_unix_ms(when: TimePoint) -> int:
    """Return Unix milliseconds for an aware ``datetime``, int ms or float seconds.

    >>> to_unix_ms(datetime(2024, 1, 1, tzinfo=UTC))
    1704067200000
    >>> to_unix_ms(1704067200.5)
    1704067200500
    >>> to_unix_ms(datetime(2024, 1, 1))
    Traceback (most recent call last):
    ...
    ValueError: naive datetime 2024-01-01T00:00:00 is ambiguous: give it a tzinfo (e.g. UTC)
    """
    if isinstance(when, datetime):
        if when.tzinfo is None:
            raise ValueError(
                f"naive datetime {when.isoformat()} is ambiguous: give it a tzinfo (e.g. UTC)"
            )
        delta = when - _EPOCH
        ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    elif isinstance(when, bool):
        raise TypeError("a time point must be a datetime, int milliseconds or float seconds")
    elif isinstance(when, int):
        ms = when
    elif isinstance(when, float):
        ms = int(when * 1000)
    else:
        raise TypeError(
            f"a time point must be a datetime, int milliseconds or float seconds, got {when!r}"
        )
    if not 0 <= ms <= MAX_TIMESTAMP_MS:
        raise ValueError(f"{ms} ms is outside the UUIDv7 timestamp range 0 … 2**48-1")
    return ms


def is_uuid7(uuid: UUID) -> bool:
    """True if ``uuid`` has version 7 and the RFC 9562 variant.

    >>> is_uuid7(UUID("01890a5d-ac96-774b-bcce-b302099a8057"))
    True
    >>> is_uuid7(UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"))  # version 1
    False
    """
    return (uuid.int >> 76) & 0xF == 7 and (uuid.int >> 62) & 0b11 == 0b10


# The standard library still names the variants after RFC 4122.
_VARIANT_NAMES = {
    uuid_module.RESERVED_NCS: "reserved (NCS backward compatibility)",
    uuid_module.RFC_4122: "RFC 9562",
    uuid_module.RESERVED_MICROSOFT: "reserved (Microsoft backward compatibility)",
    uuid_module.RESERVED_FUTURE: "reserved (future definition)",
}


def variant_name(uuid: UUID) -> str:
    """The variant of ``uuid`` in the words of RFC 9562 §4.1.

    >>> variant_name(UUID("01890a5d-ac96-774b-bcce-b302099a8057"))
    'RFC 9562'
    >>> variant_name(UUID(int=0))
    'reserved (NCS backward compatibility)'
    """
    return _VARIANT_NAMES[uuid.variant]


def _kind(uuid: UUID) -> str:
    """What ``uuid`` is, for messages: its version and variant, or nil/max.

    >>> _kind(UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"))
    'version 1, RFC 9562 variant'
    >>> _kind(UUID(int=0))
    'the nil UUID'
    >>> _kind(UUID("6ba7b810-9dad-11d1-00b4-00c04fd430c8"))
    'variant reserved (NCS backward compatibility), no version'
    """
    if uuid.int == 0:
        return "the nil UUID"
    if uuid.int == (1 << 128) - 1:
        return "the max UUID"
    if uuid.variant != uuid_module.RFC_4122:
        return f"variant {variant_name(uuid)}, no version"
    return f"version {uuid.version}, RFC 9562 variant"


def _require_v7(uuid: UUID) -> int:
    if not isinstance(uuid, UUID):
        raise TypeError(f"expected a uuid.UUID, got {type(uuid).__name__}")
    if not is_uuid7(uuid):
        raise ValueError(f"{uuid} is not a UUIDv7 ({_kind(uuid)})")
    return uuid.int


def uuid7_timestamp_ms(uuid: UUID) -> int:
    """Unix milliseconds stored in a UUIDv7.

    >>> uuid7_timestamp_ms(UUID("01890a5d-ac96-774b-bcce-b302099a8057"))
    1688096058518
    >>> uuid7_timestamp_ms(UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8"))
    Traceback (most recent call last):
    ...
    ValueError: 6ba7b810-9dad-11d1-80b4-00c04fd430c8 is not a UUIDv7 (version 1, ...)
    """
    return _require_v7(uuid) >> 80


def uuid7_datetime(uuid: UUID) -> datetime:
    """Creation time stored in a UUIDv7, as an aware UTC ``datetime``.

    >>> uuid7_datetime(UUID("01890a5d-ac96-774b-bcce-b302099a8057")).isoformat()
    '2023-06-30T03:34:18.518000+00:00'
    """
    return _EPOCH + timedelta(milliseconds=uuid7_timestamp_ms(uuid))


def uuid7_counter(uuid: UUID, layout: Layout = Layout.DEFAULT) -> int:
    """Counter field of a UUIDv7 made with ``layout``.

    >>> key = UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    >>> uuid7_counter(key)  # the default 18-bit counter
    119548
    >>> uuid7_counter(key, Layout.NO_COUNTER)
    0
    """
    return layout.counter_of(_require_v7(uuid))


def lowest_uuid7(when: TimePoint) -> UUID:
    """Smallest UUIDv7 with the millisecond of ``when``.

    >>> lowest_uuid7(datetime(2024, 1, 1, tzinfo=UTC))
    UUID('018cc251-f400-7000-8000-000000000000')
    """
    return make_uuid((to_unix_ms(when) << 80) | VERSION_VARIANT)


def highest_uuid7(when: TimePoint) -> UUID:
    """Largest UUIDv7 with the millisecond of ``when``.

    >>> highest_uuid7(1704067200000)
    UUID('018cc251-f400-7fff-bfff-ffffffffffff')
    """
    all_ones = _NON_TIMESTAMP_BITS & ~((0xF << 76) | (0b11 << 62))
    return make_uuid((to_unix_ms(when) << 80) | VERSION_VARIANT | all_ones)


def uuid7_bounds(start: TimePoint, end: TimePoint) -> tuple[UUID, UUID]:
    """Inclusive ``(low, high)`` UUIDv7 bounds for rows created from ``start`` to ``end``.

    Both ends are inclusive at millisecond precision; for a half-open range
    ``[start, end)`` pass ``end - 1 ms``.

    >>> low, high = uuid7_bounds(
    ...     datetime(2023, 6, 30, tzinfo=UTC), datetime(2023, 7, 1, tzinfo=UTC)
    ... )
    >>> print(low, high)
    01890999-7800-7000-8000-000000000000 01890ebf-d400-7fff-bfff-ffffffffffff
    >>> low <= UUID("01890a5d-ac96-774b-bcce-b302099a8057") <= high
    True
    >>> uuid7_bounds(1704067200000, 1704067199999)
    Traceback (most recent call last):
    ...
    ValueError: end of the time range lies before its start
    """
    low, high = lowest_uuid7(start), highest_uuid7(end)
    if high < low:
        raise ValueError("end of the time range lies before its start")
    return low, high
