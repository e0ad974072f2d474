"""COMB (sequential) GUIDs and SQL Server's ``uniqueidentifier`` order.

COMB GUIDs put a 48-bit millisecond timestamp where a given database sorts
first and fill the rest with random bits (version 4, RFC variant):

* ``SEQUENTIAL_AS_STRING``: timestamp in the first 6 bytes of the canonical
  form -- sorts as text and as big-endian bytes (PostgreSQL, MySQL ``CHAR``).
* ``SEQUENTIAL_AS_BINARY``: timestamp first in the little-endian byte form
  (``uuid.bytes_le``), for systems that store .NET-style ``Guid`` bytes.
* ``SEQUENTIAL_AT_END``: timestamp in the last 6 bytes, which SQL Server
  compares first.

Within one millisecond a COMB's order is random. A UUIDv7 keeps full order
everywhere except in SQL Server's ``uniqueidentifier``; :func:`to_sqlserver_order`
permutes its bytes so that SQL Server's comparison sorts exactly like the
UUIDv7 itself.
"""

from __future__ import annotations

import enum
import os
from time import time_ns
from uuid import UUID

from sqla_ids.identifiers.generator import Shift, UUIDv7Generator, default_generator, make_uuid

# SQL Server compares uniqueidentifier bytes in this order of significance,
# written as indexes into the canonical (big-endian, RFC 9562) bytes: the
# .NET priority 10-15, 8-9, 6-7, 4-5, 0-3 applies to Guid.ToByteArray(),
# whose first three groups are little-endian.
SQLSERVER_BYTE_PRIORITY = (10, 11, 12, 13, 14, 15, 8, 9, 7, 6, 5, 4, 3, 2, 1, 0)
# Inverse permutation: canonical index that receives sort-key byte i.
_FROM_SORT_KEY = tuple(SQLSERVER_BYTE_PRIORITY.index(i) for i in range(16))


class CombLayout(enum.Enum):
    """Where a COMB GUID keeps its timestamp."""

    SEQUENTIAL_AS_STRING = "SequentialAsString"
    SEQUENTIAL_AS_BINARY = "SequentialAsBinary"
    SEQUENTIAL_AT_END = "SequentialAtEnd"


SequentialAsString = CombLayout.SEQUENTIAL_AS_STRING
SequentialAsBinary = CombLayout.SEQUENTIAL_AS_BINARY
SequentialAtEnd = CombLayout.SEQUENTIAL_AT_END

_V4_MASK = ~((0xF << 76) | (0b11 << 62)) & ((1 << 128) - 1)
_V4_BITS = (0x4 << 76) | (0b10 << 62)


def comb_guid(layout: CombLayout, *, timestamp_ms: int | None = None) -> UUID:
    """Return a COMB GUID with the current (or given) millisecond timestamp.

    >>> guid = comb_guid(SequentialAsString, timestamp_ms=1704067200000)
    >>> guid.version, str(guid)[:13]
    (4, '018cc251-f400')
    >>> str(comb_guid(SequentialAtEnd, timestamp_ms=1704067200000))[-12:]
    '018cc251f400'
    """
    ms = time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
    if not 0 <= ms < 1 << 48:
        raise ValueError(f"timestamp {ms} ms does not fit 48 bits")
    stamp = ms.to_bytes(6, "big")
    random = os.urandom(10)
    raw = random + stamp if layout is CombLayout.SEQUENTIAL_AT_END else stamp + random
    if layout is CombLayout.SEQUENTIAL_AS_BINARY:
        raw = UUID(bytes_le=raw).bytes
    # Version and variant bits sit in canonical bytes 6 and 8, which no
    # layout uses for the timestamp.
    return make_uuid((int.from_bytes(raw, "big") & _V4_MASK) | _V4_BITS)


def comb_timestamp_ms(uuid: UUID, layout: CombLayout) -> int:
    """Return the millisecond timestamp stored in a COMB GUID.

    >>> for layout in CombLayout:
    ...     guid = comb_guid(layout, timestamp_ms=1704067200000)
    ...     print(layout.value, comb_timestamp_ms(guid, layout))
    SequentialAsString 1704067200000
    SequentialAsBinary 1704067200000
    SequentialAtEnd 1704067200000
    """
    if layout is CombLayout.SEQUENTIAL_AT_END:
        return int.from_bytes(uuid.bytes[10:], "big")
    raw = uuid.bytes_le if layout is CombLayout.SEQUENTIAL_AS_BINARY else uuid.bytes
    return int.from_bytes(raw[:6], "big")


def sqlserver_sort_key(uuid: UUID) -> bytes:
    """Bytes that compare like SQL Server compares ``uniqueidentifier`` values.

    SQL Server looks at the last six bytes first:

    >>> sqlserver_sort_key(UUID("00000000-0000-0000-0000-0000000000ff")).hex()
    '0000000000ff00000000000000000000'
    """
    raw = uuid.bytes
    return bytes(raw[i] for i in SQLSERVER_BYTE_PRIORITY)


def to_sqlserver_order(uuid: UUID) -> UUID:
    """Permute ``uuid`` so that its SQL Server sort key equals ``uuid.bytes``.

    Storing ``to_sqlserver_order(u)`` in a ``uniqueidentifier`` column makes
    SQL Server's index order equal to the order of the original UUIDv7s;
    :func:`from_sqlserver_order` gives the original back.

    >>> key = UUID("01890a5d-ac96-774b-bcce-b302099a8057")
    >>> stored = to_sqlserver_order(key)
    >>> stored
    UUID('57809a09-02b3-cebc-774b-01890a5dac96')
    >>> sqlserver_sort_key(stored) == key.bytes
    True
    """
    raw = uuid.bytes
    return make_uuid(int.from_bytes(bytes(raw[i] for i in _FROM_SORT_KEY), "big"))


def from_sqlserver_order(uuid: UUID) -> UUID:
    """Inverse of :func:`to_sqlserver_order`.

    >>> from_sqlserver_order(UUID("57809a09-02b3-cebc-774b-01890a5dac96"))
    UUID('01890a5d-ac96-774b-bcce-b302099a8057')
    """
    return make_uuid(int.from_bytes(sqlserver_sort_key(uuid), "big"))


class SqlServerOrderedGenerator:
    """UUIDv7 values stored so that SQL Server's ``uniqueidentifier`` sorts them by time.

    Each value is :func:`to_sqlserver_order` of the next UUIDv7 from the
    wrapped generator: strictly increasing under :func:`sqlserver_sort_key`
    (SQL Server's comparison), so inserts stay append-only in its indexes.
    The stored values are not version-7 UUIDs themselves; read the original
    back with :func:`from_sqlserver_order`.

    >>> generator = SqlServerOrderedGenerator()
    >>> stored = generator.batch(3)
    >>> sorted(stored, key=sqlserver_sort_key) == stored
    True
    >>> [from_sqlserver_order(value).version for value in stored]
    [7, 7, 7]
    """

    __slots__ = ("_generator",)

    def __init__(self, generator: UUIDv7Generator | None = None) -> None:
        self._generator = default_generator if generator is None else generator

    def __repr__(self) -> str:
        return f"SqlServerOrderedGenerator({self._generator!r})"

    def __call__(self, *, shift: Shift | None = None) -> UUID:
        """Return the next value, in SQL Server order."""
        return to_sqlserver_order(self._generator(shift=shift))

    def batch(self, count: int, *, shift: Shift | None = None) -> list[UUID]:
        """Return ``count`` values, increasing in SQL Server order."""
        return [to_sqlserver_order(value) for value in self._generator.batch(count, shift=shift)]
