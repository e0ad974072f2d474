"""The preflight's estimate model: time, extra disk, log volume and the longest lock.

Deliberately simple -- a few linear terms per database and mode, fitted to
real runs on the local servers (``benchmarks/preflight_calibration.py``;
the table of estimate vs measured, and the errors, are in
docs/migration.md) -- and honest: every figure is a range as wide as the
errors measured, for the server's default settings and no other load on the
tables. For one migration with ``R`` rows rewritten (every row of every
affected table, once per converted column), ``B`` bytes of affected tables
(rows and indexes, as the server reports them), ``L`` bytes of the largest
of them and ``P`` parent rows::

    M         = P * (mapping_row + 2 * (key - 8) + 2 * (new - uuid7))   the mapping table
    W         = R * (new - uuid7) * 2                 a UUID192 key's extra bytes
    time      = seconds_fixed + R * seconds_per_row
    peak disk = M + B * peak_per_byte + W             extra, at the worst moment
    kept disk = M + B * kept_per_byte + W             extra, still used after the run
    log       = (B + W) * log.per_byte + M * log.per_mapping_byte   per log the server writes
                (B alone for a rollback journal: it keeps the old pages)
    lock      = time * lock_share                     (the tables locked for the run)
              | lock_fixed + L * lock_per_byte        (one table rebuilt at a time)
              | swap_seconds, or one batch_time       (online)

(``key``: bytes of an old key; ``uuid7``: of a UUIDv7 as the database stores it,
which the coefficients were fitted on; ``new``: of a UUID192 key, 16, or 24 with
its segment -- ``W`` is 0 for a UUIDv7 target -- in every row and one index
entry per converted value.)

Each figure is then a range: the value times the measured error spread
(``time_spread``, ``size_spread``, ``log_spread``), the high end plus an
allowance some runs pay and others do not (``disk_allowance``: InnoDB
allocates files by extents and grows ``ibdata1`` for its undo log 64 MB at a
time; ``log.allowance``: the WAL of the catalog changes and full-page writes
after a checkpoint). Time is the widest: the calibration machine is shared
and its load varies.
The coefficients are each database's (``CostModel`` in its backend's
``preflight.py``), next to the runs they come from.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass

from sqla_ids.migration.core.sizing import LogFacts, ServerFacts, Shape


@dataclass(frozen=True)
class Range:
    """An estimate: from ``low`` to ``high`` (same unit)."""

    low: float
    high: float

    @classmethod
    def around(cls, value: float, spread: tuple[float, float]) -> Range:
        """``value`` times the model's measured error spread (``(0.7, 1.5)``)."""
        return cls(value * spread[0], value * spread[1])

    def scaled(self, factor: float) -> Range:
        """Both ends times ``factor``."""
        return Range(self.low * factor, self.high * factor)

    def plus(self, allowance: float) -> Range:
        """The high end raised by ``allowance``."""
        return Range(self.low, self.high + allowance)


class LockKind(enum.Enum):
    """What the longest lock of a run is, by how the strategy runs."""

    WHOLE_RUN = "the affected tables are locked from the first change to the commit"
    LARGEST_REBUILD = "each table is locked while its own statement rebuilds it"
    SWAP = "the tables are locked only for the swap (and a backfill batch holds its rows)"


@dataclass(frozen=True)
class LogModel:
    """Bytes one log receives (see the module docstring)."""

    name: str
    """As :attr:`LogFacts.name` (the server's log this models)."""
    per_byte: float
    """Bytes logged per byte of the affected tables."""
    per_mapping_byte: float = 0.0
    """Bytes logged per byte of the mapping table."""
    allowance: float = 0.0
    """Bytes the high end adds (see the module docstring)."""
    applies: str = ""
    """When this line applies (``binlog_format=ROW``), shown with the estimate."""
    new_values: bool = True
    """The log carries the new values (WAL, redo and binary logs: a wider key
    logs more); ``False`` for a rollback journal, which keeps the old pages only."""


@dataclass(frozen=True)
class CostModel:
    """One database's and mode's coefficients (see the module docstring)."""

    seconds_fixed: float
    seconds_per_row: float
    mapping_row_bytes: float
    """One mapping row with an 8-byte key: its row and both indexes."""
    disk_allowance: float
    """Bytes the high end of the disk estimates adds (see the module docstring)."""
    peak_per_byte: float
    kept_per_byte: float
    logs: tuple[LogModel, ...]
    lock: LockKind
    time_spread: tuple[float, float]
    """The measured error of the time: estimates run from ``[0]`` to ``[1]`` times the fit."""
    size_spread: tuple[float, float]
    """The same for the extra disk."""
    log_spread: tuple[float, float]
    """The same for the log volumes."""
    lock_share: float = 1.0
    """:attr:`LockKind.WHOLE_RUN`: the share of the run the tables are locked."""
    lock_fixed: float = 0.0
    lock_per_byte: float = 0.0
    """:attr:`LockKind.LARGEST_REBUILD`: seconds, and seconds per byte of the largest table."""
    swap_seconds: tuple[float, float] = (0.0, 0.0)
    """Online: how long the swap holds its locks (measured, independent of size)."""
    uuid7_bytes: int = 16
    """Bytes of one UUIDv7 as this database stores it (the runs' new keys)."""
    rows_per_second: float = 0.0
    """Online: the backfill's rate on the calibration runs (sizes batches)."""
    source: str = ""
    """Where the coefficients come from (the calibration runs)."""

    def central(self) -> CostModel:
        """This model's central values: no error spread, no allowance (what the
        calibration compares measurements with)."""
        return dataclasses.replace(
            self,
            time_spread=(1.0, 1.0),
            size_spread=(1.0, 1.0),
            log_spread=(1.0, 1.0),
            disk_allowance=0.0,
            logs=tuple(dataclasses.replace(line, allowance=0.0) for line in self.logs),
        )


