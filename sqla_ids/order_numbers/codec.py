"""The FPE order-number codec: the seven steps of the algorithm and their inverse
(docs/order_numbers.md, "The algorithm").

``encode(n)``: pad ``n`` to the alphabet's minimum width (8 decimal digits),
encrypt with FF3-1 under a named key, refuse an all-zero ciphertext (the
caller takes the next sequence value), append the check character, group
with separators, then re-parse, verify and decrypt the result before
returning it. ``decode(text)`` validates user input and returns ``n``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from sqla_ids.order_numbers.alphabets import Alphabet
from sqla_ids.order_numbers.check_digits import CheckDigit
from sqla_ids.order_numbers.errors import (
    NotIssuedError,
    SelfCheckError,
    SkippedValueError,
    ValueOutOfRangeError,
)
from sqla_ids.order_numbers.ff3_batch import FF3Engine
from sqla_ids.order_numbers.format import FormatInput, OrderNumberFormat
from sqla_ids.order_numbers.keyring import DEFAULT_KEY_NAME, FPEKey, Keyring, default_keyring

__all__ = ["OrderNumberCodec"]


class OrderNumberCodec(FormatInput):
    """Encrypted, check-digited, grouped order numbers (the default format).

    ``key`` is the *name* of a key in ``keyring`` (default: the process-wide
    keyring, which falls back to ``SQLA_IDS_ORDER_KEY``/``SQLA_IDS_ORDER_TWEAK``).
    The key is looked up at first use, so models can be declared before the
    application has configured its secrets.

    With a published sample key in a private keyring:

    >>> from sqla_ids.order_numbers.keyring import Keyring
    >>> ring = Keyring(environ={})
    >>> _ = ring.register("sample", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
    >>> codec = OrderNumberCodec("sample", keyring=ring)
    >>> codec.encode(1), codec.encode(2)
    ('943-130-351', '887-763-811')
    >>> codec.decode("943-130-351"), codec.decode("943 130 351"), codec.decode("943130351")
    (1, 1, 1)
    >>> codec.encode_many([1, 2, 3])
    ['943-130-351', '887-763-811', '308-392-836']
    >>> codec.decode_many(['943-130-351', '887-763-811', '308-392-836'])
    [1, 2, 3]
    >>> codec.decode("943-130-352")
    Traceback (most recent call last):
    ...
    sqla_ids.order_numbers.errors.WrongCheckDigitError: the check digit is wrong: ...

    Other alphabets and check digits:

    >>> short = OrderNumberCodec(
    ...     "sample", alphabet="crockford32", check_digit="luhn-letters", keyring=ring
    ... )
    >>> short.encode(1), short.decode("4a5-jxy-3")
    ('4A5-JXY-3', 1)
    """

    def __init__(
        self,
        key: str = DEFAULT_KEY_NAME,
        *,
        alphabet: Alphabet | str = "decimal",
        check_digit: CheckDigit | str = "luhn",
        separator: str = "-",
        group_size: int = 3,
        keyring: Keyring | None = None,
    ) -> None:
        self.key_name = key
        self.format = OrderNumberFormat(
            alphabet, check_digit, separator=separator, group_size=group_size
        )
        self.alphabet = self.format.alphabet
        self._keyring = default_keyring if keyring is None else keyring
        self._engine: tuple[FPEKey, FF3Engine] | None = None
        self._skipped: dict[int, str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"OrderNumberCodec(key={self.key_name!r}, alphabet={self.alphabet.name!r}, "
            f"check_digit={self.format.check_digit.name!r}, separator={self.format.separator!r})"
        )

    # -- key ----------------------------------------------------------------------

    @property
    def engine(self) -> FF3Engine:
        """The FF3-1 engine for the current key (rebuilt if the key is re-registered)."""
        key = self._keyring.get(self.key_name)
        cached = self._engine
        if cached is None or cached[0] is not key:
            with self._lock:
                cached = (key, FF3Engine(key, self.alphabet))
                self._engine = cached
                self._skipped = {}
        return cached[1]

    # -- the domain -------------------------------------------------------------------

    @property
    def max_value(self) -> int:
        """Largest sequence value this format encodes."""
        return self.alphabet.max_value

    def value_for(self, sequence_value: int) -> int:
        """The value to encode for a database sequence value: the value itself."""
        return sequence_value

    def _plain(self, value: int) -> str:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueOutOfRangeError(
                f"a sequence value must be an integer, not {type(value).__name__}"
            )
        if not 1 <= value <= self.max_value:
            raise ValueOutOfRangeError(
                f"sequence value {value} is outside 1..{self.max_value} for this format"
            )
        return self.alphabet.from_int(value, self.alphabet.min_width)

    def _skipped_plain(self, engine: FF3Engine, length: int) -> str:
        # Exactly one plaintext per length encrypts to all zeros (step 4).
        plain = self._skipped.get(length)
        if plain is None:
            plain = engine.decrypt(self.alphabet.zero * length)
            self._skipped[length] = plain
        return plain

    def is_skipped(self, value: int) -> bool:
        """Whether ``value`` encrypts to all zeros and so is never issued (step 4
        of the algorithm, docs/order_numbers.md).

        >>> from sqla_ids.order_numbers.keyring import Keyring
        >>> ring = Keyring(environ={})
        >>> _ = ring.register("sample", "2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564")
        >>> codec = OrderNumberCodec("sample", keyring=ring)
        >>> codec.skipped_values()[0]
        8959589
        >>> codec.is_skipped(8959589), codec.is_skipped(8959590)
        (True, False)
        >>> codec.encode(8959589)
        Traceback (most recent call last):
        ...
        sqla_ids.order_numbers.errors.SkippedValueError: sequence value 8959589 is skipped ...
        """
        plain = self._plain(value)
        return self._skipped_plain(self.engine, len(plain)) == plain

    def skipped_values(self) -> list[int]:
        """Every sequence value that is skipped (at most one per length)."""
        engine = self.engine
        values = []
        for length in range(self.alphabet.min_width, self.alphabet.max_width + 1):
            plain = self._skipped_plain(engine, length)
            value = self.alphabet.to_int(plain)
            canonical = length == self.alphabet.min_width or plain[0] != self.alphabet.zero
            if canonical and 1 <= value <= self.max_value:
                values.append(value)
        return values

    # -- encode -----------------------------------------------------------------------

    def encode(self, value: int) -> str:
        """Display form of sequence value ``value`` (SkippedValueError for the rare skip)."""
        plain = self._plain(value)
        engine = self.engine
        cipher = engine.encrypt(plain)
        if cipher == self.alphabet.zero * len(cipher):
            raise SkippedValueError(
                f"sequence value {value} is skipped by design (its encryption is all zeros); "
                "take the next sequence value"
            )
        display = self.format.format(cipher)
        # Step 7: the number must read back as exactly ``value``.
        (payload,) = self.format.payloads([display])
        if engine.decrypt(payload) != plain:
            raise SelfCheckError(f"self-check failed while encoding sequence value {value}")
        return display

    def encode_many(self, values: Iterable[int]) -> list[str]:
        """``[encode(v) for v in values]`` with the FF3-1 rounds batched across values."""
        plains = [self._plain(v) for v in values]
        engine = self.engine
        skipped = {self._skipped_plain(engine, n) for n in set(map(len, plains))}
        if not skipped.isdisjoint(plains):
            value = next(self.alphabet.to_int(p) for p in plains if p in skipped)
            raise SkippedValueError(
                f"sequence value {value} is skipped by design (its encryption is all zeros); "
                "leave it out (see is_skipped)"
            )
        ciphers = engine.encrypt_many(plains)
        compute = self.format.check_digit.compute
        group = self.format.group
        displays = [group(c + compute(c)) for c in ciphers]
        # Step 7 for the whole batch: strip, re-check, decrypt, compare.
        separator = self.format.separator
        width = self.format.check_digit.width
        symbols = [d.replace(separator, "") if separator else d for d in displays]
        payloads = [s[: len(s) - width] for s in symbols]
        checks_ok = all(compute(p) == s[len(p) :] for p, s in zip(payloads, symbols, strict=True))
        if not checks_ok or engine.decrypt_many(payloads) != plains:
            raise SelfCheckError("self-check failed while encoding a batch of sequence values")
        return displays

    # -- input: parse/validate/normalize/is_valid come from FormatInput (no key needed)

    # -- decode -----------------------------------------------------------------------

    def decode(self, text: str) -> int:
        """The sequence value behind ``text`` (validated first)."""
        payload = self.format.parse(text).payload
        if not self._issuable(payload):
            return self._value_of(payload, "")  # raises NotIssuedError
        return self._value_of(payload, self.engine.decrypt(payload))

    def decode_many(self, texts: Sequence[str]) -> list[int]:
        """``[decode(t) for t in texts]`` with the FF3-1 rounds batched."""
        payloads = self.format.payloads(texts)
        for payload in payloads:
            if not self._issuable(payload):
                self._value_of(payload, "")
        plains = self.engine.decrypt_many(payloads)
        return [self._value_of(c, p) for c, p in zip(payloads, plains, strict=True)]

    def _issuable(self, payload: str) -> bool:
        return payload != self.alphabet.zero * len(payload)

    def _value_of(self, payload: str, plain: str) -> int:
        zero = self.alphabet.zero
        if plain and (len(plain) == self.alphabet.min_width or plain[0] != zero):
            value = self.alphabet.to_int(plain)
            if 1 <= value <= self.max_value:
                return value
        raise NotIssuedError(
            f"order number {self.format.group(payload)}… is well formed but was never issued "
            "in this numbering; please check it against the receipt"
        )
