"""Clocks a generator can read: each is a callable returning Unix milliseconds."""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]
"""A zero-argument callable returning the current Unix time in milliseconds."""


def system_clock() -> int:
    """Wall-clock Unix milliseconds (``time.time_ns``); may step backwards on NTP changes.

    >>> system_clock() > 1_704_067_200_000  # after 2024-01-01
    True
    """
    return time.time_ns() // 1_000_000


class MonotonicClock:
    """Wall-clock time read once, then advanced by ``time.monotonic_ns``.

    Immune to NTP steps and manual clock changes while the process runs, at
    the price of not following a deliberate correction of the system clock.

    >>> clock = MonotonicClock()
    >>> first = clock()
    >>> clock() >= first  # never goes back
    True
    >>> abs(clock() - system_clock()) < 60_000
    True

    Any zero-argument callable returning milliseconds is a clock, for
    example a fixed one in tests:

    >>> from sqla_ids.identifiers.generator import UUIDv7Generator
    >>> from sqla_ids.identifiers.inspection import uuid7_timestamp_ms
    >>> frozen = UUIDv7Generator(clock=lambda: 1704067200000)
    >>> uuid7_timestamp_ms(frozen())
    1704067200000
    """

    __slots__ = ("_origin_ns",)

    def __init__(self) -> None:
        self._origin_ns = time.time_ns() - time.monotonic_ns()

    def __call__(self) -> int:
        return (self._origin_ns + time.monotonic_ns()) // 1_000_000

    def __repr__(self) -> str:
        return "MonotonicClock()"


CLOCKS: dict[str, Callable[[], Clock]] = {
    "system": lambda: system_clock,
    "monotonic": MonotonicClock,
}
"""Clock factories by the name used in configuration documents."""
