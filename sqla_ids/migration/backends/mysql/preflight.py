"""MariaDB: what a dry run reads (sizes, redo and binary log settings, free
disk) and shows (the offline statements, the online swap and contract), and
the cost model.

MariaDB reports free disk space through SQL only with its ``DISKS`` plugin
(``information_schema.DISKS``, not installed by default); without it, where
the server runs on this machine, the free space of its ``datadir`` is read
here. The redo log is a fixed-size ring (no disk growth); binary logs stay
until they expire, so their volume counts against the disk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql
from sqla_ids.migration.backends.mysql import offline, online
from sqla_ids.migration.core.estimate import CostModel, LockKind, LogModel, calibrated_on
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.names import Sides, object_name, rebuilt, references
from sqla_ids.migration.core.sizing import (
    LogFacts,
    ServerFacts,
    Setting,
    Step,
    TableSize,
    count_rows,
    free_disk_here,
)

_SETTINGS = (
    "LOG_BIN",
    "BINLOG_FORMAT",
    "BINLOG_ROW_IMAGE",
    "MAX_BINLOG_SIZE",
    "BINLOG_EXPIRE_LOGS_SECONDS",
    "EXPIRE_LOGS_DAYS",
    "INNODB_LOG_FILE_SIZE",
    "INNODB_BUFFER_POOL_SIZE",
    "INNODB_ONLINE_ALTER_LOG_MAX_SIZE",
    "INNODB_FILE_PER_TABLE",
    "TMPDIR",
    "INNODB_TMPDIR",
    "DATADIR",
)

_MB = 1024 * 1024
_REDO = LogModel("redo log", per_byte=6.4, per_mapping_byte=6.4, allowance=4 * _MB)
#: The binary log by format: row images of every changed row (``ROW``), or the
#: statements (``STATEMENT``; ``MIXED`` logs statements unless unsafe).
_BINLOG = {
    "ROW": LogModel(
        "binary log", per_byte=0.65, per_mapping_byte=0.65, applies="binlog_format=ROW"
    ),
    # Not calibrated (the runs had binlog_format=ROW): statements are small, but
    # MIXED logs the online backfill's unsafe statements (RANDOM_BYTES) as rows.
    "MIXED": LogModel("binary log", per_byte=0.5, applies="binlog_format=MIXED, not calibrated"),
    "STATEMENT": LogModel(
        "binary log", per_byte=0.05, applies="binlog_format=STATEMENT, not calibrated"
    ),
}

_SOURCE = calibrated_on("MariaDB 10.11")

#: Fitted to benchmarks/preflight_calibration.py runs (docs/migration.md,
#: "Estimates: the model, and how well it does"): Chinook and the online
#: benchmark's tables at 20k/100k/300k parents on a shared 2-CPU machine.
OFFLINE = CostModel(
    # Refitted 2026-11-28 (third calibration): the offline mode's rebuilds since
    # issue 33 -- 22 s and a longest statement of 1.1 s at 300k parents, where the
    # first fit's runs took 76 s and 8.1 s.
    seconds_fixed=0.3,
    seconds_per_row=15e-6,
    mapping_row_bytes=90.0,
    disk_allowance=25 * _MB,
    peak_per_byte=1.07,
    kept_per_byte=0.12,
    logs=(_REDO,),
    lock=LockKind.LARGEST_REBUILD,
    lock_fixed=0.04,
    lock_per_byte=0.019 / _MB,
    time_spread=(0.4, 3.0),
    size_spread=(0.7, 1.4),
    log_spread=(0.6, 1.8),
    source=_SOURCE,
)
ONLINE = dataclasses.replace(
    OFFLINE,
    seconds_per_row=30e-6,
    peak_per_byte=1.5,
    kept_per_byte=0.85,
    logs=(dataclasses.replace(_REDO, per_byte=6.5, per_mapping_byte=6.5),),
    lock=LockKind.SWAP,
    swap_seconds=(0.03, 1.0),
    rows_per_second=40_000.0,
)


def _variables(connection: Connection) -> dict[str, str]:
    rows = connection.execute(
        sa.text(
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES"
            " WHERE VARIABLE_NAME IN :names"
        ).bindparams(sa.bindparam("names", expanding=True)),
        {"names": list(_SETTINGS)},
    ).all()
    return {str(name).upper(): str(value) for name, value in rows}


def cost_model(online_mode: bool, server: ServerFacts) -> CostModel | None:
    """The coefficients of the offline or the online mode, the binary log's by
    the server's ``binlog_format``."""
    base = ONLINE if online_mode else OFFLINE
    binlog = next((log for log in server.logs if log.name == "binary log"), None)
    if binlog is None:
        return base
    line = _BINLOG.get(binlog.format, _BINLOG["ROW"])
    if online_mode and line is _BINLOG["ROW"]:
        line = dataclasses.replace(line, per_byte=0.72, per_mapping_byte=0.72)
    return dataclasses.replace(base, logs=(*base.logs, line))


def table_sizes(connection: Connection, tables: Sequence[str]) -> list[TableSize]:
    """Rows (counted) and bytes (InnoDB's statistics: they may lag recent writes)."""
    sizes = []
    for table in tables:
        data, index = connection.execute(
            sa.text(
                "SELECT COALESCE(DATA_LENGTH, 0), COALESCE(INDEX_LENGTH, 0)"
                " FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = :t"
            ),
            {"t": table},
        ).one()
        sizes.append(TableSize(table, count_rows(connection, table), int(data), int(index)))
    return sizes


