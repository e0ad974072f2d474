"""Progress reporting for long batched steps, through Alembic's logger."""

from __future__ import annotations

import logging
import time

#: Under ``alembic`` so an Alembic ini's ``[logger_alembic]`` shows it.
logger = logging.getLogger("alembic.sqla_ids.migration")


class Progress:
    """Logs ``rows done / total``, the rate and the ETA of one step."""

    def __init__(self, step: str, total: int, *, every_seconds: float = 5.0) -> None:
        self.step = step
        self.total = total
        self.done = 0
        self.every = every_seconds
        self.started = time.monotonic()
        self._last_log = self.started

    def advance(self, rows: int) -> None:
        """Count ``rows`` more rows done; log at most every ``every_seconds``."""
        self.done += rows
        now = time.monotonic()
        if now - self._last_log >= self.every or self.done >= self.total:
            self._last_log = now
            logger.info("%s", self.message(now))

    def message(self, now: float | None = None) -> str:
        """The progress line: step, rows done/total, rows per second, ETA."""
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        rate = self.done / elapsed
        left = max(self.total - self.done, 0)
        eta = left / rate if rate else float("inf")
        return f"{self.step}: {self.done}/{self.total} rows, {rate:,.0f} rows/s, ETA {eta:,.1f} s"
