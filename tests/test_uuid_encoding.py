"""Text/binary forms and parsing: Crockford Base32, hex, bytes, error messages."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqla_ids import UUIDFormatError, parse_uuid, to_base32, uuid7
from sqla_ids.identifiers import CROCKFORD_ALPHABET, from_base32

pytestmark = pytest.mark.pure_python

uuids = st.integers(0, (1 << 128) - 1).map(lambda n: uuid.UUID(int=n))


def reference_base32(value: uuid.UUID) -> str:
    """Independent encoder: 26 digits of 5 bits, most significant first."""
    number = value.int
    return "".join(CROCKFORD_ALPHABET[(number >> (5 * i)) & 31] for i in range(25, -1, -1))


@given(uuids)
def test_base32_round_trip_and_matches_reference(value: uuid.UUID) -> None:
    text = to_base32(value)
    assert text == reference_base32(value)
    assert len(text) == 26 and text[0] in "01234567"
    assert from_base32(text) == value
    assert from_base32(text.lower()) == value
    assert parse_uuid(text) == value


@given(uuids)
def test_every_spelling_parses(value: uuid.UUID) -> None:
    for spelling in (
        str(value),
        str(value).upper(),
        value.hex,
        f"{{{value}}}",
        f"urn:uuid:{value}",
        value.bytes,
        bytearray(value.bytes),
        f"  {value}\n",
    ):
        parsed = parse_uuid(spelling)
        assert parsed == value and type(parsed) is uuid.UUID


def test_base32_sorts_like_the_uuid() -> None:
    values = sorted(uuid.uuid4() for _ in range(2000)) + [uuid7() for _ in range(10)]
    values.sort()
    texts = [to_base32(v) for v in values]
    assert texts == sorted(texts)


def test_crockford_aliases() -> None:
    value = from_base32("01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert from_base32("oIARZ3NDEKTSV4RRFFQ69G5FAV") == value  # O->0, I->1
    assert from_base32("0lARZ3NDEKTSV4RRFFQ69G5FAV") == value  # l->1
    assert from_base32("01ARZ-3NDEK-TSV4R-RFFQ6-9G5FAV") == value  # hyphens ignored
    assert to_base32(value) == "01ARZ3NDEKTSV4RRFFQ69G5FAV"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("01ARZ3NDEKTSV4RRFFQ69G5FA", "26 symbols|32 hex digits"),
        ("01ARZ3NDEKTSV4RRFFQ69G5FAU", r"invalid Crockford Base32 character\(s\) 'U'"),
        ("81ARZ3NDEKTSV4RRFFQ69G5FAV", "exceeds 128 bits"),
    ],
)
def test_base32_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(UUIDFormatError, match=message):
        from_base32(text) if len(text) == 26 else parse_uuid(text)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "empty string"),
        ("nonsense", "expected 32 hex digits"),
        ("0190a6c4-0000-7000-8000-00000000000g", r"non-hex character\(s\) 'g'"),
        ("0x90a6c4000070008000000000000000", r"non-hex character\(s\) 'x'"),
        ("0190a6c40-000-7000-8000-000000000000", "8-4-4-4-12"),
        (b"\x00" * 15, "16 bytes, got 15"),
        (12345, "cannot read a UUID from int"),
    ],
)
def test_parse_errors_name_the_problem(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_uuid(value)  # type: ignore[arg-type]
