"""What ``sqla-ids migrate run`` shows while a migration runs, and how Ctrl-C stops it.

The migration engine reports through the logger ``alembic.sqla_ids.migration``
(:mod:`sqla_ids.migration.core.progress`): every batch a record at
``PROGRESS`` level and every few seconds one at ``INFO``, each carrying a
:class:`~sqla_ids.migration.core.progress.ProgressSnapshot`; phases and
warnings as ``INFO``/``WARNING`` lines. :class:`Watch` attaches a handler to
that logger: on a terminal a live progress bar (rows, rate, ETA, phase) with
the lines above it; otherwise the ``INFO`` lines, plain, one per line.

Ctrl-C: the first one asks the migration to stop at the next batch boundary
-- the handler raises :class:`StopRequested` from the next progress record,
which the engine logs after a batch is done (committed, online) -- and the
command stops between phases too; a second Ctrl-C interrupts at once.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn

from sqla_ids.migration.core.progress import PROGRESS, ProgressSnapshot, logger


class StopRequested(KeyboardInterrupt):
    """Ctrl-C was pressed once: the migration stopped at a batch or phase boundary."""


def _clock(seconds: float) -> str:
    if seconds == float("inf"):
        return "?"
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"


class Lines:
    """Plain lines on a stream (not a terminal): the ``INFO`` records, timestamped."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.phase = ""

    def snapshot(self, snapshot: ProgressSnapshot, level: int) -> None:
        """A progress record: its ``INFO`` ones become lines (every few seconds)."""
        if level >= logging.INFO:
            self.line(str(snapshot), level)

    def line(self, text: str, level: int) -> None:
        """One line, with the time and the phase."""
        stamp = time.strftime("%H:%M:%S")
        label = "" if level < logging.WARNING else f"{logging.getLevelName(level)}: "
        phase = f"[{self.phase}] " if self.phase else ""
        print(f"{stamp} {phase}{label}{text}", file=self.stream, flush=True)

    def close(self) -> None:
        """Nothing to tidy."""


class Bar:
    """A live progress bar per step on a terminal, with the lines above it."""

    def __init__(self, stream: TextIO) -> None:
        self.console = Console(file=stream, highlight=False)
        self.progress = Progress(
            TextColumn("{task.fields[phase]}", markup=False, style="bold"),
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            TextColumn("{task.fields[rows]} rows", markup=False),
            TextColumn("{task.fields[rate]} rows/s", markup=False),
            TextColumn("ETA {task.fields[eta]}", markup=False),
            console=self.console,
            refresh_per_second=8,
        )
        self.tasks: dict[str, TaskID] = {}
        self.phase = ""
        self.progress.start()

    def snapshot(self, snapshot: ProgressSnapshot, level: int) -> None:
        """Every batch: the step's bar moves."""
        total = snapshot.total or None
        fields: dict[str, Any] = {
            "phase": self.phase,
            "rows": f"{snapshot.done:,}/{snapshot.total:,}" if total else f"{snapshot.done:,}",
            "rate": f"{snapshot.rate:,.0f}",
            "eta": _clock(snapshot.eta) if total else "?",
        }
        task = self.tasks.get(snapshot.step)
        if task is None:
            task = self.progress.add_task(snapshot.step, total=total, **fields)
            self.tasks[snapshot.step] = task
        self.progress.update(task, completed=snapshot.done, total=total, **fields)

    def line(self, text: str, level: int) -> None:
        """A line above the bars."""
        label = "" if level < logging.WARNING else f"{logging.getLevelName(level)}: "
        self.progress.console.print(f"{label}{text}", markup=False, highlight=False)

    def close(self) -> None:
        """Leave the bars as they ended."""
        self.progress.stop()


class _Handler(logging.Handler):
    """The engine's records to the display; a stop asked for is raised at the
    next progress record (a batch boundary)."""

    def __init__(self, watch: Watch) -> None:
        super().__init__(PROGRESS)
        self.watch = watch

    def emit(self, record: logging.LogRecord) -> None:
        args = record.args if isinstance(record.args, tuple) else ()
        snapshot = args[0] if args and isinstance(args[0], ProgressSnapshot) else None
        if snapshot is not None:
            self.watch.display.snapshot(snapshot, record.levelno)
            if self.watch.stop_requested:
                raise StopRequested
        elif record.levelno >= logging.INFO:
            self.watch.display.line(record.getMessage(), record.levelno)


class Watch:
    """The display and the Ctrl-C handling of one ``sqla-ids migrate run``
    (a context manager: the logger and the signal handler are put back after)."""

    def __init__(self, stream: TextIO | None = None, *, bar: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.bar = self.stream.isatty() if bar is None else bar
        self.display: Bar | Lines = Lines(self.stream)
        self.stop_requested = False
        self._handler = _Handler(self)
        self._saved: tuple[int, bool] = (logger.level, logger.propagate)
        self._signal: Callable[[int, FrameType | None], Any] | int | None = None

    def __enter__(self) -> Watch:
        self.display = Bar(self.stream) if self.bar else Lines(self.stream)
        self._saved = (logger.level, logger.propagate)
        logger.setLevel(PROGRESS if self.bar else logging.INFO)
        logger.propagate = False
        logger.addHandler(self._handler)
        if threading.current_thread() is threading.main_thread():  # where signals arrive
            self._signal = signal.signal(signal.SIGINT, self._interrupt)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._signal is not None:
            signal.signal(signal.SIGINT, self._signal)
        logger.removeHandler(self._handler)
        logger.setLevel(self._saved[0])
        logger.propagate = self._saved[1]
        self.display.close()

    def phase(self, name: str) -> None:
        """The phase running now (shown with every bar and line); a stop asked
        for before it begins is raised here."""
        self.check()
        self.display.phase = name

    def say(self, text: str) -> None:
        """A line of the command's own."""
        self.display.line(text, logging.INFO)

    def check(self) -> None:
        """Raise :class:`StopRequested` if Ctrl-C was pressed (between phases)."""
        if self.stop_requested:
            raise StopRequested

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_requested:
            raise KeyboardInterrupt
        self.stop_requested = True
        self.say(
            "Ctrl-C: stopping at the next batch boundary (or after this step);"
            " press Ctrl-C again to stop at once"
        )
