"""FF3-1 engine: NIST/ACVP sample vectors and equality with the ``ff3`` package."""

from __future__ import annotations

import random

import pytest
from ff3 import FF3Cipher

from sqla_ids.order_numbers import CROCKFORD32, Alphabet, FF3Engine, FPEKey

pytestmark = pytest.mark.pure_python

# FF3-1 (56-bit tweak) sample vectors from NIST's ACVP test groups, as listed
# in the ff3 package's own tests (radix 10 and 26).
ACVP_VECTORS = [
    # AES-128
    ("2DE79D232DF5585D68CE47882AE256D6", "CBD09280979564", "0123456789",
     "3992520240", "8901801106"),
    ("01C63017111438F7FC8E24EB16C71AB5", "C4E822DCD09F27", "0123456789",
     "60761757463116869318437658042297305934914824457484538562",
     "35637144092473838892796702739628394376915177448290847293"),
    ("718385E6542534604419E83CE387A437", "B6F35084FA90E1", "abcdefghijklmnopqrstuvwxyz",
     "wfmwlrorcd", "ywowehycyd"),
    # AES-192
    ("F62EDB777A671075D47563F3A1E9AC797AA706A2D8E02FC8", "493B8451BF6716", "0123456789",
     "4406616808", "1807744762"),
    ("0951B475D1A327C52756F2624AF224C80E9BE85F09B2D44F", "D679E2EA3054E1", "0123456789",
     "99980459818278359406199791971849884432821321826358606310",
     "84359031857952748660483617398396641079558152339419110919"),
    # AES-256
    ("1FAA03EFF55A06F8FAB3F1DC57127D493E2F8F5C365540467A3A055BDBE6481D", "4D67130C030445",
     "0123456789", "3679409436", "1735794859"),
    ("9CE16E125BD422A011408EB083355E7089E70A4CD2F59E141D0B94A74BCC5967", "4684635BD2C821",
     "0123456789", "85783290820098255530464619643265070052870796363685134012",
     "75104723514036464144839960480545848044718729603261409917"),
    # NIST SP 800-38G sample 1 key with the FF3-1 56-bit tweak (ff3's test_encrypt_tweak56)
    ("EF4359D8D580AA4F7F036D6F04FC6A94", "D8E7920AFA330A", "0123456789",
     "890121234567890000", "477064185124354662"),
]  # fmt: skip

KEY = FPEKey("test", "EF4359D8D580AA4F7F036D6F04FC6A94", "D8E7920AFA330A")


def _alphabet(symbols: str) -> Alphabet:
    return Alphabet(name=f"r{len(symbols)}", symbols=symbols, min_width=6)


@pytest.mark.parametrize(("key", "tweak", "symbols", "plaintext", "ciphertext"), ACVP_VECTORS)
def test_acvp_vectors_single_and_batch(
    key: str, tweak: str, symbols: str, plaintext: str, ciphertext: str
) -> None:
    engine = FF3Engine(FPEKey("v", key, tweak), _alphabet(symbols))
    assert engine.encrypt(plaintext) == ciphertext
    assert engine.decrypt(ciphertext) == plaintext
    assert engine.encrypt_many([plaintext, plaintext]) == [ciphertext, ciphertext]
    assert engine.decrypt_many([ciphertext]) == [plaintext]


@pytest.mark.slow
def test_batch_and_single_equal_ff3_on_100k_random_values() -> None:
    rng = random.Random(20261122)
    texts = [str(rng.randrange(10 ** rng.randrange(1, 20))).zfill(8) for _ in range(100_000)]
    reference = FF3Cipher(KEY.key_hex(), KEY.tweak_hex())
    expected = [reference.encrypt(t) for t in texts]
    engine = FF3Engine(KEY)
    assert engine.encrypt_many(texts) == expected
    assert [engine.encrypt(t) for t in texts[:5000]] == expected[:5000]
    assert engine.decrypt_many(expected) == texts
    assert [engine.decrypt(c) for c in expected[:5000]] == texts[:5000]


def test_crockford_alphabet_equals_ff3_custom_alphabet() -> None:
    rng = random.Random(7)
    symbols = CROCKFORD32.symbols
    texts = ["".join(rng.choice(symbols) for _ in range(rng.randrange(4, 14))) for _ in range(3000)]
    reference = FF3Cipher.withCustomAlphabet(KEY.key_hex(), KEY.tweak_hex(), symbols)
    expected = [reference.encrypt(t) for t in texts]
    engine = FF3Engine(KEY, CROCKFORD32)
    assert engine.encrypt_many(texts) == expected
    assert [engine.encrypt(t) for t in texts] == expected
    assert engine.decrypt_many(expected) == texts


def test_length_outside_ff3_domain_is_refused() -> None:
    engine = FF3Engine(KEY)
    with pytest.raises(ValueError, match="allows 6 to 56"):
        engine.encrypt("12345")
    with pytest.raises(ValueError, match="allows 6 to 56"):
        engine.encrypt_many(["1" * 57])


def test_characters_outside_the_alphabet_are_refused() -> None:
    engine = FF3Engine(KEY)
    for bad in ("1_234567", "+1234567", "12345 78", "1234567\u00b2"):
        with pytest.raises(ValueError, match="outside the decimal alphabet"):
            engine.encrypt(bad)
        with pytest.raises(ValueError, match="outside the decimal alphabet"):
            engine.decrypt_many(["12345678", bad])
    with pytest.raises(ValueError, match="outside the crockford32 alphabet"):
        FF3Engine(KEY, CROCKFORD32).encrypt("ABCDEFU")


def test_engine_repr_holds_no_secret() -> None:
    engine = FF3Engine(KEY)
    assert KEY.key_hex() not in repr(engine).lower()


def test_length_bounds_are_ff3s_for_every_radix() -> None:
    from sqla_ids.order_numbers.ff3_batch import length_bounds

    for radix in range(2, 63):
        cipher = FF3Cipher(KEY.key_hex(), KEY.tweak_hex(), radix)
        assert length_bounds(radix) == (cipher.minLen, cipher.maxLen), radix


def test_only_ff3s_public_constructor_is_used() -> None:
    """ff3 has no upper bound in pyproject beyond its major version: the engine
    must not reach into its internals (the AES object, tweak helpers)."""
    import ast
    import inspect

    from sqla_ids.order_numbers import ff3_batch

    tree = ast.parse(inspect.getsource(ff3_batch))
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ff3")
        for alias in node.names
    }
    assert imported == {("ff3", "FF3Cipher")}
    attributes = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not attributes & {"aesCipher", "minLen", "maxLen", "calculate_tweak64_ff3_1"}
