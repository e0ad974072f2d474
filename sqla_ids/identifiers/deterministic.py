"""Deterministic UUIDv7 construction, for migrations that must keep row order.

``uuid7_from_timestamp`` builds one value from a given time (and optionally a
counter and a seed); ``ordered_uuid7s`` turns a sequence of timestamps -- for
example ``created_at`` in primary-key order -- into strictly increasing
UUIDv7 values: a running maximum keeps order when timestamps go back, and
ties are told apart by the counter bits.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Iterator
from uuid import UUID

from sqla_ids.identifiers.generator import make_uuid
from sqla_ids.identifiers.inspection import TimePoint, to_unix_ms
from sqla_ids.identifiers.layout import MAX_TIMESTAMP_MS, Layout


def _seeded_random(seed: bytes | str | int, index: int, bits: int) -> int:
    """``bits`` pseudo-random bits derived from ``seed`` and ``index`` (BLAKE2b)."""
    if isinstance(seed, int):
        seed = str(seed)
    if isinstance(seed, str):
        seed = seed.encode()
    digest = hashlib.blake2b(index.to_bytes(12, "big"), key=seed[:64], digest_size=16).digest()
    return int.from_bytes(digest, "big") >> (128 - bits)


def uuid7_from_timestamp(
    when: TimePoint,
    *,
    counter: int = 0,
    seed: bytes | str | int | None = None,
    layout: Layout = Layout.DEFAULT,
) -> UUID:
    """Return the UUIDv7 for ``when`` with the given ``counter``.

    The random bits come from the CSPRNG, or -- when ``seed`` is given --
    are derived from the seed, the timestamp and the counter, so the same
    arguments always give the same UUID (reproducible migrations and tests).

    >>> from datetime import UTC, datetime
    >>> new_year = datetime(2024, 1, 1, tzinfo=UTC)
    >>> uuid7_from_timestamp(new_year, seed="sample-seed")
    UUID('018cc251-f400-7000-80bc-c24afea4e58b')
    >>> uuid7_from_timestamp(new_year, seed="sample-seed") == uuid7_from_timestamp(
    ...     new_year, seed="sample-seed"
    ... )
    True
    >>> unseeded = uuid7_from_timestamp(new_year, counter=5)  # random bits from the CSPRNG
    >>> unseeded.version, str(unseeded)[:13]
    (7, '018cc251-f400')
    """
    ms = to_unix_ms(when)
    if not 0 <= counter <= layout.counter_max:
        raise ValueError(
            f"counter {counter} does not fit the layout's {layout.counter_bits}-bit counter"
        )
    bits = layout.random_bits
    if seed is None:
        random = secrets.randbits(bits)
    else:
        random = _seeded_random(seed, (ms << 42) | counter, bits) if bits else 0
    return make_uuid(layout.compose(ms, counter, random))


def ordered_uuid7s(
    timestamps: Iterable[TimePoint | None],
    *,
    seed: bytes | str | int | None = None,
    layout: Layout = Layout.DEFAULT,
) -> Iterator[UUID]:
    """Yield one strictly increasing UUIDv7 per timestamp, in the given order.

    A timestamp earlier than one already seen (or ``None``) is replaced by the
    running maximum, so the output always sorts in input order. Values sharing
    a millisecond get consecutive counters starting at 0; when the counter is
    exhausted the millisecond advances by one.

    >>> from sqla_ids.identifiers.inspection import uuid7_counter, uuid7_timestamp_ms
    >>> created_at = [1704067200000, 1704067200000, 1704067199000, None, 1704067200001]
    >>> keys = list(ordered_uuid7s(created_at, seed="sample-seed"))
    >>> keys == sorted(keys) and len(set(keys)) == 5
    True
    >>> [(uuid7_timestamp_ms(key) - 1704067200000, uuid7_counter(key)) for key in keys]
    [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    """
    last_ms = -1
    counter = 0
    for index, when in enumerate(timestamps):
        ms = last_ms if when is None else max(to_unix_ms(when), last_ms)
        if ms < 0:
            raise ValueError(f"timestamp number {index} is None and no earlier one is known")
        if ms > last_ms:
            counter = 0
        else:
            counter += 1
            if counter > layout.counter_max:
                ms, counter = ms + 1, 0
        if ms > MAX_TIMESTAMP_MS:
            raise ValueError("UUIDv7 timestamp space exhausted")
        last_ms = ms
        yield uuid7_from_timestamp(ms, counter=counter, seed=seed, layout=layout)
