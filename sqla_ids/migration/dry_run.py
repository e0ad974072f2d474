"""The preflight: the plan, the cost and the risks of a key migration before it runs.

:func:`preflight` reads -- never writes -- and returns a
:class:`PreflightReport`: per table what will change (key, references,
indexes, constraints, views, triggers, defaults), what is refused and why,
the rows and bytes of every affected table, the exact statements of each
phase (offline: the strategy's; online: expand, backfill, prepare, swap,
contract), and the estimates of time, extra disk, log volume and the
longest lock (:mod:`sqla_ids.migration.core.estimate`), next to the free
disk and log settings the server shows (and what it cannot show), with a
warning where the run would not fit, and a recommendation: offline or
online, and a batch size.

The statements are built by the same code that runs them. The online swap
and contract are built from a catalog (the columns, indexes, foreign keys
and triggers they carry over): before anything exists, each backend gives
the catalog as it will be after the prepare (``planned_locked``). Where a
statement can only be built from objects an earlier phase creates, the
report says so instead of guessing (MariaDB's ``NOT NULL`` rebuilds of the
children at the prepare).

The Alembic operation's ``dry_run=True`` logs this report; ``sqla-ids
migrate plan`` prints it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects import for_dialect
from sqla_ids.dialects.sql import ddl_sql
from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import online
from sqla_ids.migration.backends import backend_for
from sqla_ids.migration.backends.base import Backfill, MigrationBackend, OnlineStrategy, Probe
from sqla_ids.migration.core import state
from sqla_ids.migration.core.estimate import Estimate, LockKind, Range, estimate
from sqla_ids.migration.core.mapping import mapping_table
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.options import PkMigrationOptions, build_options
from sqla_ids.migration.core.phases import Reached
from sqla_ids.migration.core.sizing import (
    DataStep,
    PhaseSteps,
    ServerFacts,
    Shape,
    Step,
    TableSize,
)
from sqla_ids.migration.core.sql import Statement
from sqla_ids.migration.plan import make_plan
from sqla_ids.types.server_functions import uuid7_function_create_sql

__all__ = ["PreflightReport", "TablePreflight", "preflight", "preflight_many"]

#: Up to this longest lock an offline run is recommended (writers wait at most
#: that long, and the offline mode is simpler and faster); above it the online one.
OFFLINE_LOCK_SECONDS = 1.0


@dataclass
class TablePreflight:
    """The preflight of one table's key migration."""

    table: str
    mode: str
    """``offline`` or ``online``: the mode asked for."""
    plan: PkMigrationPlan | None = None
    recorded: str | None = None
    """The step a migration of this table is recorded at, if one is."""
    refused: list[str] = field(default_factory=list)
    """Why the migration cannot run in the mode asked for (empty: it can)."""
    online_refused: list[str] = field(default_factory=list)
    """Why the online mode cannot migrate this table (empty: it can)."""
    sizes: list[TableSize] = field(default_factory=list)
    phases: list[PhaseSteps] = field(default_factory=list)
    estimates: dict[str, Estimate] = field(default_factory=dict)
    """By mode: the one asked for, and the other where it is possible."""
    recommended_mode: str = ""
    recommended_batch_size: int = 0
    recommendation: str = ""

    @property
    def estimate(self) -> Estimate | None:
        """The estimate of the mode asked for."""
        return self.estimates.get(self.mode)

    @property
    def statements(self) -> list[Statement]:
        """Every statement of every phase, in order."""
        return [s for phase in self.phases for s in phase.statements]

    def changes(self) -> list[str]:
        """What the migration will change, one line each."""
        if self.plan is None:
            return []
        lines = self.plan.describe().splitlines()
        plan = self.plan
        if plan.new_default.triggers:
            lines.append(
                f"  trigger {', '.join(plan.new_default.triggers)} fills the new key of new rows"
            )
        if self.mode == "online":
            tables = ", ".join(plan.affected_tables)
            lines.append(
                f"  sync triggers on {tables} from the expand to the contract (they keep the"
                " old and new columns in step while the application writes)"
            )
        return lines


