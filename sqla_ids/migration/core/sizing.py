"""What a dry run reads and shows: table sizes, the server's disk and log
settings, and the steps of each phase (statements and data steps).

Plain data, filled by each database's backend
(``sqla_ids/migration/backends/<database>/preflight.py``) and read by the
estimate model (:mod:`sqla_ids.migration.core.estimate`) and the preflight
report (:mod:`sqla_ids.migration.dry_run`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.sql import Statement

__all__ = [
    "DataStep",
    "LogFacts",
    "PhaseSteps",
    "ServerFacts",
    "Setting",
    "Shape",
    "Statement",
    "Step",
    "TableSize",
    "count_rows",
    "fill_steps",
    "free_disk_here",
    "setting_bytes",
]


@dataclass(frozen=True)
class TableSize:
    """One table: its rows (counted) and its bytes on disk, as the server reports them."""

    table: str
    rows: int
    data_bytes: int
    """The rows (PostgreSQL heap and TOAST, InnoDB clustered index, SQLite table b-tree)."""
    index_bytes: int
    """Every secondary index (and PostgreSQL's primary key index)."""
    exact: bool = True
    """``False`` where the server cannot say and the bytes are a share of the file
    (SQLite without ``dbstat``)."""

    @property
    def total_bytes(self) -> int:
        """Rows and indexes together."""
        return self.data_bytes + self.index_bytes


@dataclass(frozen=True)
class Setting:
    """A server setting shown next to the estimates (value as the server prints it)."""

    name: str
    value: str
    note: str = ""


@dataclass(frozen=True)
class LogFacts:
    """One log the migration writes to, and what the server says about it."""

    name: str
    """``WAL``, ``redo log``, ``binary log``, ``rollback journal``, ``WAL file``."""
    enabled: bool = True
    retained: bool = False
    """Whether what the run writes stays on disk after it (archiving, replication
    slots, binary logs kept until they expire): it then counts against the free disk."""
    retained_why: str = ""
    soft_limit_bytes: int | None = None
    """A size past which the server works harder (PostgreSQL ``max_wal_size``
    forces checkpoints; InnoDB's redo log size forces page flushing)."""
    soft_limit_name: str = ""
    format: str = ""
    """How it logs a change, where there is a choice (MariaDB ``binlog_format``)."""
    format_detail: str = ""


@dataclass(frozen=True)
class ServerFacts:
    """The server as a dry run can see it from SQL, and what it cannot see."""

    label: str
    """Database and version (``PostgreSQL 15.4``)."""
    database_bytes: int | None = None
    free_disk_bytes: int | None = None
    free_disk_source: str = ""
    """Where :attr:`free_disk_bytes` comes from, or why there is none."""
    logs: tuple[LogFacts, ...] = ()
    settings: tuple[Setting, ...] = ()
    unknown: tuple[str, ...] = ()
    """What cannot be known from SQL, said plainly."""
    buffer_pool_bytes: int | None = None
    """MariaDB: ``innodb_buffer_pool_size`` (the online backfill's advice)."""


@dataclass(frozen=True)
class DataStep:
    """Work on rows (not DDL) a phase does: fills, backfills, copies, checks."""

    what: str
    rows: int | None = None
    sql: str = ""
    """A representative statement, when there is one to show (one batch's)."""

    def __str__(self) -> str:
        rows = f" ({self.rows:,} rows)" if self.rows is not None else ""
        return f"-- {self.what}{rows}"


Step = Statement | DataStep
"""One item of a phase, in the order it runs."""


def fill_steps(plan: PkMigrationPlan, how: str) -> list[DataStep]:
    """The offline fills of the temporary columns through the mapping, and their check."""
    fills = [
        DataStep(
            f"fill {table}.{plan.temp_column(table, column)} with the new value of {column}"
            f" through the mapping, in key ranges of batch_size{how}"
        )
        for table, column in plan.targets()
    ]
    return [*fills, DataStep("check every filled value against the mapping")]


@dataclass(frozen=True)
class PhaseSteps:
    """What one phase runs, in order: the DDL exactly as it will run, and the
    data steps between the statements."""

    phase: str
    """``offline``; online ``expand``, ``backfill``, ``prepare``, ``swap``, ``contract``."""
    runs: str
    """How the runner runs it (one transaction, autocommit, tables locked...)."""
    steps: tuple[Step, ...] = ()
    notes: tuple[str, ...] = ()
    """Statements that cannot be shown before the run, and why."""

    @property
    def statements(self) -> list[Statement]:
        """The phase's statements (its DDL), without the data steps."""
        return [s for s in self.steps if isinstance(s, Statement)]


@dataclass(frozen=True)
class Shape:
    """The work the estimate model needs to know about one migration."""

    key_bytes: int
    """Bytes of one old key (8 for an integer key)."""
    parent_rows: int
    tables: tuple[TableSize, ...]
    """The affected tables (the migrated one first)."""
    columns: dict[str, int] = field(default_factory=dict)
    """Table -> how many of its columns the migration converts."""
    new_key_bytes: int | None = None
    """Bytes of one new key stored raw (UUID192: 16, 24 with a segment);
    ``None``: a UUIDv7, stored as the database stores them (the width the
    estimate model's coefficients were fitted on)."""

    @property
    def rows(self) -> int:
        """Rows rewritten: every row of every affected table once per converted column."""
        return sum(t.rows * max(self.columns.get(t.table, 1), 1) for t in self.tables)

    @property
    def bytes(self) -> int:
        """Bytes of the affected tables (rows and indexes)."""
        return sum(t.total_bytes for t in self.tables)

    @property
    def largest_bytes(self) -> int:
        """Bytes of the largest affected table."""
        return max((t.total_bytes for t in self.tables), default=0)


_LOCAL_HOSTS = ("", "localhost", "127.0.0.1", "::1")


def free_disk_here(
    connection: Connection, directory: str | None, marker: str
) -> tuple[int | None, str]:
    """Free bytes of the file system holding the server's ``directory``, read on
    this machine when the server runs here (``marker``, a file only that
    server's directory has, is there), with where the number comes from; or
    ``None`` and why not. Servers report no free disk space through SQL."""
    host = connection.engine.url.host or ""
    if not directory:
        return None, "the server does not show its data directory to this user"
    if not (host in _LOCAL_HOSTS or host.startswith("/")):
        return None, f"the server runs on {host}: check the free space of {directory} there"
    path = Path(directory)
    try:
        if not (path / marker).exists():
            return None, f"{directory} is not on this machine (a container?): check it there"
        return shutil.disk_usage(path).free, f"file system of {directory}, read on this machine"
    except OSError as error:
        return None, f"cannot read {directory} here ({error.strerror})"


def count_rows(connection: Connection, table: str) -> int:
    """``SELECT count(*)`` of ``table`` (exact: the plan counts the same way)."""
    return int(
        connection.execute(sa.select(sa.func.count()).select_from(sa.table(table))).scalar_one()
    )


_UNITS = {"B": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_UNIT = re.compile(r"(?P<times>[0-9]*)(?P<unit>B|kB|MB|GB|TB)")


def setting_bytes(value: str, unit: str | None) -> int | None:
    """A size setting in bytes from its value and unit as PostgreSQL's ``pg_settings``
    shows them (``1024`` and ``MB``, ``16`` and ``8kB``); ``None`` for ``-1`` (no
    limit) or a unit that is not a size.

    >>> setting_bytes("1024", "MB"), setting_bytes("16", "8kB"), setting_bytes("-1", "MB")
    (1073741824, 131072, None)
    """
    number = int(value)
    match = _UNIT.fullmatch(unit or "B")
    if number < 0 or match is None:
        return None
    return number * int(match["times"] or 1) * _UNITS[match["unit"]]
