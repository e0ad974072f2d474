"""Infer primary and foreign keys among UUID columns from the data (docs/tools.md).

For undocumented databases: every column that holds UUIDs (native type, 16
bytes, or text whose sampled values all read as UUIDs) is measured -- rows,
distinct values -- and then compared with the others:

* a **primary-key candidate** is unique and never null;
* a **reference (foreign-key) candidate** ``A → B`` is a column whose distinct
  values are (mostly) contained in a primary-key candidate ``B``.

Values are compared as 32 lower-case hex digits, so a ``CHAR(36)`` column can
be found to reference a ``BINARY(16)`` or native ``uuid`` one. Declared keys
are reported with confidence 1.0; inferred ones get a score from the data:

``confidence = containment * (0.5 + 0.3 * name + 0.2 * support)``, capped at 0.99,

where *containment* is the share of A's distinct values found in B, *name* is
1 when A's name says it points at B (``customer_id`` → ``customers.id``, or
the same column name), 0.5 when it mentions B's table, else 0, and *support*
grows with the number of distinct values (full from 10 on): two columns
sharing one value prove little.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.expression import Executable

from sqla_ids.alembic.filters import is_sqla_ids_table, recorded_objects
from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.scanning import Scanning
from sqla_ids.identifiers import UUIDFormatError, parse_uuid
from sqla_ids.tools.columns import (
    CandidateColumn,
    candidate_columns,
    default_schema,
    table_clause,
)
from sqla_ids.tools.connections import connection_for, scan_transaction
from sqla_ids.tools.limits import TimeBudget

# Only these kinds can be compared value by value (documents and arrays cannot).
_COMPARABLE = ("uuid", "binary", "text", "any")
SUPPORT_VALUES = 10
"""Distinct values from which the amount of evidence no longer lowers confidence."""


@dataclass(frozen=True)
class UuidColumn:
    """A column found to hold UUIDs, with its measurements."""

    table: str
    column: str
    kind: str
    type_name: str
    rows: int
    """Rows in the table."""
    values: int
    """Non-null values in the column."""
    distinct: int
    """Distinct values."""
    declared_primary_key: bool
    nullable: bool

    @property
    def name(self) -> str:
        """``table.column``."""
        return f"{self.table}.{self.column}"

    @property
    def unique(self) -> bool:
        """Every value differs from every other."""
        return self.values > 0 and self.distinct == self.values

    @property
    def complete(self) -> bool:
        """No row has a null."""
        return self.values == self.rows


@dataclass(frozen=True)
class KeyCandidate:
    """A column that can serve as its table's primary key."""

    table: str
    column: str
    confidence: float
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class ReferenceCandidate:
    """``table.column`` probably references ``target_table.target_column``."""

    table: str
    column: str
    target_table: str
    target_column: str
    confidence: float
    containment: float
    """Share of the column's distinct values present in the target."""
    shared: int
    """Distinct values found in the target."""
    declared: bool
    one_to_one: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class RelatedColumn:
    """Another UUID column related to a given one by name or by shared values."""

    table: str
    column: str
    same_name: bool
    shared: int
    """Distinct values the two columns have in common."""
    overlap: float
    """``shared`` as a share of the given column's distinct values."""


