"""Bit layout of a UUIDv7 (RFC 9562 §5.7) and how our counter fits into it.

A UUIDv7 is, most significant bit first::

    48 unix_ts_ms | 4 ver=0111 | 12 rand_a | 2 var=10 | 62 rand_b

The 74 bits of ``rand_a`` and ``rand_b`` are treated as one field: its top
``counter_bits`` hold a counter (RFC 9562 §6.2 "Method 1"), the rest is fresh
random data for every UUID. The counter's top ``guard_bits`` are zero whenever
the counter is re-seeded, so a seeded counter always has room to count on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

RANDOM_FIELD_BITS = 74  # rand_a (12) + rand_b (62)
MAX_COUNTER_BITS = 42
MAX_TIMESTAMP_MS = (1 << 48) - 1

VERSION_7 = 0x7 << 76
VARIANT_RFC = 0b10 << 62
VERSION_VARIANT = VERSION_7 | VARIANT_RFC
_RAND_B_MASK = (1 << 62) - 1


@dataclass(frozen=True, slots=True)
class Layout:
    """How the 74 non-timestamp bits of a UUIDv7 are split.

    ``counter_bits`` (0 … 42) is the length of the per-millisecond counter;
    ``guard_bits`` (0 … counter_bits) of its leftmost bits start at zero each
    millisecond. The remaining ``74 - counter_bits`` bits are random per UUID.

    >>> Layout.DEFAULT
    Layout(counter_bits=18, guard_bits=1)
    >>> Layout.DEFAULT.random_bits, Layout.DEFAULT.counter_max, Layout.DEFAULT.seed_bits
    (56, 262143, 17)
    >>> value = Layout.DEFAULT.compose(1704067200000, counter=5, random=0)
    >>> from uuid import UUID
    >>> UUID(int=value)  # 2024-01-01T00:00Z, counter 5, random bits all zero
    UUID('018cc251-f400-7000-8500-000000000000')
    >>> Layout.DEFAULT.counter_of(value), Layout.NO_COUNTER.random_bits
    (5, 74)
    >>> Layout(counter_bits=43)
    Traceback (most recent call last):
    ...
    ValueError: counter_bits must be an integer from 0 to 42, got 43
    """

    counter_bits: int = 18
    guard_bits: int = 1

    DEFAULT: ClassVar[Layout]
    CPYTHON_314: ClassVar[Layout]
    NO_COUNTER: ClassVar[Layout]

    def __post_init__(self) -> None:
        if not isinstance(self.counter_bits, int) or not 0 <= self.counter_bits <= 42:
            raise ValueError(
                f"counter_bits must be an integer from 0 to {MAX_COUNTER_BITS}, "
                f"got {self.counter_bits!r}"
            )
        if not isinstance(self.guard_bits, int) or not 0 <= self.guard_bits <= self.counter_bits:
            raise ValueError(
                f"guard_bits must be an integer from 0 to counter_bits ({self.counter_bits}), "
                f"got {self.guard_bits!r}"
            )

    @property
    def random_bits(self) -> int:
        """Number of fresh random bits in every UUID."""
        return RANDOM_FIELD_BITS - self.counter_bits

    @property
    def counter_max(self) -> int:
        """Largest counter value before the timestamp must advance."""
        return (1 << self.counter_bits) - 1

    @property
    def seed_bits(self) -> int:
        """Random bits used to seed the counter at a new millisecond."""
        return self.counter_bits - self.guard_bits

    def compose(self, timestamp_ms: int, counter: int, random: int) -> int:
        """Return the 128-bit integer of the UUIDv7 with these fields."""
        field = (counter << self.random_bits) | random
        return (
            (timestamp_ms << 80) | VERSION_VARIANT | ((field >> 62) << 64) | (field & _RAND_B_MASK)
        )

    def counter_of(self, value: int) -> int:
        """Return the counter field of a UUIDv7 integer made with this layout."""
        field = (((value >> 64) & 0xFFF) << 62) | (value & _RAND_B_MASK)
        return field >> self.random_bits

    def random_of(self, value: int) -> int:
        """Return the per-UUID random bits of a UUIDv7 integer made with this layout."""
        field = (((value >> 64) & 0xFFF) << 62) | (value & _RAND_B_MASK)
        return field & ((1 << self.random_bits) - 1)


Layout.DEFAULT = Layout(18, 1)
"""sqla_ids' default: 18-bit counter with one guard bit, 56 random bits per UUID."""
Layout.CPYTHON_314 = Layout(42, 1)
"""CPython 3.14 ``uuid.uuid7()`` and the Rust ``uuid`` crate: 42-bit counter, 32 random bits."""
Layout.NO_COUNTER = Layout(0, 0)
"""No counter: 74 random bits; a second UUID in the same millisecond advances the timestamp."""

PRESETS: dict[str, Layout] = {
    "default": Layout.DEFAULT,
    "cpython314": Layout.CPYTHON_314,
    "uuid-crate": Layout.CPYTHON_314,
    "no-counter": Layout.NO_COUNTER,
}