def _free_disk(connection: Connection, datadir: str) -> tuple[int | None, str]:
    """From ``information_schema.DISKS`` where the plugin is installed, else here."""
    plugin = query_sql(
        connection,
        "SELECT COUNT(*) FROM information_schema.PLUGINS"
        " WHERE PLUGIN_NAME = 'DISKS' AND PLUGIN_STATUS = 'ACTIVE'",
    ).scalar_one()
    if plugin:
        disks = query_sql(connection, "SELECT Path, Available FROM information_schema.DISKS").all()
        best = max(
            (d for d in disks if datadir.startswith(str(d[0]))),
            key=lambda d: len(str(d[0])),
            default=None,
        )
        if best is not None:
            return int(best[1]) * 1024, f"information_schema.DISKS ({best[0]})"
    free, source = free_disk_here(connection, datadir, "ibdata1")
    if free is None:
        source += "; MariaDB reports free disk only with its DISKS plugin (INSTALL SONAME 'disks')"
    return free, source


def server_facts(connection: Connection) -> ServerFacts:
    """Redo and binary log settings, the buffer pool, the schema's size and the free disk."""
    found = _variables(connection)
    version = query_sql(connection, "SELECT VERSION()").scalar_one()
    database_bytes = query_sql(
        connection,
        "SELECT COALESCE(SUM(DATA_LENGTH + INDEX_LENGTH + DATA_FREE), 0)"
        " FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()",
    ).scalar_one()
    datadir = found.get("DATADIR", "")
    free, source = _free_disk(connection, datadir)
    redo = LogFacts(
        "redo log",
        retained=False,
        retained_why="a fixed-size ring: no disk growth",
        soft_limit_bytes=int(found.get("INNODB_LOG_FILE_SIZE", "0")) or None,
        soft_limit_name="innodb_log_file_size",
    )
    logs = [redo]
    if found.get("LOG_BIN", "OFF").upper() == "ON":
        logs.append(
            LogFacts(
                "binary log",
                retained=True,
                retained_why="kept until it expires or is purged",
                format=f"{found.get('BINLOG_FORMAT', 'MIXED').upper()}",
                format_detail=f"{found.get('BINLOG_ROW_IMAGE', 'FULL')} row image",
            )
        )
    else:
        logs.append(LogFacts("binary log", enabled=False, retained_why="log_bin is OFF"))
    settings = [Setting(name.lower(), value) for name, value in sorted(found.items())]
    pool = found.get("INNODB_BUFFER_POOL_SIZE")
    return ServerFacts(
        label=f"MariaDB {version}",
        database_bytes=int(database_bytes),
        free_disk_bytes=free,
        free_disk_source=source,
        logs=tuple(logs),
        settings=tuple(settings),
        unknown=(
            "table sizes are InnoDB's statistics, which may lag recent writes",
            "index builds sort in innodb_tmpdir (or tmpdir), which may be another disk",
        ),
        buffer_pool_bytes=int(pool) if pool else None,
    )


def planned_offline(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """The offline strategy's statements (:func:`offline.planned_upgrade`)."""
    return offline.planned_upgrade(connection, plan)


def prepared_catalog(connection: Connection, plan: PkMigrationPlan) -> online.Catalog:
    """The catalog as the swap will read it after the expand, the backfill and
    the prepare, simulated from the one read now.

    The expand's own builder applies its columns, mapping and triggers to the
    catalog; the backfill and the prepare then leave: the primary key on the
    new key and a unique index named after the old key column on it, the
    indexes built over the new columns, our foreign keys, and the new
    reference columns ``NOT NULL`` where the old ones are (the old ones
    nullable unless the key is ``AUTO_INCREMENT`` and the children's old
    columns go at the contract, as ``_old_values_stay_not_null`` in
    ``online.py`` decides).
    """
    catalog = online.read_catalog(connection, plan)
    online.expand_statements(connection, plan, catalog)
    up = Sides(plan, up=True)
    parent = catalog.indexes.setdefault(plan.table, {})
    parent.pop("PRIMARY", None)
    parent["PRIMARY"] = [up.key_new]
    parent[up.key_parked] = [plan.column]
    if plan.default.kind != "auto_increment":
        catalog.columns[plan.table][plan.column] = True
    for number, dep in rebuilt(plan):
        columns = [up.new_column(dep.table, c) for c in dep.columns]
        if dep.kind == "primary":  # a link table's key moves (online._key_move)
            catalog.indexes[dep.table]["PRIMARY"] = columns
            catalog.indexes[dep.table][object_name(plan, "ixo", number)] = dep.columns
            continue
        catalog.indexes.setdefault(dep.table, {})[object_name(plan, "ix", number)] = columns
    stay_not_null = plan.default.kind == "auto_increment" and not plan.keep_child_old_columns
    for n, ref in references(plan):
        if ref.constraint:
            catalog.foreign_keys.setdefault(ref.table, set()).add(object_name(plan, "fk", n))
        if not ref.nullable:
            catalog.columns[ref.table][up.child_new(n, ref)] = False
            if not stay_not_null:
                catalog.columns[ref.table][ref.column] = True
    return catalog


def planned_locked(
    connection: Connection, plan: PkMigrationPlan
) -> tuple[list[Step], list[Step]] | None:
    """The online swap and contract (each under ``LOCK TABLES``), built over the
    catalog as it will be after the prepare (:func:`prepared_catalog`); the
    contract's over the catalog as the swap leaves it."""
    dialect = connection.dialect
    strategy = online.MariaDBOnline()
    catalog = prepared_catalog(connection, plan)
    lock = online.lock_statements(dialect, plan, catalog)
    unlock = strategy.unlock(connection)
    swap: list[Step] = [*lock, *online.swap_statements(dialect, plan, catalog), *unlock]
    lock = online.lock_statements(dialect, plan, catalog)
    contract: list[Step] = [*lock, *online.contract_statements(dialect, plan, catalog), *unlock]
    return swap, contract
