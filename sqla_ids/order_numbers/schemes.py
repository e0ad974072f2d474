"""Order-number schemes without encryption, with the codec's parse/format surface.

Every scheme offers ``encode``/``decode``/``parse``/``validate``/``normalize``/
``is_valid`` and a ``format``, so the column type and the CLI accept any of
them (see :class:`OrderNumberScheme`). Trade-offs are in docs/order_numbers.md.
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Protocol, runtime_checkable

from sqla_ids.order_numbers.check_digits import CheckDigit
from sqla_ids.order_numbers.errors import NotIssuedError, ValueOutOfRangeError
from sqla_ids.order_numbers.format import FormatInput, OrderNumber, OrderNumberFormat

__all__ = [
    "MonthPrefixedScheme",
    "OrderNumberScheme",
    "PlainSequenceScheme",
    "RandomIncrementScheme",
    "SequenceScheme",
]


@runtime_checkable
class OrderNumberScheme(Protocol):
    """What the column type and the CLI need from a numbering scheme.

    >>> isinstance(PlainSequenceScheme(), OrderNumberScheme)
    True
    """

    format: OrderNumberFormat

    def encode(self, value: int) -> str:
        """Display form of a sequence value."""

    def decode(self, text: str) -> int:
        """Sequence value behind user input."""

    def parse(self, text: str) -> OrderNumber:
        """Parsed, check-digit-verified input."""

    def validate(self, text: str) -> str:
        """Display form of valid input, else a specific error."""

    def normalize(self, text: str) -> str:
        """Display form, check digit not verified."""

    def is_valid(self, text: str) -> bool:
        """Whether input is valid."""


@runtime_checkable
class SequenceScheme(OrderNumberScheme, Protocol):
    """A scheme that numbers the values of a database sequence (a column default).

    :meth:`value_for` maps each value the sequence gives to the value
    :meth:`encode` takes: the value itself, except for
    :class:`RandomIncrementScheme`. ``MonthPrefixedScheme`` is not one: its
    per-month counter is not a database sequence.

    >>> isinstance(RandomIncrementScheme(), SequenceScheme)
    True
    >>> isinstance(MonthPrefixedScheme(), SequenceScheme)
    False
    """

    def value_for(self, sequence_value: int) -> int:
        """The value to encode for the database sequence value ``sequence_value``."""


class PlainSequenceScheme(FormatInput):
    """The sequence value itself, zero-padded, grouped, with a check digit.

    Fast and needs no secret, but numbers are guessable and reveal volume.

    >>> scheme = PlainSequenceScheme()
    >>> scheme.encode(42)
    '000-000-422'
    >>> scheme.decode("000 000 422")
    42
    >>> scheme.decode("000-000-423")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.WrongCheckDigitError: the check digit is wrong: ...
    >>> PlainSequenceScheme(check_digit="damm", separator="", min_digits=6).encode(42)
    '0000427'
    """

    def __init__(
        self,
        *,
        min_digits: int = 8,
        max_digits: int = 19,
        check_digit: CheckDigit | str = "luhn",
        separator: str = "-",
        group_size: int = 3,
    ) -> None:
        self.format = OrderNumberFormat(
            "decimal",
            check_digit,
            separator=separator,
            group_size=group_size,
            min_payload=min_digits,
            max_payload=max_digits,
        )
        self.max_value = min(10**max_digits - 1, 2**63 - 1)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.format!r})"

    def encode(self, value: int) -> str:
        """Display form of ``value``."""
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 1 <= value <= self.max_value
        ):
            raise ValueOutOfRangeError(
                f"sequence value {value!r} is outside 1..{self.max_value} for this format"
            )
        return self.format.format(str(value).zfill(self.format.min_payload))

    def value_for(self, sequence_value: int) -> int:
        """The value to encode for a database sequence value: the value itself."""
        return sequence_value

    def decode(self, text: str) -> int:
        """Sequence value of valid input."""
        payload = self.format.parse(text).payload
        value = int(payload)
        leading_zero = len(payload) > self.format.min_payload and payload[0] == "0"
        if not 1 <= value <= self.max_value or leading_zero:
            raise NotIssuedError(
                f"order number {self.format.normalize(text)} is well formed but never issued"
            )
        return value


class RandomIncrementScheme(PlainSequenceScheme):
    """A sequence whose values advance by random steps, shown like a plain sequence.

    Each database sequence value ``s`` owns the block ``s * spread …
    s * spread + spread - 1`` and the issued number is a random member of its
    block: numbers stay unique and increasing without any locking (the
    atomic ``nextval`` is the only shared step), gaps of random size hide the
    volume, and only about one typed number in ``spread`` exists at all.

    >>> scheme = RandomIncrementScheme(spread=100)
    >>> value = scheme.value_for(7)  # random, from 700 to 799
    >>> 700 <= value <= 799, scheme.sequence_value_of(value)
    (True, 7)
    >>> scheme.encode(705), scheme.decode("000-007-054")
    ('000-007-054', 705)
    """

    def __init__(
        self,
        *,
        spread: int = 100,
        min_digits: int = 8,
        max_digits: int = 19,
        check_digit: CheckDigit | str = "luhn",
        separator: str = "-",
        group_size: int = 3,
    ) -> None:
        if spread < 2:
            raise ValueError("spread must be at least 2")
        super().__init__(
            min_digits=min_digits,
            max_digits=max_digits,
            check_digit=check_digit,
            separator=separator,
            group_size=group_size,
        )
        self.spread = spread

    def value_for(self, sequence_value: int) -> int:
        """A random number of the block owned by ``sequence_value`` (>= 1)."""
        if sequence_value < 1:
            raise ValueOutOfRangeError("sequence values start at 1")
        return sequence_value * self.spread + secrets.randbelow(self.spread)

    def sequence_value_of(self, value: int) -> int:
        """The sequence value whose block holds ``value``."""
        return value // self.spread


class MonthPrefixedScheme(FormatInput):
    """Three digits of months since ``epoch``, then a per-month sequence.

    ``2025-03`` with epoch 2020-01 and the 42nd order of the month is
    ``062`` + ``000042`` + check digit. Readable and sortable by month, but
    reveals monthly volume; the per-month counter resets each month.

    >>> import datetime as dt
    >>> scheme = MonthPrefixedScheme(epoch=dt.date(2020, 1, 1))
    >>> scheme.encode_for(dt.date(2025, 3, 9), 42)
    '062-000-042-2'
    >>> scheme.split(scheme.decode("062-000-042-2"))
    (datetime.date(2025, 3, 1), 42)
    >>> scheme.encode_for(dt.date(2019, 12, 31), 1)
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.ValueOutOfRangeError: 2019-12 is outside the 1000 months ...
    """

    def __init__(
        self,
        *,
        epoch: dt.date = dt.date(2020, 1, 1),
        sequence_digits: int = 6,
        check_digit: CheckDigit | str = "luhn",
        separator: str = "-",
        group_size: int = 3,
    ) -> None:
        if epoch.day != 1:
            raise ValueError("the epoch must be the first day of a month")
        self.epoch = epoch
        self.sequence_digits = sequence_digits
        width = 3 + sequence_digits
        self.format = OrderNumberFormat(
            "decimal",
            check_digit,
            separator=separator,
            group_size=group_size,
            min_payload=width,
            max_payload=width,
        )

    def __repr__(self) -> str:
        return f"MonthPrefixedScheme(epoch={self.epoch!r}, {self.format!r})"

    def month_index(self, day: dt.date) -> int:
        """Months from the epoch to ``day``'s month (0 for the epoch month)."""
        index = (day.year - self.epoch.year) * 12 + day.month - self.epoch.month
        if not 0 <= index <= 999:
            raise ValueOutOfRangeError(
                f"{day:%Y-%m} is outside the 1000 months from {self.epoch:%Y-%m}"
            )
        return index

    def compose(self, day: dt.date, sequence_value: int) -> int:
        """The value ``encode`` takes for the ``sequence_value``-th number of ``day``'s month."""
        if not 1 <= sequence_value < 10**self.sequence_digits:
            raise ValueOutOfRangeError(
                f"per-month sequence value {sequence_value} needs 1 to "
                f"{self.sequence_digits} digits"
            )
        return self.month_index(day) * int(10**self.sequence_digits) + sequence_value

    def split(self, value: int) -> tuple[dt.date, int]:
        """(first day of the month, per-month sequence value) of a composed value."""
        month, sequence_value = divmod(value, 10**self.sequence_digits)
        months = self.epoch.year * 12 + self.epoch.month - 1 + month
        return dt.date(months // 12, months % 12 + 1, 1), sequence_value

    def encode(self, value: int) -> str:
        """Display form of a composed value (see :meth:`compose`)."""
        limit = 1000 * 10**self.sequence_digits
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
            raise ValueOutOfRangeError(f"composed value {value!r} is outside 0..{limit - 1}")
        if value % 10**self.sequence_digits == 0:
            raise ValueOutOfRangeError("per-month sequence values start at 1")
        return self.format.format(str(value).zfill(self.format.min_payload))

    def encode_for(self, day: dt.date, sequence_value: int) -> str:
        """Display form of the ``sequence_value``-th number of ``day``'s month."""
        return self.encode(self.compose(day, sequence_value))

    def decode(self, text: str) -> int:
        """Composed value of valid input (use :meth:`split` for month and counter)."""
        value = int(self.format.parse(text).payload)
        if value % 10**self.sequence_digits == 0:
            raise NotIssuedError(
                f"order number {self.format.normalize(text)} is well formed but never issued"
            )
        return value
