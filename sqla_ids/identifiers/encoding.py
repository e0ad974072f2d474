"""Text and binary forms of a UUID: canonical, 32-hex, 16 bytes, Crockford Base32.

Crockford Base32 (``0123456789ABCDEFGHJKMNPQRSTVWXYZ``) writes 128 bits in 26
characters, exactly as ULID does, so a UUIDv7 and its ULID spelling agree.
Decoding is case-insensitive and reads ``O`` as 0 and ``I``/``L`` as 1.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from uuid import UUID

from sqla_ids.identifiers.generator import make_uuid

CROCKFORD_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_BASE32HEX_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUV"  # digit values 0-31, like int(x, 32)
_TO_CROCKFORD = str.maketrans(_BASE32HEX_ALPHABET, CROCKFORD_ALPHABET)
# Crockford symbol -> Python's base-32 digit, with the documented aliases.
_FROM_CROCKFORD = str.maketrans(
    CROCKFORD_ALPHABET + CROCKFORD_ALPHABET.lower() + "OoIiLl",
    _BASE32HEX_ALPHABET * 2 + "001111",
)
_CROCKFORD_INPUT = frozenset(CROCKFORD_ALPHABET + CROCKFORD_ALPHABET.lower() + "OoIiLl")
BASE32_LENGTH = 26
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class UUIDFormatError(ValueError):
    """A value could not be read as a UUID; the message says why."""


def to_base32(uuid: UUID) -> str:
    """Return the 26-character Crockford Base32 form of ``uuid`` (upper case).

    >>> from uuid import UUID
    >>> to_base32(UUID("01890a5d-ac96-774b-bcce-b302099a8057"))
    '01H455VB4PEX5VSKNK084SN02Q'
    """
    # b32hexencode groups bits from the left; shifting by 6 puts the two spare
    # bits of the 130-bit, 26-character field at the front, as ULID does.
    encoded = base64.b32hexencode((uuid.int << 6).to_bytes(17, "big"))
    return encoded[:BASE32_LENGTH].decode("ascii").translate(_TO_CROCKFORD)


def from_base32(text: str) -> UUID:
    """Read a 26-character Crockford Base32 string (hyphens allowed) as a UUID.

    Case-insensitive; ``O`` reads as 0 and ``I``/``L`` as 1:

    >>> from_base32("01H455VB4PEX5VSKNK084SN02Q")
    UUID('01890a5d-ac96-774b-bcce-b302099a8057')
    >>> from_base32("oih455vb4pex5vsknk084sn02q") == from_base32("01H455VB4PEX5VSKNK084SN02Q")
    True
    >>> from_base32("01H455VB4PEX5VSKNK084SN02U")
    Traceback (most recent call last):
    ...
    sqla_ids.identifiers.encoding.UUIDFormatError: invalid Crockford Base32 character(s) 'U' ...
    """
    cleaned = text.replace("-", "")
    if len(cleaned) != BASE32_LENGTH:
        raise UUIDFormatError(
            f"Crockford Base32 UUID must have {BASE32_LENGTH} symbols, got {len(cleaned)}"
        )
    bad = sorted(set(cleaned) - _CROCKFORD_INPUT)
    if bad:
        raise UUIDFormatError(
            f"invalid Crockford Base32 character(s) {''.join(bad)!r} "
            f"(allowed: {CROCKFORD_ALPHABET}, case-insensitive; U is not used)"
        )
    value = int(cleaned.translate(_FROM_CROCKFORD), 32)
    if value >> 128:
        raise UUIDFormatError(
            f"Crockford Base32 value {text!r} exceeds 128 bits (first symbol must be 0-7)"
        )
    return make_uuid(value)


def to_hex(uuid: UUID) -> str:
    """Return the 32 lower-case hex digits of ``uuid`` without dashes.

    >>> from uuid import UUID
    >>> to_hex(UUID("01890A5D-AC96-774B-BCCE-B302099A8057"))
    '01890a5dac96774bbcceb302099a8057'
    """
    return uuid.hex


def to_bytes(uuid: UUID) -> bytes:
    """Return the 16 big-endian bytes of ``uuid`` (RFC 9562 network order).

    >>> from uuid import UUID
    >>> to_bytes(UUID("01890a5d-ac96-774b-bcce-b302099a8057")).hex()
    '01890a5dac96774bbcceb302099a8057'
    """
    return uuid.bytes


FORMATTERS: dict[str, Callable[[UUID], str]] = {
    "canonical": str,
    "hex": to_hex,
    "base32": to_base32,
}
"""Text formatters by name, as used by the command line."""


def parse_uuid(value: UUID | str | bytes) -> UUID:
    """Read any supported spelling of a UUID and return a plain ``uuid.UUID``.

    Accepts a ``uuid.UUID``; 16 raw bytes; canonical, braced, ``urn:uuid:``
    or 32-hex text; and 26-character Crockford Base32. Raises
    :class:`UUIDFormatError` (a ``ValueError``) naming the problem otherwise.

    >>> parse_uuid("{01890A5D-AC96-774B-BCCE-B302099A8057}")
    UUID('01890a5d-ac96-774b-bcce-b302099a8057')
    >>> spellings = [
    ...     "01890a5d-ac96-774b-bcce-b302099a8057",
    ...     "urn:uuid:01890a5d-ac96-774b-bcce-b302099a8057",
    ...     "01890a5dac96774bbcceb302099a8057",
    ...     "01H455VB4PEX5VSKNK084SN02Q",
    ...     bytes.fromhex("01890a5dac96774bbcceb302099a8057"),
    ... ]
    >>> len({parse_uuid(spelling) for spelling in spellings})
    1
    >>> parse_uuid("01890a5d-ac96")
    Traceback (most recent call last):
    ...
    sqla_ids.identifiers.encoding.UUIDFormatError: '01890a5d-ac96' is not a UUID: ... 13 characters
    """
    if isinstance(value, UUID):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) != 16:
            raise UUIDFormatError(f"a binary UUID has 16 bytes, got {len(raw)}")
        return make_uuid(int.from_bytes(raw, "big"))
    if not isinstance(value, str):
        raise UUIDFormatError(f"cannot read a UUID from {type(value).__name__}")
    text = value.strip()
    if not text:
        raise UUIDFormatError("empty string is not a UUID")
    if len(text.replace("-", "")) == BASE32_LENGTH:
        return from_base32(text)
    lowered = text.lower()
    if lowered.startswith("urn:uuid:"):
        text = text[9:]
    text = text.strip("{}")
    digits = text.replace("-", "")
    if len(digits) != 32:
        given = value.strip()  # count what the user typed, dashes and all
        raise UUIDFormatError(
            f"{value!r} is not a UUID: expected 32 hex digits (36 characters with dashes) "
            f"or 26 Base32 symbols, got {len(given)} character{'s' * (len(given) != 1)}"
        )
    if "-" in text and [len(part) for part in text.split("-")] != [8, 4, 4, 4, 12]:
        raise UUIDFormatError(f"{value!r} is not a UUID: dashes must group digits 8-4-4-4-12")
    bad = sorted(set(digits) - _HEX_DIGITS)
    if bad:
        raise UUIDFormatError(f"{value!r} is not a UUID: non-hex character(s) {''.join(bad)!r}")
    return make_uuid(int(digits, 16))
