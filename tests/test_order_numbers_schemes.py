"""The unencrypted schemes share the codec's parse/format surface."""

from __future__ import annotations

import datetime as dt

import pytest

from sqla_ids.order_numbers import (
    BadLengthError,
    Keyring,
    MonthPrefixedScheme,
    NotIssuedError,
    OrderNumberCodec,
    OrderNumberScheme,
    PlainSequenceScheme,
    RandomIncrementScheme,
    ValueOutOfRangeError,
    WrongCheckDigitError,
)

pytestmark = pytest.mark.pure_python


def test_every_scheme_offers_the_same_surface() -> None:
    for scheme in (
        OrderNumberCodec("x", keyring=Keyring(environ={})),
        PlainSequenceScheme(),
        RandomIncrementScheme(),
        MonthPrefixedScheme(),
    ):
        assert isinstance(scheme, OrderNumberScheme)


def test_plain_sequence() -> None:
    plain = PlainSequenceScheme(check_digit="verhoeff", separator=".")
    text = plain.encode(123_456)
    assert text[:-1] == "001.234.56"  # 8 digits, check digit last
    assert plain.decode(text.replace(".", "")) == 123_456
    assert plain.encode(2**63 - 1).replace(".", "")[:-1] == str(2**63 - 1)
    with pytest.raises(WrongCheckDigitError):
        plain.decode(text[:-1] + str((int(text[-1]) + 1) % 10))
    with pytest.raises(ValueOutOfRangeError):
        plain.encode(0)
    # Well formed but never issued: a 9-digit payload with a leading zero,
    # or a 19-digit value beyond a signed bigint.
    for payload in ("012345678", "9" * 19):
        with pytest.raises(NotIssuedError):
            plain.decode(plain.format.format(payload))


def test_random_increments_stay_in_their_blocks() -> None:
    scheme = RandomIncrementScheme(spread=1000)
    values = [scheme.value_for(s) for s in range(1, 200)]
    assert values == sorted(set(values))  # unique and increasing
    assert [scheme.sequence_value_of(v) for v in values] == list(range(1, 200))
    assert len({v % 1000 for v in values}) > 50  # the offsets really vary
    assert scheme.decode(scheme.encode(values[0])) == values[0]
    with pytest.raises(ValueError, match="spread"):
        RandomIncrementScheme(spread=1)


def test_month_prefixed() -> None:
    scheme = MonthPrefixedScheme(epoch=dt.date(2020, 1, 1), sequence_digits=6)
    text = scheme.encode_for(dt.date(2025, 3, 31), 42)
    assert text.replace("-", "")[:9] == "062000042"
    assert scheme.split(scheme.decode(text)) == (dt.date(2025, 3, 1), 42)
    assert scheme.encode_for(dt.date(2020, 1, 5), 1).startswith("000-000-001")
    with pytest.raises(ValueOutOfRangeError, match="1000 months"):
        scheme.month_index(dt.date(2019, 12, 1))
    with pytest.raises(ValueOutOfRangeError):
        scheme.compose(dt.date(2025, 3, 1), 0)
    with pytest.raises(NotIssuedError):
        scheme.decode(scheme.format.format("062000000"))
    with pytest.raises(BadLengthError):
        scheme.validate("123456")
    with pytest.raises(ValueError, match="first day"):
        MonthPrefixedScheme(epoch=dt.date(2020, 1, 2))
