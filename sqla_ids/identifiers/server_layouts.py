"""The keys the server-side UUIDv7 functions make, built from state the server hands out.

``sqla_ids_uuid7()`` packs a 1/4096-millisecond tick (RFC 9562 §6.2 method 3)
that the server keeps strictly increasing per connection, then 62 random
bits; ``sqla_ids_uuid7_serial()`` packs the millisecond, 44 bits of a
database sequence (12 in ``rand_a``, 32 after the variant nibble, fixed to
``8``) and 28 random bits. Calling either once per key costs microseconds of
server time each (a SQL or stored function); instead, the server can reserve a
block -- a run of consecutive ticks, or one millisecond and a run of sequence
values -- in one statement, and the keys are assembled here, bit for bit in
the functions' layouts, so they sort with the ones the functions make.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from sqla_ids.identifiers._random import random_words
from sqla_ids.identifiers.generator import make_uuids
from sqla_ids.identifiers.layout import MAX_TIMESTAMP_MS, VERSION_VARIANT

__all__ = ["SERIAL_MAX", "uuid7s_from_serial", "uuid7s_from_ticks"]

SERIAL_MAX = 2**44 - 1
"""Largest sequence value the serial layout holds (its sequence cycles after it)."""

_TICKS_PER_MS = 4096
_VERSION_7 = 7 << 76
_VARIANT_NIBBLE_8 = 8 << 60


def uuid7s_from_ticks(first_tick: int, count: int) -> list[UUID]:
    """``count`` keys for the ticks ``first_tick``, ``first_tick + 1``… in
    ``sqla_ids_uuid7()``'s layout: millisecond, version, sub-millisecond
    fraction, variant, 62 random bits. Ascending."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if first_tick < 0 or (first_tick + count - 1) // _TICKS_PER_MS > MAX_TIMESTAMP_MS:
        raise ValueError(f"tick {first_tick} (+{count}) is outside the 48-bit millisecond range")
    values = [
        (tick >> 12) << 80 | (tick & 0xFFF) << 64 | VERSION_VARIANT | word
        for tick, word in zip(
            range(first_tick, first_tick + count), random_words(count, 62), strict=True
        )
    ]
    return make_uuids(values, count)


def uuid7s_from_serial(milliseconds: int, sequence_values: Sequence[int]) -> list[UUID]:
    """Keys for one millisecond and the given sequence values in
    ``sqla_ids_uuid7_serial()``'s layout (ascending when the values are)."""
    if not 0 <= milliseconds <= MAX_TIMESTAMP_MS:
        raise ValueError(f"millisecond {milliseconds} is outside the 48-bit range")
    count = len(sequence_values)
    head = milliseconds << 80 | _VERSION_7 | _VARIANT_NIBBLE_8
    values = []
    for value, word in zip(sequence_values, random_words(count, 28), strict=True):
        if not 0 <= value <= SERIAL_MAX:
            raise ValueError(f"sequence value {value} does not fit 44 bits")
        values.append(head | (value >> 32) << 64 | (value & 0xFFFFFFFF) << 28 | word)
    return make_uuids(values, count)
