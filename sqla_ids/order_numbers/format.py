"""How an order number is displayed and read back: check digit and groups.

An :class:`OrderNumberFormat` knows the payload alphabet, its length bounds, the
check-digit algorithm and the grouping. It formats payloads for display and
turns user input into the canonical display form, rejecting it with a
specific error (length, character, separator position, check digit). It
needs no key: input is validated before any query or decryption.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sqla_ids.order_numbers.alphabets import Alphabet, get_alphabet
from sqla_ids.order_numbers.check_digits import CheckDigit, get_check_digit
from sqla_ids.order_numbers.errors import (
    BadCharacterError,
    BadLengthError,
    MisplacedSeparatorError,
    WrongCheckDigitError,
)

__all__ = ["INPUT_SEPARATORS", "SEPARATORS", "FormatInput", "OrderNumber", "OrderNumberFormat"]

#: Separators a format can display.
SEPARATORS = ("-", ".", "/", "")
#: Characters tolerated between groups on input (spaces, dashes, dots, slashes…).
INPUT_SEPARATORS = frozenset("-./_ \t\u00a0\u2009\u202f\u2010\u2011\u2012\u2013\u2014\u2212")
#: Inputs longer than this are refused before looking at them.
_MAX_INPUT = 200


@dataclass(frozen=True)
class OrderNumber:
    """A parsed, check-digit-verified order number.

    >>> number = OrderNumberFormat().parse("123 456 782")
    >>> number
    OrderNumber(display='123-456-782', payload='12345678', check='2')
    >>> print(number)
    123-456-782
    """

    #: The canonical display form, as stored in the database.
    display: str
    #: The characters before the check character (the ciphertext for FPE formats).
    payload: str
    #: The check character ("" when the format has none).
    check: str

    def __str__(self) -> str:
        return self.display


class OrderNumberFormat:
    """Check digit plus grouping for payloads of one alphabet and length range.

    >>> fmt = OrderNumberFormat()  # decimal, Luhn, groups of three joined by "-"
    >>> fmt
    OrderNumberFormat(alphabet='decimal', check_digit='luhn', separator='-', group_size=3)
    >>> fmt.format("12345678")
    '123-456-782'
    >>> fmt.validate(" 123 456 782 "), fmt.validate("123456782")
    ('123-456-782', '123-456-782')
    >>> fmt.is_valid("123-456-781")
    False
    >>> fmt.min_length, fmt.max_length, fmt.templates()[0]
    (11, 26, 'PPP-PPP-PPC')

    Each rejection names its reason:

    >>> fmt.parse("123-456-781")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.WrongCheckDigitError: the check digit is wrong: ...
    >>> fmt.parse("123-456-78x")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.BadCharacterError: character 'x' at position 11 is not ...
    >>> fmt.parse("12-3456-782")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.MisplacedSeparatorError: a separator after character 2 ...
    >>> fmt.parse("123-45")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.BadLengthError: the order number has 5 characters ...
    """

    def __init__(
        self,
        alphabet: Alphabet | str = "decimal",
        check_digit: CheckDigit | str = "luhn",
        *,
        separator: str = "-",
        group_size: int = 3,
        min_payload: int | None = None,
        max_payload: int | None = None,
    ) -> None:
        self.alphabet = get_alphabet(alphabet)
        self.check_digit = get_check_digit(check_digit)
        if separator not in SEPARATORS:
            raise ValueError(f"separator must be one of {SEPARATORS!r}, not {separator!r}")
        if group_size < 1:
            raise ValueError("group_size must be at least 1")
        if not self.check_digit.accepts_letters and not self.alphabet.symbols.isdecimal():
            raise ValueError(
                f"check digit {self.check_digit.name!r} works on decimal digits only; "
                f"use 'luhn-letters' or 'none' with the {self.alphabet.name} alphabet"
            )
        self.separator = separator
        self.group_size = group_size
        self.min_payload = self.alphabet.min_width if min_payload is None else min_payload
        self.max_payload = self.alphabet.max_width if max_payload is None else max_payload
        if not 1 <= self.min_payload <= self.max_payload:
            raise ValueError("need 1 <= min_payload <= max_payload")
        self._display_pattern = re.compile(self.display_regex())

    def __repr__(self) -> str:
        return (
            f"OrderNumberFormat(alphabet={self.alphabet.name!r}, "
            f"check_digit={self.check_digit.name!r}, "
            f"separator={self.separator!r}, group_size={self.group_size})"
        )

    # -- bounds -----------------------------------------------------------------

    @property
    def min_symbols(self) -> int:
        """Fewest characters of a number, separators not counted."""
        return self.min_payload + self.check_digit.width

    @property
    def max_symbols(self) -> int:
        """Most characters of a number, separators not counted."""
        return self.max_payload + self.check_digit.width

    def display_length(self, symbols: int) -> int:
        """Displayed length of a number of ``symbols`` characters."""
        return symbols + (len(self.separator) * ((symbols - 1) // self.group_size))

    @property
    def min_length(self) -> int:
        """Fewest characters as displayed (with separators)."""
        return self.display_length(self.min_symbols)

    @property
    def max_length(self) -> int:
        """Most characters as displayed (with separators)."""
        return self.display_length(self.max_symbols)

    # -- output -----------------------------------------------------------------

    def group(self, symbols: str) -> str:
        """Insert the separator every ``group_size`` characters from the left.

        >>> OrderNumberFormat(separator=".", group_size=4).group("1234567890")
        '1234.5678.90'
        """
        g = self.group_size
        return self.separator.join([symbols[i : i + g] for i in range(0, len(symbols), g)])

    def format(self, payload: str) -> str:
        """Append the check character to ``payload`` and group it for display."""
        return self.group(payload + self.check_digit.compute(payload))

    def templates(self) -> list[str]:
        """Display shapes, one per length: ``P`` payload, ``C`` check, separators literal."""
        shapes = []
        for payload in range(self.min_payload, self.max_payload + 1):
            shapes.append(self.group("P" * payload + "C" * self.check_digit.width))
        return shapes

    @property
    def payload_class(self) -> str:
        """Bracket expression of a payload character (regex and GLOB syntax)."""
        return _bracket(self.alphabet.symbols)

    @property
    def check_class(self) -> str:
        """Bracket expression of the check character."""
        return _bracket(self.check_digit.symbols) if self.check_digit.symbols else ""

    def display_regex(self) -> str:
        """Anchored regular expression of the display form (POSIX ERE, also Python ``re``).

        Bracket classes and ``{n}`` counts only, so PostgreSQL (``~``) and
        MariaDB (``REGEXP``) CHECK constraints can use it as is.

        >>> OrderNumberFormat(min_payload=8, max_payload=8).display_regex()
        '^([0-9]{3}-[0-9]{3}-[0-9]{3})$'
        """
        payload = self.payload_class
        check = self.check_class
        separator = "\\" + self.separator if self.separator == "." else self.separator
        shapes = []
        for template in self.templates():
            parts = []
            for group in template.split(self.separator) if self.separator else [template]:
                pieces = [payload] * group.count("P") + [check] * group.count("C")
                parts.append("".join(_runs(pieces)))
            shapes.append(separator.join(parts))
        return "^(" + "|".join(shapes) + ")$"

    # -- input ------------------------------------------------------------------

    def symbols(self, text: str) -> str:
        """Canonical characters of ``text`` without separators; checks all but the check digit."""
        if not isinstance(text, str):
            raise BadCharacterError(f"an order number must be text, not {type(text).__name__}")
        stripped = text.strip()
        if not stripped:
            raise BadLengthError("the order number is empty")
        if len(stripped) > _MAX_INPUT:
            raise BadLengthError(
                f"the order number has {len(stripped)} characters; "
                f"at most {self.max_length} are expected"
            )
        canonical = self.alphabet.canonical_char
        check_symbols = self.check_digit.symbols
        chars: list[str] = []
        boundaries: list[int] = []
        after_separator = False
        for position, char in enumerate(stripped, 1):
            symbol = canonical(char)
            if symbol is None and char in check_symbols:
                symbol = char
            if symbol is not None:
                chars.append(symbol)
                after_separator = False
            elif char in INPUT_SEPARATORS:
                if not after_separator:  # "943 - 130" counts as one separator
                    boundaries.append(len(chars))
                after_separator = True
            else:
                raise BadCharacterError(
                    f"character {char!r} at position {position} is not allowed: "
                    f"an order number holds only {self.alphabet.description}"
                )
        count = len(chars)
        if not self.min_symbols <= count <= self.max_symbols:
            raise BadLengthError(
                f"the order number has {count} characters (separators not counted); "
                f"it must have {self.min_symbols} to {self.max_symbols}"
            )
        for boundary in boundaries:
            if not 0 < boundary < count or boundary % self.group_size:
                raise MisplacedSeparatorError(
                    f"a separator after character {boundary} is misplaced: separators go "
                    f"between groups of {self.group_size} characters, counted from the left"
                )
        return "".join(chars)

    def normalize(self, text: str) -> str:
        """Display form of ``text``; checks all but the check digit.

        >>> OrderNumberFormat().normalize("123 456 781")  # wrong check digit not noticed
        '123-456-781'
        """
        return self.group(self.symbols(text))

    def parse(self, text: str) -> OrderNumber:
        """Parse user input fully, including the check digit."""
        symbols = self.symbols(text)
        width = self.check_digit.width
        payload = symbols[: len(symbols) - width]
        check = symbols[len(symbols) - width :]
        if width and self.check_digit.compute(payload) != check:
            raise WrongCheckDigitError(
                "the check digit is wrong: the order number was probably mistyped "
                "(a character changed or two characters swapped)"
            )
        return OrderNumber(display=self.group(symbols), payload=payload, check=check)

    def payloads(self, texts: Iterable[str]) -> list[str]:
        """Payloads of many inputs (check digits verified); fast for display-form input."""
        canonical = self._display_pattern.fullmatch
        separator = self.separator
        width = self.check_digit.width
        compute = self.check_digit.compute
        result = []
        for text in texts:
            if isinstance(text, str) and canonical(text):
                symbols = text.replace(separator, "") if separator else text
                payload = symbols[: len(symbols) - width]
                if not width or compute(payload) == symbols[-1]:
                    result.append(payload)
                    continue
            result.append(self.parse(text).payload)  # raises the specific error
        return result

    def validate(self, text: str) -> str:
        """Return the display form of ``text`` or raise the specific error."""
        return self.parse(text).display

    def is_valid(self, text: str) -> bool:
        """Whether ``text`` is a well-formed number with a correct check digit."""
        try:
            self.parse(text)
        except ValueError:
            return False
        return True


def _runs(pieces: list[str]) -> Iterator[str]:
    # ["[0-9]", "[0-9]", "[0-9]"] -> "[0-9]{3}"
    index = 0
    while index < len(pieces):
        end = index
        while end < len(pieces) and pieces[end] == pieces[index]:
            end += 1
        count = end - index
        yield pieces[index] + (f"{{{count}}}" if count > 1 else "")
        index = end


def _bracket(symbols: str) -> str:
    # "0123456789" -> "[0-9]": ranges of 3+ consecutive code points.
    codes = sorted(map(ord, symbols))
    parts = []
    start = 0
    while start < len(codes):
        end = start
        while end + 1 < len(codes) and codes[end + 1] == codes[end] + 1:
            end += 1
        if end - start >= 2:
            parts.append(f"{chr(codes[start])}-{chr(codes[end])}")
        else:
            parts.extend(chr(c) for c in codes[start : end + 1])
        start = end + 1
    return "[" + "".join(parts) + "]"


class FormatInput:
    """The user-input half of a scheme (parse/validate/normalize), served by its ``format``.

    Input handling needs no key: any scheme built on an :class:`OrderNumberFormat` shares it.
    """

    format: OrderNumberFormat

    def parse(self, text: str) -> OrderNumber:
        """Parse user input, check digit verified."""
        return self.format.parse(text)

    def validate(self, text: str) -> str:
        """Display form of valid input, else the specific error."""
        return self.format.validate(text)

    def normalize(self, text: str) -> str:
        """Display form; characters, length and separators checked."""
        return self.format.normalize(text)

    def is_valid(self, text: str) -> bool:
        """Whether ``text`` is well formed with a correct check digit."""
        return self.format.is_valid(text)
