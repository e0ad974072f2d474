"""``sqla-ids bench``: which UUIDv7 layout keeps the index dense at your insert rate.

Runs the measurements of :mod:`sqla_ids.tools.insert_benchmark` in a scratch
area of the user's own database: ``bigint``, UUIDv4 and our UUIDv7 with each
requested :class:`~sqla_ids.identifiers.Layout` preset at each rate (rows per
millisecond), with concurrent writers and the server-side function where
available; every ratio is to ``bigint`` in the same run. :func:`recommend`
turns the numbers into one line of advice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy.engine import URL

from sqla_ids.dialects import for_dialect
from sqla_ids.identifiers.layout import PRESETS
from sqla_ids.tools.insert_benchmark import (
    Kind,
    Measure,
    measure,
    measure_concurrent,
    scratch_area,
)


@dataclass
class BenchRow:
    """One measured key kind of :func:`run_layout_benchmark`; ratios are to ``bigint``.

    ``writers`` is 1 for the in-order runs; the concurrent runs compare with
    ``bigint`` under the same number of writers.
    """

    key: str
    layout: str | None
    rows_per_ms: int | None
    writers: int
    rows: int
    seconds: float
    rows_per_second: float
    time_ratio: float | None
    index_bytes: int | None
    size_ratio: float | None
    leaf_density: float | None
    leaf_fragmentation: float | None
    wal_bytes: int | None
    wal_ratio: float | None
    clock_drift_ms: int | None
    counter_bits: int | None
    random_bits: int | None


@dataclass
class LayoutBenchmark:
    """Everything ``sqla-ids bench`` measured, and its recommendation."""

    dialect: str
    scratch: str
    rows: int
    rates: list[int]
    writers: int
    layouts: list[str]
    results: list[BenchRow] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    recommendation: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return asdict(self)


DEFAULT_LAYOUTS = ("default", "cpython314", "no-counter")
DEFAULT_RATES = (1, 64, 512, 4096)
DENSITY_TOLERANCE = 2.0
"""Percentage points of leaf density below ``bigint`` that still count as dense."""
SIZE_TOLERANCE = 1.10
"""Where density is not measured: index size up to this factor of the smallest UUIDv7 index."""
MIN_ROWS_TO_JUDGE_DENSITY = 5_000
"""Below this, an index has a handful of pages and its density says nothing."""


def _ratio_value(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else round(value / base, 4)


def _row(kind: Kind, result: Measure, rows: int, writers: int, base: Measure) -> BenchRow:
    layout = PRESETS[kind.layout] if kind.layout else None
    return BenchRow(
        key=kind.name,
        layout=kind.layout,
        rows_per_ms=kind.per_ms,
        writers=writers,
        rows=rows,
        seconds=round(result.seconds, 6),
        rows_per_second=round(rows / result.seconds, 1),
        time_ratio=_ratio_value(result.seconds, base.seconds),
        index_bytes=result.index_bytes,
        size_ratio=_ratio_value(result.index_bytes, base.index_bytes),
        leaf_density=result.density,
        leaf_fragmentation=result.fragmentation,
        wal_bytes=result.wal_bytes,
        wal_ratio=_ratio_value(result.wal_bytes, base.wal_bytes),
        clock_drift_ms=result.drift_ms,
        counter_bits=layout.counter_bits if layout else None,
        random_bits=layout.random_bits if layout else None,
    )


def check_options(rows: int, rates: Sequence[int], writers: int, layouts: Sequence[str]) -> None:
    """Raise ``ValueError`` naming the first bad option (before anything is created)."""
    if rows < 10:
        raise ValueError(f"rows must be at least 10, got {rows}")
    if not rates or any(rate < 1 for rate in rates):
        raise ValueError(
            f"rates must be one or more positive rows-per-millisecond, got {list(rates)}"
        )
    if writers < 1:
        raise ValueError(f"writers must be at least 1, got {writers}")
    if not layouts:
        raise ValueError("give at least one layout")
    for name in layouts:
        if name not in PRESETS:
            raise ValueError(f"unknown layout {name!r} (choose from {', '.join(PRESETS)})")


def run_layout_benchmark(
    url: URL | str,
    *,
    rows: int = 20_000,
    rates: Sequence[int] = DEFAULT_RATES,
    writers: int = 4,
    layouts: Sequence[str] = DEFAULT_LAYOUTS,
    progress: Callable[[str], None] | None = None,
) -> LayoutBenchmark:
    """Compare ``bigint``, UUIDv4 and our UUIDv7 per layout and rate on the database at ``url``.

    For each layout preset and each rate R, ``rows`` keys are made with R
    of them in each simulated millisecond and inserted in order; the row
    reports how far their timestamps ran ahead of the clock (a counter too
    short for R). Then ``writers`` processes insert at once with the real
    clock (PostgreSQL and MariaDB/MySQL), and the server function where it
    can be installed. All in a scratch area that is dropped afterwards.
    """
    check_options(rows, rates, writers, layouts)
    rates, layouts = list(dict.fromkeys(rates)), list(dict.fromkeys(layouts))  # once each
    say = progress or (lambda _message: None)
    with scratch_area(url) as scratch:
        engine = scratch.engine
        pieces = for_dialect(engine.dialect).bench()
        report = LayoutBenchmark(
            dialect="mariadb"
            if getattr(engine.dialect, "is_mariadb", False)
            else engine.dialect.name,
            scratch=scratch.name,
            rows=rows,
            rates=list(rates),
            writers=writers,
            layouts=list(layouts),
        )
        bigint = Kind("bigint", "bigint")
        measure(engine, bigint, min(rows, 2_000))  # warm-up, not reported
        singles = [bigint, Kind("UUIDv4", "uuid", "uuid4")]
        singles += [
            Kind(f"UUIDv7 {layout}", "uuid", "uuid7", layout, rate)
            for layout in layouts
            for rate in rates
        ]
        server = Kind("UUIDv7 server fn", "server")
        if scratch.server_function_error is None:
            singles.append(server)
        else:
            report.skipped.append(f"server function: {scratch.server_function_error}")
        base: Measure | None = None
        for kind in singles:
            say(f"{kind.name}" + (f" at {kind.per_ms:,} rows/ms" if kind.per_ms else ""))
            result = measure(engine, kind, rows)
            base = base or result
            report.results.append(_row(kind, result, rows, 1, base))
        if writers > 1 and pieces.concurrent:
            together = [bigint, Kind("UUIDv4", "uuid", "uuid4")]
            together += [Kind(f"UUIDv7 {layout}", "uuid", "uuid7", layout) for layout in layouts]
            if scratch.server_function_error is None:
                together.append(server)
            if scratch.serial_function:
                together.append(Kind("UUIDv7 serial server fn", "serial"))
            base = None
            for kind in together:
                say(f"{kind.name}, {writers} writers")
                result = measure_concurrent(engine, scratch.url, kind, rows, writers)
                base = base or result
                report.results.append(_row(kind, result, rows, writers, base))
        elif writers > 1:
            report.skipped.append(
                f"{writers} concurrent writers: {report.dialect} lets one writer at a time in"
            )
    report.recommendation = recommend(report)
    return report


def counter_bits_for(per_ms: int, guard_bits: int = 1) -> int:
    """Shortest counter that never overflows at ``per_ms`` keys per millisecond.

    A counter re-seeded below ``2**(bits - guard_bits)`` has at least
    ``2**bits - 2**(bits - guard_bits)`` steps left in its millisecond.
    """
    bits = guard_bits
    while (1 << bits) - (1 << (bits - guard_bits)) < per_ms:
        bits += 1
    return bits


def _dense(row: BenchRow, rows: Sequence[BenchRow], base: BenchRow) -> bool | None:
    if row.leaf_density is not None and base.leaf_density is not None:
        return row.leaf_density >= base.leaf_density - DENSITY_TOLERANCE
    sizes = [r.index_bytes for r in rows if r.layout and r.index_bytes and r.writers == row.writers]
    if row.index_bytes is None or not sizes:
        return None
    return row.index_bytes <= SIZE_TOLERANCE * min(sizes)


def _density_text(row: BenchRow, base: BenchRow) -> str:
    if row.leaf_density is not None and base.leaf_density is not None:
        return f"PK leaf density {row.leaf_density:.1f}% (bigint {base.leaf_density:.1f}%)"
    if row.size_ratio is not None:
        return f"PK size {row.size_ratio:.2f}x bigint"
    return "its keys in order"


def recommend(report: LayoutBenchmark) -> str:
    """One line: the layout with the most random bits that stays dense and on time."""
    singles = [r for r in report.results if r.writers == 1]
    base = singles[0]
    top = max(report.rates)
    verdicts: dict[str, str | None] = {}  # layout -> why not (None: fine)
    for layout in report.layouts:
        why = None
        for row in (r for r in singles if r.layout == layout):
            assert row.rows_per_ms is not None
            if row.clock_drift_ms:
                why = (
                    f"timestamps ran {row.clock_drift_ms:,} ms ahead at {row.rows_per_ms:,} rows/ms"
                )
                break
            if report.rows >= MIN_ROWS_TO_JUDGE_DENSITY and _dense(row, singles, base) is False:
                why = f"{_density_text(row, base)} at {row.rows_per_ms:,} rows/ms"
                break
        verdicts[layout] = why
    good = [name for name, why in verdicts.items() if why is None]
    sizing = f"a counter needs >= {counter_bits_for(top)} bits (1 guard bit) for {top:,} rows/ms"
    others = "; ".join(f"{name}: {why}" for name, why in verdicts.items() if why)
    if not good:
        return (
            f"no requested layout keeps the index dense without clock drift at {top:,} rows/ms "
            f"({others}); {sizing}, or use the server function"
        )
    best = max(good, key=lambda name: PRESETS[name].random_bits)
    chosen = PRESETS[best]
    at_top = next(r for r in singles if r.layout == best and r.rows_per_ms == top)
    judged = report.rows >= MIN_ROWS_TO_JUDGE_DENSITY
    if judged:
        keeps = f"keeps {_density_text(at_top, base)} at {top:,} rows/ms without clock drift"
    else:
        keeps = (
            f"keeps its timestamps on the clock at {top:,} rows/ms (density not judged below "
            f"{MIN_ROWS_TO_JUDGE_DENSITY:,} rows)"
        )
    line = (
        f"layout {best!r} ({chosen.counter_bits}-bit counter, {chosen.random_bits} random bits) "
        f"{keeps}; {sizing}"
    )
    together = [r for r in report.results if r.writers > 1]
    mine = next((r for r in together if r.layout == best), None)
    if mine is not None and mine.leaf_density is not None and judged:
        line += f"; with {mine.writers} writers its leaf density is {mine.leaf_density:.1f}%"
        if mine.leaf_density < 85.0:
            line += (
                ' (below 85%: consider uuid7_pk(server_default="serial"), whose'
                " sqla_ids_uuid7_serial() is ordered across connections)"
            )
    if others:
        line += f"; not {others}"
    return line
