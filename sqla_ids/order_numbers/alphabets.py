"""Alphabets an order number can be written in.

The value is written in the alphabet first and then encrypted in it, so the
alphabet fixes the FF3-1 radix and the length bounds of a format.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["ALPHABETS", "CROCKFORD32", "DECIMAL", "Alphabet", "get_alphabet"]

# Digits ``int(text, radix)`` understands, used to convert in C instead of a loop.
_INT_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


@dataclass(frozen=True, eq=False)
class Alphabet:
    """An ordered set of symbols; the position of a symbol is its value.

    >>> DECIMAL.from_int(123, width=8), DECIMAL.to_int("00000123")
    ('00000123', 123)
    >>> CROCKFORD32.from_int(1234, width=6), CROCKFORD32.to_int("00016J")
    ('00016J', 1234)
    >>> CROCKFORD32.radix, CROCKFORD32.max_value == 2**63 - 1
    (32, True)

    Input may use aliases (Crockford reads ``O`` as 0, ``I``/``L`` as 1,
    any case); ``U`` is not a symbol:

    >>> [CROCKFORD32.canonical_char(c) for c in "oLjU"]
    ['0', '1', 'J', None]
    """

    name: str
    symbols: str
    #: Input characters accepted as another symbol (Crockford: ``O`` -> ``0``).
    aliases: dict[str, str] = field(default_factory=dict)
    #: Whether lower-case input is accepted (and upper-cased).
    case_insensitive: bool = False
    #: Zero-padded width of a plain value before encryption (domain >= 10**6).
    min_width: int = 8
    #: Widest value the format encodes (a PostgreSQL/MariaDB ``bigint`` fits).
    max_width: int = 19
    #: A human description used in error messages.
    description: str = "symbols of the alphabet"
    _to_int_digits: dict[int, str] = field(init=False, repr=False)
    _input_map: dict[str, str] = field(init=False, repr=False)
    _symbol_set: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if len(set(self.symbols)) != len(self.symbols) or len(self.symbols) < 2:
            raise ValueError(f"alphabet {self.name!r} needs at least two distinct symbols")
        if self.radix**self.min_width < 1_000_000:
            raise ValueError(
                f"alphabet {self.name!r}: min_width {self.min_width} gives fewer than "
                "1,000,000 values (FF3-1 domain requirement)"
            )
        table = {c: _INT_DIGITS[i] for i, c in enumerate(self.symbols)} if self.radix <= 36 else {}
        object.__setattr__(self, "_to_int_digits", str.maketrans(table))
        object.__setattr__(self, "_input_map", self._build_input_map())
        object.__setattr__(self, "_symbol_set", frozenset(self.symbols))

    def _build_input_map(self) -> dict[str, str]:
        mapping = dict(self.aliases)
        if self.case_insensitive:
            for alias, target in list(mapping.items()):
                mapping[alias.lower()] = target
            for symbol in self.symbols:
                if symbol.lower() != symbol:
                    mapping[symbol.lower()] = symbol
        return mapping

    @property
    def radix(self) -> int:
        """Number of symbols."""
        return len(self.symbols)

    @property
    def zero(self) -> str:
        """The symbol of value 0 (padding character)."""
        return self.symbols[0]

    def is_word(self, text: str) -> bool:
        """Whether ``text`` consists of this alphabet's symbols only (no aliases)."""
        if self.symbols == "0123456789":
            return text.isascii() and text.isdigit()  # int() would also take "_", "+", " "
        return set(text) <= self._symbol_set

    def canonical_char(self, char: str) -> str | None:
        """Return the symbol ``char`` stands for on input, or ``None`` if it is not one."""
        if char in self.symbols:
            return char
        return self._input_map.get(char)

    def to_int(self, text: str) -> int:
        """Value of ``text`` (most significant symbol first)."""
        if self.radix == 10 and self.symbols == "0123456789":
            return int(text)
        if self.radix <= 36:
            return int(text.translate(self._to_int_digits), self.radix)
        value = 0
        for char in text:
            value = value * self.radix + self.symbols.index(char)
        return value

    def from_int(self, value: int, width: int = 0) -> str:
        """``value`` written in this alphabet, left-padded with the zero symbol to ``width``."""
        if self.radix == 10 and self.symbols == "0123456789":
            return str(value).zfill(width)
        chars = []
        while value:
            value, digit = divmod(value, self.radix)
            chars.append(self.symbols[digit])
        text = "".join(reversed(chars))
        return text.rjust(width, self.symbols[0])

    def width_of(self, value: int) -> int:
        """Number of symbols of ``value`` once padded to ``min_width``."""
        return max(self.min_width, len(self.from_int(value)))

    @property
    def max_value(self) -> int:
        """Largest encodable value: ``radix ** max_width - 1`` capped to a signed bigint."""
        return min(int(self.radix**self.max_width) - 1, 2**63 - 1)

    @property
    def domain_bits(self) -> float:
        """log2 of the number of values of the shortest (padded) width."""
        return self.min_width * math.log2(self.radix)


DECIMAL = Alphabet(
    name="decimal",
    symbols="0123456789",
    min_width=8,
    max_width=19,
    description="digits 0-9",
)

# Crockford Base32: no I, L, O, U; decoding is case-insensitive and reads
# O as 0 and I/L as 1, as Crockford specifies.
CROCKFORD32 = Alphabet(
    name="crockford32",
    symbols="0123456789ABCDEFGHJKMNPQRSTVWXYZ",
    aliases={"O": "0", "I": "1", "L": "1"},
    case_insensitive=True,
    min_width=6,  # 32**6 ~ 1.07e9 values, about the 8-digit decimal domain
    max_width=13,  # 2**63 - 1 needs 13 symbols
    description="digits and the letters of Crockford Base32",
)

ALPHABETS: dict[str, Alphabet] = {a.name: a for a in (DECIMAL, CROCKFORD32)}


def get_alphabet(alphabet: str | Alphabet) -> Alphabet:
    """Return the alphabet named ``alphabet`` (or ``alphabet`` itself).

    >>> get_alphabet("crockford32") is CROCKFORD32
    True
    >>> get_alphabet("hex")
    Traceback (most recent call last):
    ...
    ValueError: unknown alphabet 'hex' (known: crockford32, decimal)
    """
    if isinstance(alphabet, Alphabet):
        return alphabet
    try:
        return ALPHABETS[alphabet]
    except KeyError:
        raise ValueError(
            f"unknown alphabet {alphabet!r} (known: {', '.join(sorted(ALPHABETS))})"
        ) from None
