"""Find one UUID value anywhere in a database schema (docs/tools.md).

Every column that may hold a UUID (see :mod:`sqla_ids.tools.columns`) is
searched for every storage form of the value -- native ``uuid``, canonical or
32-hex text in either case, Crockford Base32, 16 raw bytes, and inside
JSON/JSONB documents and arrays. The scan is bounded: at most ``limit_rows``
rows are fetched per column, every statement gets the remaining time budget as
its server-side limit, and Ctrl-C stops it early. The report always says what
was scanned and what was not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.scanning import Scanning, Spellings
from sqla_ids.identifiers import parse_uuid
from sqla_ids.tools.columns import (
    CandidateColumn,
    candidate_columns,
    default_schema,
    table_clause,
)
from sqla_ids.tools.connections import connection_for, scan_transaction
from sqla_ids.tools.limits import TimeBudget
from sqla_ids.tools.report import format_table

# Outcome of scanning one column.
FOUND, ABSENT, TIMEOUT, FAILED, SKIPPED = "found", "absent", "timeout", "error", "skipped"


@dataclass(frozen=True)
class ScannedColumn:
    """What happened when one column was searched."""

    table: str
    column: str
    kind: str
    type_name: str
    status: str
    """``found``, ``absent``, ``timeout``, ``error`` or ``skipped`` (budget/interrupt)."""
    detail: str = ""


@dataclass(frozen=True)
class FindMatch:
    """A column holding the UUID, with the keys of (up to ``limit_rows``) matching rows."""

    table: str
    column: str
    kind: str
    type_name: str
    key_columns: tuple[str, ...]
    keys: tuple[tuple[str, ...], ...]
    truncated: bool
    """True when more rows match than were fetched."""

    @property
    def rows(self) -> str:
        """Number of matching rows as text, ``"10+"`` when truncated."""
        return f"{len(self.keys)}{'+' if self.truncated else ''}"


@dataclass
class FindReport:
    """Result of :func:`find_uuid`: matches plus an account of everything scanned."""

    value: UUID
    schema: str | None
    matches: list[FindMatch] = field(default_factory=list)
    scanned: list[ScannedColumn] = field(default_factory=list)
    interrupted: bool = False
    elapsed_seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """True when every candidate column was searched to the end."""
        return not self.interrupted and all(s.status in (FOUND, ABSENT) for s in self.scanned)

    def counts(self) -> dict[str, int]:
        """Number of scanned columns per status."""
        result: dict[str, int] = {}
        for scanned in self.scanned:
            result[scanned.status] = result.get(scanned.status, 0) + 1
        return result

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary of the whole report."""
        return {
            "value": str(self.value),
            "schema": self.schema,
            "complete": self.complete,
            "interrupted": self.interrupted,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "counts": self.counts(),
            "matches": [
                {**asdict(match), "rows": match.rows, "keys": [list(k) for k in match.keys]}
                for match in self.matches
            ],
            "scanned": [asdict(scanned) for scanned in self.scanned],
        }

    def to_json(self) -> str:
        """The report as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)


def _key_text(value: Any) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        return str(parse_uuid(raw)) if len(raw) == 16 else raw.hex()
    return str(value)


def _scan_column(
    connection: Connection,
    sql: Scanning,
    candidate: CandidateColumn,
    uuid: UUID,
    spellings: Spellings,
    limit_rows: int,
    seconds: float | None,
) -> FindMatch | None:
    keys = list(candidate.table_primary_key) or [candidate.column]
    table = table_clause(candidate.schema, candidate.table, candidate.column, *keys)
    condition = sql.match_clause(
        table.c[candidate.column], candidate.kind, uuid, spellings, candidate.type
    )
    query = sa.select(*(table.c[k] for k in keys)).where(condition).limit(limit_rows + 1)
    transaction = scan_transaction(connection)
    try:
        with sql.time_limit(connection, seconds):
            rows = connection.execute(query).all()
    finally:
        transaction.rollback()  # read-only scan: nothing to keep
    if not rows:
        return None
    return FindMatch(
        table=candidate.table,
        column=candidate.column,
        kind=candidate.kind,
        type_name=candidate.type_name,
        key_columns=tuple(keys),
        keys=tuple(tuple(_key_text(v) for v in row) for row in rows[:limit_rows]),
        truncated=len(rows) > limit_rows,
    )


def find_uuid(
    bind: Engine | Connection,
    value: UUID | str | bytes,
    *,
    schema: str | None = None,
    tables: Sequence[str] | None = None,
    limit_rows: int = 10,
    timeout: float | None = None,
    progress: Callable[[ScannedColumn], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> FindReport:
    """Search every UUID-capable column of a schema for ``value``.

    ``value`` may be any spelling :func:`~sqla_ids.parse_uuid` reads. ``schema``
    defaults to the connection's default schema; ``tables`` restricts the scan.
    At most ``limit_rows`` matching rows are fetched per column; ``timeout``
    (seconds) bounds the whole scan, each statement getting the rest of it as
    its server-side limit. ``progress`` is called after each column. A
    ``KeyboardInterrupt`` (Ctrl-C) ends the scan early: the partial report is
    returned with ``interrupted=True`` and the remaining columns ``skipped``.
    Read-only: every statement runs in a transaction that is rolled back.
    """
    uuid = parse_uuid(value)
    if limit_rows < 1:
        raise ValueError(f"limit_rows must be at least 1, got {limit_rows}")
    budget = TimeBudget(timeout, clock=clock)
    spellings = Spellings.of(uuid)
    with connection_for(bind) as connection:
        sql = for_dialect(connection.dialect).scanning()
        report = FindReport(value=uuid, schema=default_schema(connection, schema))
        candidates = candidate_columns(
            connection, schema, tables=None if tables is None else list(tables)
        )
        for index, candidate in enumerate(candidates):
            if budget.expired():
                report.scanned.extend(
                    _skipped(rest, "time budget used up") for rest in candidates[index:]
                )
                break
            try:
                status, detail = _search(
                    connection, sql, candidate, uuid, spellings, limit_rows, budget, report
                )
                scanned = _scanned(candidate, status, detail)
                report.scanned.append(scanned)
                if progress is not None:
                    progress(scanned)
            except KeyboardInterrupt:
                report.interrupted = True
                done = {(s.table, s.column) for s in report.scanned}
                report.scanned.extend(
                    _skipped(rest, "interrupted")
                    for rest in candidates[index:]
                    if (rest.table, rest.column) not in done
                )
                break
    report.elapsed_seconds = budget.elapsed()
    return report


def _search(
    connection: Connection,
    sql: Scanning,
    candidate: CandidateColumn,
    uuid: UUID,
    spellings: Spellings,
    limit_rows: int,
    budget: TimeBudget,
    report: FindReport,
) -> tuple[str, str]:
    try:
        match = _scan_column(
            connection, sql, candidate, uuid, spellings, limit_rows, budget.remaining()
        )
    except sa.exc.DBAPIError as error:
        if sql.is_timeout(error):
            return TIMEOUT, "statement cancelled by the time budget"
        first_line = str(error.orig).strip().splitlines()[0] if str(error.orig) else ""
        return FAILED, f"{type(error.orig).__name__}: {first_line}"
    if match is None:
        return ABSENT, ""
    report.matches.append(match)
    return FOUND, f"{match.rows} row(s)"


def _scanned(candidate: CandidateColumn, status: str, detail: str) -> ScannedColumn:
    return ScannedColumn(
        table=candidate.table,
        column=candidate.column,
        kind=candidate.kind,
        type_name=candidate.type_name,
        status=status,
        detail=detail,
    )


def _skipped(candidate: CandidateColumn, why: str) -> ScannedColumn:
    return _scanned(candidate, SKIPPED, why)


def format_report(report: FindReport, *, verbose: bool = False) -> str:
    """The report as a plain-text table (matches; every scanned column if ``verbose``)."""
    lines = [f"UUID {report.value} in schema {report.schema or '(default)'}:"]
    if report.matches:
        rows = []
        for match in report.matches:
            shown = ", ".join(
                "("
                + ", ".join(f"{c}={v}" for c, v in zip(match.key_columns, key, strict=True))
                + ")"
                for key in match.keys[:3]
            )
            more = " …" if len(match.keys) > 3 or match.truncated else ""
            rows.append(
                (match.table, match.column, match.kind, match.type_name, match.rows, shown + more)
            )
        lines.append(
            format_table(("table", "column", "kind", "type", "rows", "keys"), rows, indent="  ")
        )
    else:
        lines.append("  not found")
    if verbose:
        lines.append("scanned:")
        scanned = [(s.table, s.column, s.kind, s.status, s.detail) for s in report.scanned]
        header = ("table", "column", "kind", "status", "detail")
        lines.append(format_table(header, scanned, indent="  "))
    counts = ", ".join(f"{n} {status}" for status, n in sorted(report.counts().items()))
    state = "complete" if report.complete else "INCOMPLETE"
    if report.interrupted:
        state += " (interrupted)"
    lines.append(
        f"scanned {len(report.scanned)} column(s) in {report.elapsed_seconds:.2f} s: "
        f"{counts or 'nothing to scan'}; {state}"
    )
    return "\n".join(lines)
