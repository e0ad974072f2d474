"""``UUID192``: a 128-bit UUID followed by an optional 64-bit segment.

The segment carries data a plain UUID cannot: a shard or partition id, a
source system, a table code, an archive flag, a checksum. The leading 128
bits stay an ordinary UUID, so joins can use them alone.

Text form: the canonical UUID, a dash, and 16 hex digits
(``0190a6c4-…-8f3e2b1c4d5a6e7f-000000000000002a``); binary form: 16 or 24
bytes, big-endian.
"""

from __future__ import annotations

import builtins
from uuid import UUID

from sqla_ids.identifiers.encoding import UUIDFormatError, parse_uuid

SEGMENT_BITS = 64
_SEGMENT_MAX = (1 << SEGMENT_BITS) - 1
_UUID_TEXT_LENGTH = 36
_TEXT_LENGTH = _UUID_TEXT_LENGTH + 1 + 16
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class UUID192:
    """An immutable (UUID, optional 64-bit segment) pair with total ordering.

    >>> key = UUID192("01890a5d-ac96-774b-bcce-b302099a8057", 42)
    >>> key
    UUID192('01890a5d-ac96-774b-bcce-b302099a8057', 42)
    >>> print(key)
    01890a5d-ac96-774b-bcce-b302099a8057-000000000000002a
    >>> key.uuid.version, key.segment, len(key.bytes)
    (7, 42, 24)
    >>> UUID192.parse(str(key)) == key == UUID192.from_bytes(key.bytes)
    True
    >>> UUID192(key.uuid) < key  # no segment sorts before any segment
    True
    >>> UUID192(key.uuid, 2**64)
    Traceback (most recent call last):
    ...
    ValueError: segment must be an integer from 0 to 2**64-1, got 18446744073709551616
    """

    __slots__ = ("_segment", "_uuid")

    _uuid: UUID
    _segment: int | None

    def __init__(self, uuid: UUID | str | bytes, segment: int | None = None) -> None:
        if segment is not None and (
            not isinstance(segment, int)
            or isinstance(segment, bool)
            or not 0 <= segment <= _SEGMENT_MAX
        ):
            raise ValueError(f"segment must be an integer from 0 to 2**64-1, got {segment!r}")
        object.__setattr__(self, "_uuid", parse_uuid(uuid))
        object.__setattr__(self, "_segment", segment)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("UUID192 values are immutable")

    @property
    def uuid(self) -> UUID:
        """The leading 128-bit UUID."""
        return self._uuid

    @property
    def segment(self) -> int | None:
        """The trailing 64-bit segment, or ``None`` when absent."""
        return self._segment

    @property
    def bytes(self) -> builtins.bytes:
        """16 bytes (no segment) or 24 bytes, big-endian."""
        if self._segment is None:
            return self._uuid.bytes
        return self._uuid.bytes + self._segment.to_bytes(8, "big")

    def __str__(self) -> str:
        if self._segment is None:
            return str(self._uuid)
        return f"{self._uuid}-{self._segment:016x}"

    def __repr__(self) -> str:
        return f"UUID192({str(self._uuid)!r}, {self._segment!r})"

    def _key(self) -> tuple[int, int]:
        return (self._uuid.int, -1 if self._segment is None else self._segment)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UUID192) and self._key() == other._key()

    def __lt__(self, other: UUID192) -> bool:
        return self._key() < other._key()

    def __le__(self, other: UUID192) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: UUID192) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: UUID192) -> bool:
        return self._key() >= other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @classmethod
    def from_bytes(cls, data: builtins.bytes) -> UUID192:
        """Read 16 or 24 big-endian bytes."""
        if len(data) == 16:
            return cls(data)
        if len(data) != 24:
            raise UUIDFormatError(f"a binary UUID192 has 16 or 24 bytes, got {len(data)}")
        return cls(data[:16], int.from_bytes(data[16:], "big"))

    @classmethod
    def parse(cls, text: str) -> UUID192:
        """Read the text form (a bare UUID is accepted, without segment)."""
        text = text.strip()
        if len(text) == _TEXT_LENGTH and text[_UUID_TEXT_LENGTH] == "-":
            return cls(text[:_UUID_TEXT_LENGTH], segment_of(text))
        return cls(text)


def segment_of(data: str | bytes) -> int:
    """Return the 64-bit segment of a UUID192 in text or binary form, without parsing the UUID.

    >>> segment_of("01890a5d-ac96-774b-bcce-b302099a8057-000000000000002a")
    42
    >>> segment_of(bytes(16) + (7).to_bytes(8, "big"))
    7
    """
    if isinstance(data, str):
        if len(data) != _TEXT_LENGTH:
            raise UUIDFormatError(
                f"a UUID192 with segment has {_TEXT_LENGTH} characters, got {len(data)}"
            )
        tail = data[_UUID_TEXT_LENGTH + 1 :]
        if data[_UUID_TEXT_LENGTH] != "-" or not set(tail) <= _HEX_DIGITS:
            raise UUIDFormatError(f"segment {tail!r} is not a dash and 16 hex digits")
        return int(tail, 16)
    if len(data) != 24:
        raise UUIDFormatError(f"a binary UUID192 with segment has 24 bytes, got {len(data)}")
    return int.from_bytes(data[16:], "big")
