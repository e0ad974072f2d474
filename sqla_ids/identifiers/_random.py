"""Pooled CSPRNG bits, refreshed in forked children.

``os.urandom`` is a system call (~0.7 µs); drawing 4 KiB at once and handing
out 64-bit words from a list makes a random word cost a ``list.pop``.
"""

from __future__ import annotations

import os
import struct
import weakref

_WORDS_PER_REFILL = 512
_UNPACK_WORDS = struct.Struct(f"<{_WORDS_PER_REFILL}Q").unpack


class RandomPool:
    """A refillable stack of 64-bit words from ``os.urandom``."""

    __slots__ = ("__weakref__", "words")

    def __init__(self) -> None:
        self.words: list[int] = []
        _POOLS.add(self)

    def refill(self) -> None:
        """Replace the pool's content with fresh CSPRNG words."""
        # In place: hot paths keep a reference to this very list.
        self.words[:] = _UNPACK_WORDS(os.urandom(8 * _WORDS_PER_REFILL))

    def word(self) -> int:
        """Return one fresh 64-bit random word."""
        try:
            return self.words.pop()
        except IndexError:
            self.refill()
            return self.words.pop()

    def clear(self) -> None:
        """Drop buffered words (after a fork they are shared with the parent)."""
        self.words.clear()


def random_words(count: int, bits: int = 64) -> tuple[int, ...]:
    """Return ``count`` fresh random integers of ``bits`` (1 … 64) bits, in one system call.

    The unwanted high bits are cleared in the byte buffer with slice
    assignment and ``bytes.translate`` -- C loops -- instead of shifting each
    integer in Python.
    """
    buffer = bytearray(os.urandom(8 * count))
    for byte in range(bits // 8 + (bits % 8 > 0), 8):
        buffer[byte::8] = bytes(count)  # little-endian: byte 7 is the most significant
    if bits % 8:
        partial = bits // 8
        buffer[partial::8] = buffer[partial::8].translate(_LOW_BITS_TABLES[bits % 8])
    return struct.unpack(f"<{count}Q", buffer)


# _LOW_BITS_TABLES[k] maps a byte to its low k bits.
_LOW_BITS_TABLES = [bytes(b & ((1 << k) - 1) for b in range(256)) for k in range(8)]


_POOLS: weakref.WeakSet[RandomPool] = weakref.WeakSet()


def _clear_pools_in_child() -> None:
    # A child inherits the parent's buffered words; using them would make
    # parent and child emit the same "random" bits (RFC 9562 §6.8).
    for pool in list(_POOLS):
        pool.clear()


os.register_at_fork(after_in_child=_clear_pools_in_child)
