"""Customer-facing order numbers: FF3-1 + check digit (docs/order_numbers.md).

Pure Python (no SQLAlchemy import): the codec, its check digits, alphabets,
keyring, batch FF3-1 engine and the unencrypted schemes. The column type
lives in :mod:`sqla_ids.types.order_number`.

>>> from sqla_ids.order_numbers import Keyring, OrderNumberCodec
>>> ring = Keyring(environ={})
>>> _ = ring.register("sample", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
>>> codec = OrderNumberCodec("sample", keyring=ring)  # published sample key: never in production
>>> number = codec.encode(1)
>>> number, codec.decode(number), codec.is_valid(number)
('943-130-351', 1, True)
"""

from __future__ import annotations

from sqla_ids.order_numbers.alphabets import ALPHABETS, CROCKFORD32, DECIMAL, Alphabet
from sqla_ids.order_numbers.check_digits import (
    CHECK_DIGITS,
    CheckDigit,
    damm_check_digit,
    luhn_check_digit,
    luhn_letters_check_digit,
    verhoeff_check_digit,
)
from sqla_ids.order_numbers.codec import OrderNumberCodec
from sqla_ids.order_numbers.errors import (
    BadCharacterError,
    BadLengthError,
    KeyConfigurationError,
    MisplacedSeparatorError,
    MissingKeyError,
    NotIssuedError,
    OrderNumberError,
    SelfCheckError,
    SkippedValueError,
    ValueOutOfRangeError,
    WrongCheckDigitError,
)
from sqla_ids.order_numbers.ff3_batch import FF3Engine
from sqla_ids.order_numbers.format import SEPARATORS, OrderNumber, OrderNumberFormat
from sqla_ids.order_numbers.keyring import FPEKey, Keyring, default_keyring, register_key
from sqla_ids.order_numbers.schemes import (
    MonthPrefixedScheme,
    OrderNumberScheme,
    PlainSequenceScheme,
    RandomIncrementScheme,
    SequenceScheme,
)

__all__ = [
    "ALPHABETS",
    "CHECK_DIGITS",
    "CROCKFORD32",
    "DECIMAL",
    "SEPARATORS",
    "Alphabet",
    "BadCharacterError",
    "BadLengthError",
    "CheckDigit",
    "FF3Engine",
    "FPEKey",
    "KeyConfigurationError",
    "Keyring",
    "MisplacedSeparatorError",
    "MissingKeyError",
    "MonthPrefixedScheme",
    "NotIssuedError",
    "OrderNumber",
    "OrderNumberCodec",
    "OrderNumberError",
    "OrderNumberFormat",
    "OrderNumberScheme",
    "PlainSequenceScheme",
    "RandomIncrementScheme",
    "SelfCheckError",
    "SequenceScheme",
    "SkippedValueError",
    "ValueOutOfRangeError",
    "WrongCheckDigitError",
    "damm_check_digit",
    "default_keyring",
    "luhn_check_digit",
    "luhn_letters_check_digit",
    "register_key",
    "verhoeff_check_digit",
]
