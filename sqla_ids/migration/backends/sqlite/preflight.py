"""SQLite: what a dry run reads (sizes, the journal, free disk) and shows (the
rebuild's statements), and the cost model.

The database is a local file, so its free disk is known exactly. Table sizes
come from the ``dbstat`` table where SQLite was built with it (Python's
usually is); otherwise each table gets the file's size shared by rows, and
the report says so. The journal (rollback journal, or the WAL file in
``journal_mode=wal``) holds the pages the rebuild changes until the commit.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql
from sqla_ids.migration.backends.sqlite import offline
from sqla_ids.migration.core.estimate import CostModel, LockKind, LogModel, calibrated_on
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.sizing import (
    LogFacts,
    ServerFacts,
    Setting,
    Step,
    TableSize,
    count_rows,
)

_SOURCE = calibrated_on("SQLite 3.40")

#: Fitted to benchmarks/preflight_calibration.py runs (docs/migration.md,
#: "Estimates: the model, and how well it does"): Chinook and the online
#: benchmark's tables at 20k/100k/300k parents on a shared 2-CPU machine.
OFFLINE = CostModel(
    seconds_fixed=0.03,
    seconds_per_row=5.5e-6,
    mapping_row_bytes=100.0,
    disk_allowance=0.0,
    peak_per_byte=1.58,
    kept_per_byte=1.58,
    logs=(
        LogModel("rollback journal", per_byte=1.0, new_values=False),
        LogModel("WAL file", per_byte=2.6, per_mapping_byte=1.0, applies="not calibrated"),
    ),
    lock=LockKind.WHOLE_RUN,
    uuid7_bytes=32,  # SQLAlchemy's Uuid on SQLite: CHAR(32), hex
    time_spread=(0.5, 2.5),
    size_spread=(0.7, 1.4),
    log_spread=(0.7, 1.4),
    source=_SOURCE,
)


def cost_model(online_mode: bool, server: ServerFacts) -> CostModel | None:
    """The offline mode's coefficients (there is no online mode on SQLite)."""
    return None if online_mode else OFFLINE


def _pragma(connection: Connection, name: str) -> str:
    # Names are this module's constants, never input.
    return str(query_sql(connection, f"PRAGMA {name}").scalar())


def table_sizes(connection: Connection, tables: Sequence[str]) -> list[TableSize]:
    """Rows (counted) and bytes from ``dbstat``, or the file shared by rows."""
    rows = {table: count_rows(connection, table) for table in tables}
    try:
        pages = query_sql(
            connection,
            "SELECT m.tbl_name, m.type = 'index', SUM(d.pgsize) FROM dbstat d"
            " JOIN sqlite_master m ON m.name = d.name GROUP BY m.tbl_name, m.type = 'index'",
        ).all()
    except sa.exc.OperationalError:  # SQLite built without dbstat
        file_bytes = int(_pragma(connection, "page_count")) * int(_pragma(connection, "page_size"))
        everything = sum(
            count_rows(connection, t) for t in sa.inspect(connection).get_table_names()
        )
        return [
            TableSize(t, n, file_bytes * n // max(everything, 1), 0, exact=False)
            for t, n in rows.items()
        ]
    data: dict[str, int] = {}
    index: dict[str, int] = {}
    for table, is_index, size in pages:
        (index if is_index else data)[str(table)] = int(size)
    return [TableSize(t, n, data.get(t, 0), index.get(t, 0)) for t, n in rows.items()]


def _file(connection: Connection) -> str:
    for _seq, name, path in query_sql(connection, "PRAGMA database_list").all():
        if name == "main":
            return str(path or "")
    return ""  # pragma: no cover - SQLite always lists main


def server_facts(connection: Connection) -> ServerFacts:
    """The file's size and free disk, the journal mode."""
    version = query_sql(connection, "SELECT sqlite_version()").scalar_one()
    page_size = int(_pragma(connection, "page_size"))
    pages = int(_pragma(connection, "page_count"))
    free_pages = int(_pragma(connection, "freelist_count"))
    journal = _pragma(connection, "journal_mode").lower()
    path = _file(connection)
    if path:
        free: int | None = shutil.disk_usage(Path(path).parent).free
        source = f"file system of {path}"
    else:
        free, source = None, "an in-memory database: no disk"
    log = LogFacts(
        "WAL file" if journal == "wal" else "rollback journal",
        enabled=journal != "off",
        retained=True,
        retained_why="on disk next to the database until the commit (and the checkpoint)",
    )
    return ServerFacts(
        label=f"SQLite {version}",
        database_bytes=page_size * pages,
        free_disk_bytes=free,
        free_disk_source=source,
        logs=(log,),
        settings=(
            Setting("journal_mode", journal),
            Setting("page_size", str(page_size)),
            Setting("freelist_count", str(free_pages), "free pages the rebuild reuses first"),
        ),
    )


def planned_offline(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """The rebuild's statements (:func:`offline.planned_upgrade`)."""
    return offline.planned_upgrade(connection, plan)


def planned_locked(
    connection: Connection, plan: PkMigrationPlan
) -> tuple[list[Step], list[Step]] | None:
    """No online mode on SQLite."""
    return None
