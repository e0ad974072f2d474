"""Check digits: published examples, stdnum cross-check, measured detection rates."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from stdnum import damm, isin, luhn, verhoeff

from sqla_ids.order_numbers import (
    CROCKFORD32,
    damm_check_digit,
    luhn_check_digit,
    luhn_letters_check_digit,
    verhoeff_check_digit,
)
from sqla_ids.order_numbers.check_digits import CHECK_DIGITS, is_valid

pytestmark = pytest.mark.pure_python

DIGITS = "0123456789"


@pytest.mark.parametrize(
    ("function", "payload", "check"),
    [
        (luhn_check_digit, "7992739871", "3"),  # ISO/IEC 7812 textbook example
        (luhn_check_digit, "4111111111111111"[:-1], "1"),  # Visa test card number
        (verhoeff_check_digit, "236", "3"),  # Verhoeff's example (2363)
        (verhoeff_check_digit, "12345", "1"),
        (damm_check_digit, "572", "4"),  # Damm's example (5724)
        (luhn_letters_check_digit, "US037833100", "5"),  # Apple ISIN US0378331005
        (luhn_letters_check_digit, "AU0000XVGZA", "3"),  # ISIN AU0000XVGZA3
        (luhn_letters_check_digit, "GB000263494", "6"),  # BAE Systems ISIN
    ],
)
def test_published_examples(function: Callable[[str], str], payload: str, check: str) -> None:
    assert function(payload) == check


def test_agree_with_stdnum_on_random_payloads() -> None:
    rng = random.Random(1)
    for _ in range(5000):
        payload = str(rng.randrange(10 ** rng.randrange(1, 25)))
        assert luhn_check_digit(payload) == luhn.calc_check_digit(payload)
        assert verhoeff_check_digit(payload) == verhoeff.calc_check_digit(payload)
        assert damm_check_digit(payload) == str(damm.calc_check_digit(payload))
        letters = "".join(rng.choice(DIGITS + "ABCDEFGHJKMNPQRSTVWXYZ") for _ in range(11))
        assert luhn_letters_check_digit(letters) == isin.calc_check_digit(letters)


def _codes(compute: Callable[[str], str]) -> list[str]:
    # Every 4-digit payload with its check digit: 10,000 codes of 5 digits.
    return [p + compute(p) for p in (f"{i:04d}" for i in range(10_000))]


def _detection(name: str) -> tuple[int, int, int, int, list[tuple[str, str]]]:
    """(substitutions, undetected, transpositions, undetected, undetected pairs)."""
    compute = CHECK_DIGITS[name].compute
    codes = _codes(compute)
    valid = set(codes)
    subs = subs_missed = trans = trans_missed = 0
    missed_pairs: list[tuple[str, str]] = []
    for code in codes:
        for i, digit in enumerate(code):
            for other in DIGITS:
                if other != digit:
                    subs += 1
                    subs_missed += (code[:i] + other + code[i + 1 :]) in valid
        for i in range(len(code) - 1):
            a, b = code[i], code[i + 1]
            if a != b:
                trans += 1
                if (code[:i] + b + a + code[i + 2 :]) in valid:
                    trans_missed += 1
                    missed_pairs.append((a, b))
    return subs, subs_missed, trans, trans_missed, missed_pairs


def test_verhoeff_and_damm_catch_every_single_error_and_transposition() -> None:
    for name in ("verhoeff", "damm"):
        subs, subs_missed, trans, trans_missed, _ = _detection(name)
        assert (subs, subs_missed) == (450_000, 0)
        assert (trans, trans_missed) == (36_000, 0)


def test_luhn_misses_only_09_90_transpositions() -> None:
    subs, subs_missed, trans, trans_missed, pairs = _detection("luhn")
    assert (subs, subs_missed) == (450_000, 0)
    assert set(pairs) == {("0", "9"), ("9", "0")}
    # Every adjacent 0/9 pair of every code goes undetected, nothing else.
    codes = _codes(luhn_check_digit)
    expected = sum(1 for c in codes for i in range(4) if {c[i], c[i + 1]} == {"0", "9"})
    assert trans_missed == expected == 800
    assert trans == 36_000


def test_luhn_letters_detection_over_crockford_payloads() -> None:
    # Measured, pinned: letters become two digits, so Luhn loses strength
    # (documented trade-off of alphanumeric formats).
    symbols = CROCKFORD32.symbols
    codes = [a + b + luhn_letters_check_digit(a + b) for a in symbols for b in symbols]
    valid = set(codes)
    subs = subs_missed = trans = trans_missed = 0
    for code in codes:
        for i, char in enumerate(code):
            for other in symbols if i < 2 else DIGITS:
                if other != char:
                    subs += 1
                    subs_missed += (code[:i] + other + code[i + 1 :]) in valid
        for i in range(2):
            a, b = code[i], code[i + 1]
            if a != b:
                trans += 1
                trans_missed += (code[:i] + b + a + code[i + 2 :]) in valid
    assert (subs, subs_missed) == (72_704, 4_844)
    assert (trans, trans_missed) == (1_984, 532)


def test_no_check_digit_detects_nothing_and_is_always_valid() -> None:
    assert CHECK_DIGITS["none"].compute("123") == ""
    assert is_valid("none", "123")
    assert is_valid("luhn", "79927398713")
    assert not is_valid("luhn", "79927398710")
