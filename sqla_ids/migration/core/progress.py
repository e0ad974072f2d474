"""Progress reporting for long batched steps, through Alembic's logger, and the
sizing of an online backfill's batches by the time they take.

Every progress record carries a :class:`ProgressSnapshot` as its argument
(its text is the line people read), so a handler -- ``sqla-ids migrate``'s
progress bar -- reads the numbers without parsing text. Besides the
``INFO`` line every few seconds, each batch logs one at :data:`PROGRESS`,
below ``DEBUG``: shown only to whoever lowers the logger's level to it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Under ``alembic`` so an Alembic ini's ``[logger_alembic]`` shows it.
logger = logging.getLogger("alembic.sqla_ids.migration")

#: The level of the per-batch progress records (below ``DEBUG``).
PROGRESS = 5


@dataclass(frozen=True)
class ProgressSnapshot:
    """Where one step stands: the argument of every progress record."""

    step: str
    done: int
    total: int
    elapsed: float

    @property
    def rate(self) -> float:
        """Rows per second so far."""
        return self.done / max(self.elapsed, 1e-9)

    @property
    def eta(self) -> float:
        """Seconds left at that rate (``inf`` before the first row)."""
        left = max(self.total - self.done, 0)
        return left / self.rate if self.rate else float("inf")

    def __str__(self) -> str:
        return (
            f"{self.step}: {self.done}/{self.total} rows, {self.rate:,.0f} rows/s,"
            f" ETA {self.eta:,.1f} s"
        )


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
        """Count ``rows`` more rows done; log at :data:`PROGRESS` every time, at
        ``INFO`` at most every ``every_seconds``."""
        self.done += rows
        now = time.monotonic()
        if logger.isEnabledFor(PROGRESS):
            logger.log(PROGRESS, "%s", self.snapshot(now))
        if now - self._last_log >= self.every or self.done >= self.total:
            self._last_log = now
            logger.info("%s", self.snapshot(now))

    def snapshot(self, now: float | None = None) -> ProgressSnapshot:
        """Where the step stands now."""
        elapsed = (now or time.monotonic()) - self.started
        return ProgressSnapshot(self.step, self.done, self.total, elapsed)

    def message(self, now: float | None = None) -> str:
        """The progress line: step, rows done/total, rows per second, ETA."""
        return str(self.snapshot(now))


#: Rows in the first batch of a step whose batches are sized by time (or
#: ``batch_size`` if smaller): nothing is known of the rate yet, and on a cold
#: cache a row may cost a few milliseconds of disk reads; doubling reaches
#: 10,000 rows at the eighth batch.
FIRST_BATCH = 100


def next_batch_size(size: int, rows: int, seconds: float, target: float, largest: int) -> int:
    """Rows for the next batch, after one of ``size`` covered ``rows`` rows in ``seconds``.

    The batch that would take ``target`` seconds at the last batch's rate,
    but at most twice the last size (a rate measured on a small batch says
    little about a large one) and at least a quarter of it (one slow batch
    -- a lock waited for, a checkpoint -- does not collapse the step), within
    ``1 .. largest``. ``target`` 0: always ``largest``.
    """
    if target <= 0:
        return largest
    fitted = round(rows * target / seconds) if seconds > 0 else 2 * size
    return max(1, min(largest, 2 * size, max(size // 4, fitted)))


class Batches:
    """The batches of one backfill step: their size, progress and pauses.

    Each batch holds its row locks until it commits, and an application
    statement that needs one of those rows waits that long; so the batches
    are sized by the time they take (``target`` seconds), not only by rows.
    """

    def __init__(
        self,
        step: str,
        total: int,
        *,
        largest: int,
        target: float,
        pause: Callable[[], None],
        nice_ratio: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.progress = Progress(step, total)
        self.largest = largest
        self.target = target
        self.nice_ratio = nice_ratio
        self.size = min(largest, FIRST_BATCH) if target > 0 else largest
        """Rows the next batch should take."""
        self._pause = pause
        self._sleep = sleep
        self._started = time.monotonic()

    def next(self) -> int:
        """The next batch's rows; its clock starts now."""
        self._started = time.monotonic()
        return self.size

    def done(self, rows: int) -> None:
        """The batch covered ``rows`` rows: resize, count progress, rest
        ``nice_ratio`` times the batch's time, pause."""
        took = time.monotonic() - self._started
        self.size = next_batch_size(self.size, rows, took, self.target, self.largest)
        left = max(self.progress.total - self.progress.done, 0)
        self.progress.advance(min(rows, left))
        if self.nice_ratio > 0:
            self._sleep(took * self.nice_ratio)
        self._pause()
