"""Order-number encryption speed: the ff3 package vs our single and batch paths.

Plain script (not a test): ``python benchmarks/order_numbers.py -n 100000``.
Encrypts the 8-digit padded values 1..n with FF3-1 three ways and checks the
outputs are identical, then times the full codec (FF3-1 + Luhn + grouping +
self-check). Ratios are against ``ff3`` measured in the same run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from ff3 import FF3Cipher

from sqla_ids.order_numbers import FF3Engine, Keyring, OrderNumberCodec

# A throw-away benchmark key (never use a published key for real numbers).
KEY = "EF4359D8D580AA4F7F036D6F04FC6A94"
TWEAK = "D8E7920AFA330A"


def _timed(function: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = function()
    return time.perf_counter() - start, result


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100_000, help="numbers per row (default 100000)")
    args = parser.parse_args()
    n: int = args.n

    keyring = Keyring(environ={})
    key = keyring.register("bench", KEY, TWEAK)
    plains = [str(v).zfill(8) for v in range(1, n + 1)]
    reference = FF3Cipher(KEY, TWEAK)
    engine = FF3Engine(key)
    codec = OrderNumberCodec("bench", keyring=keyring)
    skipped = set(codec.skipped_values())
    values = [v for v in range(1, n + 1) if v not in skipped]

    rows: list[tuple[str, float]] = []
    t_ff3, out_ff3 = _timed(lambda: [reference.encrypt(p) for p in plains])
    rows.append(("ff3.FF3Cipher.encrypt, one call per number", t_ff3))
    t_single, out_single = _timed(lambda: [engine.encrypt(p) for p in plains])
    rows.append(("FF3Engine.encrypt, one call per number", t_single))
    t_batch, out_batch = _timed(lambda: engine.encrypt_many(plains))
    rows.append(("FF3Engine.encrypt_many, one batch", t_batch))
    if not out_ff3 == out_single == out_batch:
        raise SystemExit("MISMATCH: our FF3-1 output differs from ff3")
    t_dec, out_dec = _timed(lambda: engine.decrypt_many(out_batch))  # type: ignore[arg-type]
    rows.append(("FF3Engine.decrypt_many, one batch", t_dec))
    if out_dec != plains:
        raise SystemExit("MISMATCH: batch decryption does not give the plaintexts back")
    t_codec1, numbers1 = _timed(lambda: [codec.encode(v) for v in values])
    rows.append(("OrderNumberCodec.encode (FF3-1+Luhn+groups+self-check)", t_codec1))
    t_codec, numbers = _timed(lambda: codec.encode_many(values))
    rows.append(("OrderNumberCodec.encode_many (same, batched)", t_codec))
    if numbers != numbers1:
        raise SystemExit("MISMATCH: encode_many differs from encode")

    print(f"FF3-1 radix 10, 8-digit values 1..{n:,}; outputs identical to ff3: yes")
    print(f"{'path':<58} {'numbers/s':>12} {'vs ff3':>8}")
    print("-" * 80)
    for label, seconds in rows:
        rate = n / seconds
        print(f"{label:<58} {rate:>12,.0f} {t_ff3 / seconds:>7.1f}x")


if __name__ == "__main__":
    main()