@dataclass
class PreflightReport:
    """The preflight of one or more tables on one database."""

    server: ServerFacts
    tables: list[TablePreflight]

    @property
    def refused(self) -> bool:
        """Whether any table cannot be migrated in the mode asked for."""
        return any(t.refused for t in self.tables)

    def describe(self, statements: bool = True) -> str:
        """The report as text (what ``sqla-ids migrate plan`` prints); without the
        statements of each phase if ``statements`` is false."""
        tables = (_table_lines(t, statements) for t in self.tables)
        return "\n".join([*_server_lines(self.server), *tables])

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-serialisable data."""
        return {
            "server": _plain(self.server),
            "tables": [
                {
                    "table": t.table,
                    "mode": t.mode,
                    "recorded": t.recorded,
                    "refused": t.refused,
                    "online_refused": t.online_refused,
                    "changes": t.changes(),
                    "sizes": [_plain(s) for s in t.sizes],
                    "phases": [
                        {
                            "phase": p.phase,
                            "runs": p.runs,
                            "steps": [
                                {"sql": s.sql}
                                if isinstance(s, Statement)
                                else {"data": s.what, "sql": s.sql}
                                for s in p.steps
                            ],
                            "notes": list(p.notes),
                        }
                        for p in t.phases
                    ],
                    "estimates": {mode: _plain(e) for mode, e in t.estimates.items()},
                    "recommended_mode": t.recommended_mode,
                    "recommended_batch_size": t.recommended_batch_size,
                    "recommendation": t.recommendation,
                }
                for t in self.tables
            ],
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=2)


def _plain(value: Any) -> Any:
    """Dataclasses, enums and tuples as JSON data."""
    if isinstance(value, LockKind):
        return value.name.lower()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def preflight(
    connection: Connection,
    table: str,
    options: PkMigrationOptions | None = None,
    *,
    phase: online.Phase = "all",
    **overrides: Any,
) -> PreflightReport:
    """The preflight of migrating ``table``'s key with ``options`` (or their fields
    as keywords), read from ``connection``; nothing is changed.

    ``phase`` (online) limits the phases shown. Refusals are reported, not
    raised; a database with no migration backend raises
    :class:`~sqla_ids.dialects.UnsupportedDialectError` as the migration would.
    """
    return preflight_many(connection, [(table, build_options(options, overrides))], phase=phase)


def preflight_many(
    connection: Connection,
    tables: Sequence[str | tuple[str, PkMigrationOptions]],
    *,
    phase: online.Phase = "all",
) -> PreflightReport:
    """The preflight of several tables (names or ``(name, options)``), as
    :func:`sqla_ids.migration.migrate_pks_to_uuid7` would migrate them -- each as
    the database is now (the migration plans a table again just before its
    turn, seeing what the earlier ones changed: where they share a child, its
    statements are built from that)."""
    backend = backend_for(connection)
    server = backend.preflight.server_facts(connection)
    reports = []
    for entry in tables:
        name, options = (entry, PkMigrationOptions()) if isinstance(entry, str) else entry
        reports.append(_table(connection, backend, server, name, options, phase))
    return PreflightReport(server, reports)


def _table(
    connection: Connection,
    backend: MigrationBackend,
    server: ServerFacts,
    table: str,
    options: PkMigrationOptions,
    phase: online.Phase,
) -> TablePreflight:
    report = TablePreflight(table, "online" if options.online else "offline")
    recorded = state.load(connection, table)
    try:
        if recorded is not None:
            step, report.plan = recorded
            report.recorded = step.encode()
        elif options.online and backend.online is not None:
            # The run's own refusal: the planner's blockers and the online mode's.
            report.plan = online.make_online_plan(connection, backend, table, options)
        else:
            report.plan = make_plan(connection, backend, table, options)
    except MigrationRefusedError as error:
        report.refused.append(str(error))
    tables = report.plan.affected_tables if report.plan is not None else [table]
    if sa.inspect(connection).has_table(table):
        report.sizes = backend.preflight.table_sizes(connection, tables)
    plan = report.plan
    if plan is None:
        return report
    strategy = backend.online
    if strategy is None:
        report.online_refused.append(f"{server.label} has no online mode")
    elif recorded is None:
        report.online_refused += strategy.refusals(connection, plan)
    if report.mode == "online":
        report.refused += report.online_refused
    if recorded is not None:
        _recorded(report, recorded[0].phase)
    elif not report.refused:
        report.phases = (
            _online_phases(connection, backend, plan, phase)
            if report.mode == "online"
            else [_offline_phase(connection, backend, plan)]
        )
    _estimate(report, backend, server, plan)
    return report


def _recorded(report: TablePreflight, reached: Reached) -> None:
    if reached is Reached.DONE:
        report.recommendation = "already migrated: a run skips it; undo restores the old keys"
    else:
        report.recommendation = (
            f"a migration is recorded at {reached.value}: a run continues it (its statements"
            " are built from the catalog as they run); undo removes it"
        )


def _state_table(connection: Connection) -> list[Step]:
    """The state table, as the runners create it on first use."""
    if sa.inspect(connection).has_table(state.STATE_TABLE):
        return []
    return [Statement(ddl_sql(sa.schema.CreateTable(state.state_table), connection.dialect))]


def _head(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """The state table (on first use) and the mapping table, as the offline runner
    creates them."""
    create = ddl_sql(sa.schema.CreateTable(mapping_table(plan)), connection.dialect)
    return [*_state_table(connection), Statement(create)]


def _offline_phase(
    connection: Connection, backend: MigrationBackend, plan: PkMigrationPlan
) -> PhaseSteps:
    steps = _head(connection, plan)
    steps.append(
        DataStep(
            f"mapping: one new UUIDv7 per {plan.table}.{plan.column}, in key order,"
            f" {plan.batch_size:,} rows per INSERT",
            rows=plan.row_count,
        )
    )
    if plan.new_default.kind == "uuid7_function":
        schema = for_dialect(connection.dialect).uuid7_function_schema(connection)
        create = uuid7_function_create_sql(connection.dialect, schema=schema)
        steps += [Statement(sql) for sql in create]
    steps += backend.preflight.planned_offline(connection, plan)
    steps.append(DataStep("check: row counts unchanged, no reference without its row"))
    runs = (
        "in one transaction: a failure or Ctrl-C rolls everything back; the affected tables"
        " stay locked until the commit"
        if backend.strategy.transactional
        else "each statement commits on its own; every step is recorded, and a run"
        " stopped anywhere continues where it stopped when run again"
    )
    return PhaseSteps("offline", runs, tuple(steps))


#: The online phases shown, by what they reach, and how the runner runs them.
_ONLINE_RUNS = {
    Reached.EXPANDED: ("expand", "in one short transaction (MariaDB: statement by statement)"),
    Reached.BACKFILLED: ("backfill", "batch by batch, each batch committed"),
    Reached.PREPARED: ("prepare", "index builds and checks that do not block writes"),
    Reached.SWAPPED: ("swap", "with the affected tables locked, briefly"),
    Reached.DONE: ("contract", "later, separately (MariaDB: tables locked briefly)"),
}
_GOAL = {"prepare": Reached.PREPARED, "swap": Reached.SWAPPED, "contract": Reached.DONE}


def _online_phases(
    connection: Connection, backend: MigrationBackend, plan: PkMigrationPlan, goal: str
) -> list[PhaseSteps]:
    strategy = backend.online
    assert strategy is not None
    locked = backend.preflight.planned_locked(connection, plan)
    phases = []
    first = True
    shown = set(_ONLINE_RUNS)
    if goal in ("swap", "contract"):  # a run of that phase alone
        shown = {_GOAL[goal]}
    for phase in online.UP:
        if phase.reaches not in _ONLINE_RUNS:
            continue
        name, runs = _ONLINE_RUNS[phase.reaches]
        steps: list[Step] = _state_table(connection) if first else []
        first = False
        notes: list[str] = []
        if phase.reaches is Reached.SWAPPED and locked is not None:
            steps += locked[0]
        elif phase.reaches is Reached.DONE and locked is not None:
            steps += locked[1]
        else:
            steps += _task_steps(connection, strategy, phase, plan, notes)
        if phase.reaches in shown:
            phases.append(PhaseSteps(name, runs, tuple(steps), tuple(notes)))
        if goal == "prepare" and phase.reaches is Reached.PREPARED:
            break
    return phases


def _task_steps(
    connection: Connection,
    strategy: OnlineStrategy,
    phase: online.OnlinePhase,
    plan: PkMigrationPlan,
    notes: list[str],
) -> list[Step]:
    """The statements of a phase's tasks, built from the catalog now (the builders
    only read), and its backfills and checks as data steps."""
    steps: list[Step] = []
    for task in phase.tasks(strategy, plan):
        if isinstance(task, Backfill):
            steps.append(DataStep(f"backfill {task.walk.label}, in batches"))
        elif isinstance(task, Probe):
            steps.append(DataStep(f"check: {task.what}"))
        else:
            try:
                steps += task.build(connection)
            except KeyError:
                # The builder reads a column the expand adds: there is none yet.
                notes.append(
                    f"{task.what}: built from the columns the expand adds, so it can be"
                    " shown once the migration is expanded (sqla-ids migrate plan then)"
                )
    if phase.check_after is not None:
        steps.append(DataStep(f"check: {phase.check_after.value}, every row"))
    return steps


def _shape(report: TablePreflight, plan: PkMigrationPlan) -> Shape:
    columns: dict[str, int] = {}
    for table, _column in plan.targets():
        columns[table] = columns.get(table, 0) + 1
    return Shape(
        key_bytes=8 if plan.key_kind == "integer" else 32,
        parent_rows=plan.row_count,
        tables=tuple(report.sizes),
        columns=columns,
        new_key_bytes=plan.new_key_bytes,
    )


def _estimate(
    report: TablePreflight, backend: MigrationBackend, server: ServerFacts, plan: PkMigrationPlan
) -> None:
    shape = _shape(report, plan)
    batch_time = plan.options.batch_time
    for mode in ("offline", "online"):
        if mode == "online" and report.online_refused:
            continue
        model = backend.preflight.cost_model(mode == "online", server)
        if model is not None:
            report.estimates[mode] = estimate(model, mode, shape, server, batch_time=batch_time)
    if report.recorded is not None:
        return
    offline_run = report.estimates.get("offline")
    online_run = report.estimates.get("online")
    if report.refused and report.mode == "offline":
        report.recommendation = "refused: nothing can run until the problems above are solved"
        return
    if online_run is None:
        chosen, why = (
            "offline",
            ("the online mode cannot migrate this table: " + "; ".join(report.online_refused)),
        )
    elif offline_run is not None and offline_run.lock_seconds.high <= OFFLINE_LOCK_SECONDS:
        chosen, why = (
            "offline",
            (
                f"writers wait at most about {_seconds(offline_run.lock_seconds.high)} offline,"
                " and the offline mode is simpler"
            ),
        )
    else:
        lock = offline_run.lock_seconds if offline_run else Range(0, 0)
        chosen, why = (
            "online",
            (
                f"offline, writers would wait {_seconds(lock.low)}-{_seconds(lock.high)}"
                f" ({offline_run.lock_what if offline_run else ''}); online, about"
                f" {_seconds(online_run.lock_seconds.high)} at most"
            ),
        )
    chosen_estimate = report.estimates[chosen]
    report.recommended_mode = chosen
    report.recommended_batch_size = chosen_estimate.batch_size
    report.recommendation = (
        f"{chosen}, batch_size={chosen_estimate.batch_size:,}"
        + (f", batch_time={batch_time}" if chosen == "online" else "")
        + f": {why}"
    )


# --- text -------------------------------------------------------------------------------


def _mb(value: float) -> str:
    mb = value / 1024 / 1024
    return f"{mb:,.1f} MB" if mb < 10 else f"{mb:,.0f} MB"


def _seconds(value: float) -> str:
    if value < 1:
        return f"{value * 1000:,.0f} ms"
    if value < 120:
        return f"{value:,.1f} s"
    return f"{value / 60:,.1f} min"


def _range(r: Range, unit: Any) -> str:
    return f"{unit(r.low)} to {unit(r.high)}"


def _server_lines(server: ServerFacts) -> list[str]:
    lines = [f"server: {server.label}"]
    if server.database_bytes is not None:
        lines.append(f"  database size: {_mb(server.database_bytes)}")
    free = _mb(server.free_disk_bytes) if server.free_disk_bytes is not None else "unknown"
    lines.append(f"  free disk: {free} ({server.free_disk_source})")
    for log in server.logs:
        state_ = "on" if log.enabled else "off"
        detail = ", ".join(x for x in (log.format, log.format_detail) if x)
        limit = (
            f"; {log.soft_limit_name} {_mb(log.soft_limit_bytes)}"
            if log.soft_limit_bytes is not None
            else ""
        )
        lines.append(
            f"  {log.name}: {state_}{f' ({detail})' if detail else ''}; {log.retained_why}{limit}"
        )
    if server.settings:
        lines.append("  settings: " + ", ".join(f"{s.name}={s.value}" for s in server.settings))
    for unknown in server.unknown:
        lines.append(f"  not known from SQL: {unknown}")
    return lines


def _estimate_lines(e: Estimate) -> list[str]:
    lines = [
        f"    time: {_range(e.seconds, _seconds)}",
        f"    extra disk: {_range(e.peak_disk, _mb)} at the peak,"
        f" {_range(e.kept_disk, _mb)} kept after (mapping table, old keys, UUID columns)",
    ]
    for log in e.logs:
        if not log.facts.enabled:
            lines.append(f"    {log.facts.name}: off")
            continue
        applies = f" ({log.applies})" if log.applies else ""
        lines.append(f"    {log.facts.name}: {_range(log.bytes, _mb)}{applies}")
    lines.append(f"    longest lock: {_range(e.lock_seconds, _seconds)} ({e.lock_what})")
    lines += [f"    WARNING: {w}" for w in e.warnings]
    return lines


def _table_lines(t: TablePreflight, statements: bool) -> str:
    lines = ["", f"table {t.table} ({t.mode})"]
    if t.recorded is not None:
        lines.append(f"  recorded migration: {t.recorded}")
    lines += [f"  {line}" if not line.startswith(" ") else line for line in t.changes()]
    for problem in t.refused:
        lines.append(f"  REFUSED: {problem}")
    if t.online_refused and t.mode == "offline":
        lines.append("  online mode not possible: " + "; ".join(t.online_refused))
    if t.sizes:
        lines.append("  tables:")
        for s in t.sizes:
            approx = "" if s.exact else " (approximate: shared by rows)"
            lines.append(
                f"    {s.table}: {s.rows:,} rows, {_mb(s.data_bytes)} rows data,"
                f" {_mb(s.index_bytes)} indexes{approx}"
            )
    for mode, e in sorted(t.estimates.items(), key=lambda item: item[0] != t.mode):
        lines.append(f"  estimate, {mode}{'' if mode == t.mode else ' (instead)'}:")
        lines += _estimate_lines(e)
    if t.recommendation:
        lines.append(f"  recommended: {t.recommendation}")
    for phase in t.phases if statements else []:
        lines.append(f"  phase {phase.phase} ({phase.runs}):")
        for step in phase.steps:
            text = str(step) if isinstance(step, DataStep) else f"{step.sql.strip()};"
            lines += [f"    {line.rstrip()}" for line in text.splitlines() if line.strip()]
        lines += [f"    -- not shown: {note}" for note in phase.notes]
    return "\n".join(lines)