def calibrated_on(server: str) -> str:
    """Where a database's coefficients come from (:attr:`CostModel.source`)."""
    return (
        "benchmarks/preflight_calibration.py: fitted to a first series of runs, ranges"
        f" widened after a second, checked on a third ({server}, default settings;"
        " docs/migration.md)"
    )


@dataclass(frozen=True)
class LogEstimate:
    """The volume one log receives, next to what the server says about that log."""

    facts: LogFacts
    bytes: Range
    applies: str = ""


@dataclass(frozen=True)
class Estimate:
    """The estimates of one migration (one table and its references, one mode)."""

    mode: str
    seconds: Range
    peak_disk: Range
    """Extra disk at the worst moment of the run."""
    kept_disk: Range
    """Extra disk still used after the run (mapping table, old keys, UUID columns)."""
    logs: tuple[LogEstimate, ...]
    lock: LockKind
    lock_seconds: Range
    lock_what: str
    batch_size: int
    """Recommended ``batch_size``."""
    warnings: tuple[str, ...] = ()


def _mb(value: float) -> str:
    return f"{value / 1024 / 1024:,.0f} MB"


def estimate(
    model: CostModel,
    mode: str,
    shape: Shape,
    server: ServerFacts,
    *,
    batch_time: float = 0.5,
) -> Estimate:
    """The estimates of one migration of ``shape`` under ``model``, with warnings
    where the run would not fit what ``server`` has."""
    seconds = model.seconds_fixed + shape.rows * model.seconds_per_row
    # A UUID192 key is wider or narrower than the UUIDv7s the coefficients were
    # fitted on (16 bytes, 32 hex digits on SQLite): the difference is in every
    # row and one index entry per converted value, and in the mapping's new key
    # and its index -- new data, kept and logged like the rest of the new columns.
    wider = 0 if shape.new_key_bytes is None else shape.new_key_bytes - model.uuid7_bytes
    widened = shape.rows * wider * 2
    mapping = shape.parent_rows * (model.mapping_row_bytes + 2 * (shape.key_bytes - 8) + 2 * wider)
    peak = mapping + shape.bytes * model.peak_per_byte + widened
    kept = mapping + shape.bytes * model.kept_per_byte + widened
    logs = []
    for facts in server.logs:
        line = next((m for m in model.logs if m.name == facts.name), None)
        if line is None:
            continue
        written = shape.bytes + (widened if line.new_values else 0)
        volume = written * line.per_byte + mapping * line.per_mapping_byte
        logged = Range.around(volume, model.log_spread).plus(line.allowance)
        logs.append(LogEstimate(facts, logged if facts.enabled else Range(0, 0), line.applies))
    time_range = Range.around(seconds, model.time_spread)
    if model.lock is LockKind.WHOLE_RUN:
        lock, what = time_range.scaled(model.lock_share), "the whole run"
    elif model.lock is LockKind.LARGEST_REBUILD:
        rebuild = model.lock_fixed + shape.largest_bytes * model.lock_per_byte
        lock, what = Range.around(rebuild, model.time_spread), "the largest table's rebuild"
    else:
        low, high = model.swap_seconds
        lock = Range(min(low, batch_time), max(high, batch_time))
        what = "the swap, or one backfill batch on its rows"
    result = Estimate(
        mode=mode,
        seconds=time_range,
        peak_disk=Range.around(peak, model.size_spread).plus(model.disk_allowance),
        kept_disk=Range.around(kept, model.size_spread).plus(model.disk_allowance),
        logs=tuple(logs),
        lock=model.lock,
        lock_seconds=lock,
        lock_what=what,
        batch_size=recommended_batch_size(model, batch_time),
    )
    return dataclasses.replace(result, warnings=tuple(fit_warnings(result, server)))


def recommended_batch_size(model: CostModel, batch_time: float) -> int:
    """Rows per batch: what the calibration runs did in ``batch_time`` (online,
    where batches hold the rows they change), rounded to a round number; offline
    the default 10,000 (each batch is one statement; larger ones save little)."""
    if model.lock is not LockKind.SWAP or model.rows_per_second <= 0:
        return 10_000
    rows = model.rows_per_second * max(batch_time, 0.05)
    power = 10 ** max(int(math.log10(rows)), 2)
    return int(min(max(round(rows / power) * power, 1_000), 100_000))


def fit_warnings(estimate: Estimate, server: ServerFacts) -> list[str]:
    """Where the run would not fit: disk, retained logs, log limits."""
    warnings = []
    need = estimate.peak_disk.high
    retained = [log for log in estimate.logs if log.facts.enabled and log.facts.retained]
    need += sum(log.bytes.high for log in retained)
    if server.free_disk_bytes is not None and need > server.free_disk_bytes:
        what = " and ".join(["the peak extra disk", *(f"the {r.facts.name}" for r in retained)])
        warnings.append(
            f"does not fit: {what} may need up to {_mb(need)}, and {_mb(server.free_disk_bytes)}"
            f" are free ({server.free_disk_source})"
        )
    for log in estimate.logs:
        facts = log.facts
        if not facts.enabled:
            continue
        if facts.soft_limit_bytes is not None and log.bytes.high > facts.soft_limit_bytes:
            warnings.append(
                f"the {facts.name} volume (up to {_mb(log.bytes.high)}) exceeds"
                f" {facts.soft_limit_name} ({_mb(facts.soft_limit_bytes)}): expect extra"
                " checkpoints and I/O while it runs"
            )
    return warnings
