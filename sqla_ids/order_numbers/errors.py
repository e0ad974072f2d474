"""Exceptions of the order-number codec.

Every rejection of user input is its own class so callers (and support
agents) learn *why* a number was refused; all are ``ValueError`` subclasses.
Messages never contain key or tweak material.

>>> from sqla_ids.order_numbers import OrderNumberFormat
>>> try:
...     OrderNumberFormat().validate("123-456-781")
... except OrderNumberError as error:  # also a ValueError
...     print(type(error).__name__, isinstance(error, ValueError))
WrongCheckDigitError True
"""

from __future__ import annotations

from sqla_ids.errors import SqlaIdsError


class OrderNumberError(SqlaIdsError, ValueError):
    """Base class of every order-number input error."""


class BadLengthError(OrderNumberError):
    """The number has too few or too many characters."""


class BadCharacterError(OrderNumberError):
    """The number contains a character outside its alphabet."""


class MisplacedSeparatorError(OrderNumberError):
    """A separator is not between two groups of characters."""


class WrongCheckDigitError(OrderNumberError):
    """The check digit does not match: the number was probably mistyped."""


class NotIssuedError(OrderNumberError):
    """The number is well formed but can never have been issued by this format."""


class ValueOutOfRangeError(OrderNumberError):
    """A sequence value outside the range the format can encode."""


class SkippedValueError(OrderNumberError):
    """This sequence value encrypts to all zeros and must be skipped (step 4 of
    the algorithm, docs/order_numbers.md)."""


class KeyConfigurationError(SqlaIdsError, ValueError):
    """An FPE key or tweak is missing or malformed (the message never shows the secret)."""


class MissingKeyError(KeyConfigurationError):
    """No key is configured under the requested name."""


class SelfCheckError(SqlaIdsError, RuntimeError):
    """An encoded number failed its own verification; this indicates a bug."""