@dataclass
class RelationsReport:
    """Result of :func:`infer_relations`."""

    schema: str | None
    columns: list[UuidColumn] = field(default_factory=list)
    primary_keys: list[KeyCandidate] = field(default_factory=list)
    references: list[ReferenceCandidate] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Checks that could not run (time budget, timeouts, errors), with the reason."""
    left_out: list[str] = field(default_factory=list)
    """sqla_ids' own tables, not analysed unless named in ``tables``: a key
    migration's mapping tables (old key -> new key) and state table, merge
    histories, SQLite's order-number counters. They hold copies of keys, not
    relationships of the application."""
    interrupted: bool = False
    elapsed_seconds: float = 0.0

    @property
    def complete(self) -> bool:
        """True when every check ran."""
        return not self.interrupted and not self.skipped

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary."""
        return {
            "schema": self.schema,
            "complete": self.complete,
            "interrupted": self.interrupted,
            "elapsed_seconds": round(self.elapsed_seconds, 3),
            "columns": [
                {**asdict(c), "unique": c.unique, "complete": c.complete} for c in self.columns
            ],
            "primary_keys": [asdict(k) for k in self.primary_keys],
            "references": [asdict(r) for r in self.references],
            "skipped": list(self.skipped),
            "left_out": list(self.left_out),
        }

    def to_json(self) -> str:
        """The report as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)


class _Interrupted(Exception):
    """The time budget ran out or the scan was interrupted."""


class _Scanner:
    """Runs the measuring statements, each read-only and under the time budget."""

    def __init__(self, connection: Connection, budget: TimeBudget, report: RelationsReport):
        self.connection = connection
        self.sql: Scanning = for_dialect(connection.dialect).scanning()
        self.budget = budget
        self.report = report

    def rows(self, what: str, query: Executable) -> list[sa.Row[Any]] | None:
        if self.budget.expired():
            raise _Interrupted
        transaction = scan_transaction(self.connection)
        try:
            with self.sql.time_limit(self.connection, self.budget.remaining()):
                return list(self.connection.execute(query).all())
        except sa.exc.DBAPIError as error:
            why = "timed out" if self.sql.is_timeout(error) else type(error.orig).__name__
            self.report.skipped.append(f"{what}: {why}")
            return None
        finally:
            transaction.rollback()

    def hex_of(
        self, candidate: CandidateColumn, *, alias: str | None = None
    ) -> sa.ColumnElement[Any]:
        """The candidate's values as 32 hex digits, from its table (under ``alias``)."""
        table = table_clause(candidate.schema, candidate.table, candidate.column)
        column = (
            table.c[candidate.column] if alias is None else table.alias(alias).c[candidate.column]
        )
        return self.sql.hex_expression(column, candidate.kind)

    def shared_values(
        self, what: str, source: CandidateColumn, target: CandidateColumn
    ) -> int | None:
        """Distinct values of ``source`` also present in ``target``."""
        source_hex = self.hex_of(source)
        # The alias keeps the subquery apart even when both columns share a table.
        target_hex = self.hex_of(target, alias="target")
        subquery = sa.select(target_hex).where(target_hex.is_not(None)).correlate(None)
        rows = self.rows(
            what, sa.select(sa.func.count(sa.distinct(source_hex))).where(source_hex.in_(subquery))
        )
        return None if rows is None else int(rows[0][0])


def _looks_like_uuids(values: Sequence[Any]) -> bool:
    if not values:
        return False
    for value in values:
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(bytes(value)) != 16:
                return False
            continue
        text = str(value)
        if len(text.replace("-", "")) != 32:  # hex spellings only: CHAR(26) is rarely a UUID
            return False
        try:
            parse_uuid(text)
        except UUIDFormatError:
            return False
    return True


def _measure(scanner: _Scanner, candidate: CandidateColumn, sample_rows: int) -> UuidColumn | None:
    table = table_clause(candidate.schema, candidate.table, candidate.column)
    column = table.c[candidate.column]
    if candidate.kind != "uuid":
        sample = scanner.rows(
            f"sample {candidate.qualified_name}",
            sa.select(column).where(column.is_not(None)).limit(sample_rows),
        )
        if sample is None or not _looks_like_uuids([row[0] for row in sample]):
            return None
    hex_value = sa.type_coerce(scanner.sql.hex_expression(column, candidate.kind), sa.String())
    counts = scanner.rows(
        f"count {candidate.qualified_name}",
        sa.select(sa.func.count(), sa.func.count(column), sa.func.count(sa.distinct(hex_value))),
    )
    if counts is None:
        return None
    rows, values, distinct = (int(n) for n in counts[0])
    return UuidColumn(
        table=candidate.table,
        column=candidate.column,
        kind=candidate.kind,
        type_name=candidate.type_name,
        rows=rows,
        values=values,
        distinct=distinct,
        declared_primary_key=candidate.primary_key,
        nullable=candidate.nullable,
    )


def _singular(name: str) -> str:
    lowered = name.lower()
    if lowered.endswith("ies"):
        return lowered[:-3] + "y"
    if lowered.endswith(("ses", "xes")):
        return lowered[:-2]
    return lowered[:-1] if lowered.endswith("s") else lowered


_KEY_SUFFIXES = ("_uuid", "_guid", "_ref", "_id", "uuid", "guid", "id")


def _name_score(source: UuidColumn, target: UuidColumn) -> float:
    """1.0 when the column is named after the target table, 0.5 when it mentions it."""
    column = source.column.lower()
    if column == target.column.lower() and column not in ("id", "uuid", "guid"):
        return 1.0
    stem = next((column[: -len(s)] for s in _KEY_SUFFIXES if column.endswith(s)), column)
    stem = stem.rstrip("_")
    table = _singular(target.table)
    if stem and (table == stem or table.endswith(f"_{stem}")):  # also prefixed tables
        return 1.0
    if stem and stem in table:
        return 0.5
    return 0.0


