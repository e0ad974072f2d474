"""A time budget shared by the statements of one database scan."""

from __future__ import annotations

import time
from collections.abc import Callable


class TimeBudget:
    """Seconds left for a scan; ``None`` seconds means no limit.

    The scanning tools give every statement the remaining budget as its
    server-side time limit, so a slow table cannot overrun the total.
    """

    def __init__(
        self, seconds: float | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if seconds is not None and seconds <= 0:
            raise ValueError(f"time budget must be positive seconds, got {seconds}")
        self._clock = clock
        self._deadline = None if seconds is None else clock() + seconds
        self._start = clock()

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` when unlimited."""
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self._clock())

    def expired(self) -> bool:
        """True once the budget is used up."""
        remaining = self.remaining()
        return remaining is not None and remaining <= 0.0

    def elapsed(self) -> float:
        """Seconds since the budget started."""
        return self._clock() - self._start
