"""Keys assembled in the server functions' layouts (identifiers.server_layouts).

The same bits as ``sqla_ids_uuid7()`` and ``sqla_ids_uuid7_serial()`` put
there, read back field by field; that they sort with the functions' own keys
on a real server is tested in tests/test_types_server_keys_batching.py.
"""

from __future__ import annotations

import pytest

from sqla_ids import is_uuid7, uuid7_timestamp_ms
from sqla_ids.identifiers.server_layouts import SERIAL_MAX, uuid7s_from_serial, uuid7s_from_ticks


def test_ticks_are_the_millisecond_then_the_fraction_then_random_bits() -> None:
    first = 1_764_000_000_000 * 4096 + 4094  # two ticks before a millisecond ends
    keys = uuid7s_from_ticks(first, 4)
    assert all(is_uuid7(k) and k.variant == "specified in RFC 4122" for k in keys)
    assert [uuid7_timestamp_ms(k) for k in keys] == [1_764_000_000_000] * 2 + [
        1_764_000_000_001
    ] * 2
    assert [(k.int >> 64) & 0xFFF for k in keys] == [4094, 4095, 0, 1]
    assert keys == sorted(keys) and len({k.int & ((1 << 62) - 1) for k in keys}) == 4


def test_serial_keys_carry_the_sequence_around_a_fixed_variant_nibble() -> None:
    values = [1, 0xABC_1234_5678, SERIAL_MAX]
    keys = uuid7s_from_serial(1_764_000_000_000, values)
    assert all(is_uuid7(k) and uuid7_timestamp_ms(k) == 1_764_000_000_000 for k in keys)
    assert [k.hex[12:16] for k in keys] == ["7000", "7abc", "7fff"]
    assert [k.hex[16:25] for k in keys] == ["800000001", "812345678", "8ffffffff"]
    assert keys == sorted(keys)


def test_out_of_range_input_is_refused() -> None:
    with pytest.raises(ValueError, match="44 bits"):
        uuid7s_from_serial(1, [SERIAL_MAX + 1])
    with pytest.raises(ValueError, match="48-bit"):
        uuid7s_from_serial(1 << 48, [1])
    with pytest.raises(ValueError, match="48-bit"):
        uuid7s_from_ticks((1 << 48) * 4096 - 1, 2)
    assert uuid7s_from_ticks(5, 0) == []