def _key_candidate(column: UuidColumn) -> KeyCandidate | None:
    if not (column.unique and column.complete):
        return None
    if column.declared_primary_key:
        return KeyCandidate(column.table, column.column, 1.0, ("declared primary key",))
    reasons = ["unique", "never null"]
    confidence = 0.6
    name = column.column.lower()
    if name in ("id", "uuid", "guid", f"{_singular(column.table)}_id"):
        confidence += 0.2
        reasons.append("named like a key")
    if not column.nullable:
        confidence += 0.1
        reasons.append("declared NOT NULL")
    support = min(1.0, column.distinct / SUPPORT_VALUES)
    return KeyCandidate(
        column.table, column.column, round(confidence * (0.8 + 0.2 * support), 3), tuple(reasons)
    )


def _declared_references(
    connection: Connection, schema: str | None, tables: set[str]
) -> set[tuple[str, str, str, str]]:
    return for_dialect(connection.dialect).declared_references(connection, schema, tables)


def infer_relations(
    bind: Engine | Connection,
    *,
    schema: str | None = None,
    tables: Sequence[str] | None = None,
    sample_rows: int = 200,
    min_confidence: float = 0.5,
    timeout: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> RelationsReport:
    """Find UUID columns, primary-key and reference candidates in a schema.

    ``sample_rows`` text/binary values per column are checked to decide whether
    it holds UUIDs. References below ``min_confidence`` are left out.
    ``timeout`` (seconds) bounds the whole analysis; checks that did not run
    are listed in ``report.skipped``. Ctrl-C returns the partial report with
    ``interrupted=True``. sqla_ids' own tables (mapping tables, migration
    state...) are left out, listed in ``report.left_out``, unless named in
    ``tables``. Read-only.
    """
    if sample_rows < 1:
        raise ValueError(f"sample_rows must be at least 1, got {sample_rows}")
    if not 0.0 <= min_confidence <= 1.0:
        raise ValueError(f"min_confidence must be between 0 and 1, got {min_confidence}")
    budget = TimeBudget(timeout, clock=clock)
    with connection_for(bind) as connection:
        report = RelationsReport(schema=default_schema(connection, schema))
        candidates = [
            c
            for c in candidate_columns(
                connection, schema, tables=None if tables is None else list(tables)
            )
            if c.kind in _COMPARABLE
        ]
        if tables is None:
            own = _sqla_ids_tables(connection, {c.table for c in candidates})
            candidates = [c for c in candidates if c.table not in own]
            report.left_out = sorted(own)
        scanner = _Scanner(connection, budget, report)
        try:
            _analyse(scanner, connection, schema, candidates, sample_rows, min_confidence)
        except _Interrupted:
            report.skipped.append("time budget used up: remaining checks not run")
        except KeyboardInterrupt:
            report.interrupted = True
    report.elapsed_seconds = budget.elapsed()
    return report


def _sqla_ids_tables(connection: Connection, names: set[str]) -> set[str]:
    """Which of ``names`` are sqla_ids' own tables: by name, or recorded as a
    migration's mapping table (``mapping_table=`` may name it anything)."""
    recorded, _ = recorded_objects(connection)
    return {name for name in names if is_sqla_ids_table(name) or name in recorded}


def _analyse(
    scanner: _Scanner,
    connection: Connection,
    schema: str | None,
    candidates: list[CandidateColumn],
    sample_rows: int,
    min_confidence: float,
) -> None:
    report = scanner.report
    by_name: dict[tuple[str, str], CandidateColumn] = {}
    for candidate in candidates:
        measured = _measure(scanner, candidate, sample_rows)
        if measured is not None:
            report.columns.append(measured)
            by_name[measured.table, measured.column] = candidate
    keys = [k for k in map(_key_candidate, report.columns) if k is not None]
    declared_keys = {(c.table, c.column) for c in report.columns if c.declared_primary_key}
    report.primary_keys.extend(keys)
    key_columns = {(k.table, k.column) for k in keys}
    declared = _declared_references(connection, schema, {c.table for c in report.columns})
    targets = [c for c in report.columns if (c.table, c.column) in key_columns]
    for source in report.columns:
        if source.distinct == 0:
            continue
        for target in targets:
            if (source.table, source.column) == (target.table, target.column):
                continue
            reference = _compare(
                scanner,
                by_name[source.table, source.column],
                by_name[target.table, target.column],
                source,
                target,
                (source.table, source.column, target.table, target.column) in declared,
            )
            if reference is not None and reference.confidence >= min_confidence:
                report.references.append(reference)
    report.references[:] = _best_target_per_column(
        _drop_weaker_reverse(report.references, declared_keys), declared_keys
    )
    report.references.sort(key=lambda r: (-r.confidence, r.table, r.column))


def _best_target_per_column(
    references: list[ReferenceCandidate], declared_keys: set[tuple[str, str]]
) -> list[ReferenceCandidate]:
    """Keep one target per referencing column.

    A column contained in ``customers.id`` is also contained in every
    one-to-one child of it (``profiles.customer_id``); the best target is the
    declared reference, else the most confident, else a declared primary key,
    else the one that itself references nothing (the root).
    """
    sources = {(r.table, r.column) for r in references}
    best: dict[tuple[str, str], ReferenceCandidate] = {}
    others: dict[tuple[str, str], list[str]] = {}

    def rank(r: ReferenceCandidate) -> tuple[bool, float, bool, bool]:
        target = (r.target_table, r.target_column)
        return (r.declared, r.confidence, target in declared_keys, target not in sources)

    for r in references:
        key = (r.table, r.column)
        current = best.get(key)
        if current is None or rank(r) > rank(current):
            if current is not None:
                others.setdefault(key, []).append(f"{current.target_table}.{current.target_column}")
            best[key] = r
        else:
            others.setdefault(key, []).append(f"{r.target_table}.{r.target_column}")
    return [
        dataclasses.replace(r, reasons=(*r.reasons, f"also contained in {', '.join(others[k])}"))
        if k in others
        else r
        for k, r in best.items()
    ]


def _drop_weaker_reverse(
    references: list[ReferenceCandidate], declared_keys: set[tuple[str, str]]
) -> list[ReferenceCandidate]:
    """Of ``A → B`` and ``B → A`` (two unique columns with the same values) keep one.

    The one kept has the higher confidence; on a tie, the one pointing at a
    declared primary key.
    """

    def strength(r: ReferenceCandidate) -> tuple[float, bool]:
        return (r.confidence, (r.target_table, r.target_column) in declared_keys)

    by_pair = {(r.table, r.column, r.target_table, r.target_column): r for r in references}
    kept = []
    for r in references:
        reverse = by_pair.get((r.target_table, r.target_column, r.table, r.column))
        if reverse is None or r.declared or strength(r) > strength(reverse):
            kept.append(r)
        elif strength(r) == strength(reverse) and (r.table, r.column) < (
            r.target_table,
            r.target_column,
        ):
            kept.append(r)  # a genuine tie: keep one direction, deterministically
    return kept


def _compare(
    scanner: _Scanner,
    source_candidate: CandidateColumn,
    target_candidate: CandidateColumn,
    source: UuidColumn,
    target: UuidColumn,
    declared: bool,
) -> ReferenceCandidate | None:
    shared = scanner.shared_values(
        f"compare {source.name} with {target.name}", source_candidate, target_candidate
    )
    if shared is None:
        return None
    containment = shared / source.distinct
    if not declared and containment < 0.5:
        return None
    name = _name_score(source, target)
    support = min(1.0, source.distinct / SUPPORT_VALUES)
    reasons = [f"{shared} of {source.distinct} distinct values found in {target.name}"]
    if name:
        reasons.append("name points at the target" if name == 1.0 else "name mentions the table")
    if declared:
        reasons.insert(0, "declared foreign key")
        confidence = 1.0
    else:
        confidence = min(0.99, containment * (0.5 + 0.3 * name + 0.2 * support))
    return ReferenceCandidate(
        table=source.table,
        column=source.column,
        target_table=target.table,
        target_column=target.column,
        confidence=round(confidence, 3),
        containment=round(containment, 4),
        shared=shared,
        declared=declared,
        one_to_one=source.unique,
        reasons=tuple(reasons),
    )


def related_columns(
    bind: Engine | Connection,
    table: str,
    column: str,
    *,
    schema: str | None = None,
    sample_rows: int = 200,
    timeout: float | None = None,
) -> list[RelatedColumn]:
    """UUID columns related to ``table.column``: same name, or sharing values with it.

    Sorted by shared values, most first. Raises ``ValueError`` if the column
    does not exist or holds no UUIDs.
    """
    budget = TimeBudget(timeout)
    with connection_for(bind) as connection:
        report = RelationsReport(schema=schema)
        scanner = _Scanner(connection, budget, report)
        candidates = [c for c in candidate_columns(connection, schema) if c.kind in _COMPARABLE]
        given = next((c for c in candidates if (c.table, c.column) == (table, column)), None)
        if given is None:
            raise ValueError(f"no UUID-capable column {table}.{column} in the schema")
        measured = _measure(scanner, given, sample_rows)
        if measured is None:
            raise ValueError(f"{table}.{column} does not hold UUID values")
        related: list[RelatedColumn] = []
        for other in candidates:
            if other is given:
                continue
            shared = (
                scanner.shared_values(
                    f"compare {given.qualified_name} with {other.qualified_name}", given, other
                )
                or 0
            )
            same_name = other.column.lower() == column.lower()
            if shared or same_name:
                overlap = shared / measured.distinct if measured.distinct else 0.0
                related.append(
                    RelatedColumn(other.table, other.column, same_name, shared, round(overlap, 4))
                )
    related.sort(key=lambda r: (-r.shared, not r.same_name, r.table, r.column))
    return related
