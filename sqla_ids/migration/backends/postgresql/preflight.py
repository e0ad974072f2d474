"""PostgreSQL: what a dry run reads (sizes, WAL settings, free disk) and shows
(the offline statements, the online swap and contract), and the cost model.

PostgreSQL reports no free disk space through SQL: where the server runs on
this machine and shows its ``data_directory`` to the user, the free space of
that file system is read here; otherwise the report says it is unknown. WAL
is recycled after each checkpoint unless archiving or a replication slot
keeps it: the report says which, and counts retained WAL against the disk.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from sqla_ids.dialects.sql import query_sql, quote_name
from sqla_ids.migration.backends.postgresql import offline, online
from sqla_ids.migration.core.estimate import CostModel, LockKind, LogModel, calibrated_on
from sqla_ids.migration.core.model import PkMigrationPlan
from sqla_ids.migration.core.sizing import (
    LogFacts,
    ServerFacts,
    Setting,
    Step,
    TableSize,
    count_rows,
    free_disk_here,
    setting_bytes,
)

_SETTINGS = (
    "wal_level",
    "max_wal_size",
    "min_wal_size",
    "wal_keep_size",
    "max_slot_wal_keep_size",
    "archive_mode",
    "full_page_writes",
    "wal_compression",
    "checkpoint_timeout",
    "maintenance_work_mem",
    "data_directory",
)

_MB = 1024 * 1024

_SOURCE = calibrated_on("PostgreSQL 15")

#: Fitted to benchmarks/preflight_calibration.py runs (docs/migration.md,
#: "Estimates: the model, and how well it does"): Chinook and the online
#: benchmark's tables at 20k/100k/300k parents on a shared 2-CPU machine.
OFFLINE = CostModel(
    # Refitted 2026-11-28 (third calibration): each table rewritten once since
    # issue 33 -- 17.5 s, 199 MB peak and 265 MB of WAL at 300k parents, where the
    # first fit's runs took 61 s, 377 MB and 976 MB.
    seconds_fixed=0.2,
    seconds_per_row=12e-6,
    mapping_row_bytes=110.0,
    # Each new relation (the mapping, its indexes) takes whole pages, whatever its rows.
    disk_allowance=0.25 * _MB,
    peak_per_byte=1.04,
    kept_per_byte=0.04,
    logs=(LogModel("WAL", per_byte=1.37, per_mapping_byte=1.37, allowance=4 * _MB),),
    lock=LockKind.WHOLE_RUN,
    lock_share=0.8,
    time_spread=(0.4, 2.0),
    size_spread=(0.7, 1.4),
    log_spread=(0.7, 1.8),
    source=_SOURCE,
)
ONLINE = dataclasses.replace(
    OFFLINE,
    seconds_fixed=0.5,
    seconds_per_row=34e-6,
    peak_per_byte=1.14,
    kept_per_byte=0.8,
    logs=(LogModel("WAL", per_byte=4.2, per_mapping_byte=4.2, allowance=4 * _MB),),
    lock=LockKind.SWAP,
    swap_seconds=(0.02, 0.2),
    rows_per_second=28_000.0,
)


def cost_model(online_mode: bool, server: ServerFacts) -> CostModel | None:
    """The coefficients of the offline or the online mode."""
    return ONLINE if online_mode else OFFLINE


def table_sizes(connection: Connection, tables: Sequence[str]) -> list[TableSize]:
    """Rows (counted) and bytes of each table, partitions included."""
    sizes = []
    for table in tables:
        data, index = connection.execute(
            sa.text(
                "SELECT COALESCE(SUM(pg_table_size(r)), 0), COALESCE(SUM(pg_indexes_size(r)), 0)"
                " FROM (SELECT to_regclass(:t) AS r"
                " UNION SELECT relid FROM pg_partition_tree(to_regclass(:t))) t"
            ),
            {"t": quote_name(connection.dialect, table)},
        ).one()
        sizes.append(TableSize(table, count_rows(connection, table), int(data), int(index)))
    return sizes


def server_facts(connection: Connection) -> ServerFacts:
    """WAL settings, archiving and replication slots, the database's size and
    (where the server runs here) the free disk."""
    rows = connection.execute(
        sa.text("SELECT name, setting, unit FROM pg_settings WHERE name IN :names").bindparams(
            sa.bindparam("names", expanding=True)
        ),
        {"names": list(_SETTINGS)},
    ).all()
    found = {name: (str(value), unit) for name, value, unit in rows}
    version = query_sql(connection, "SHOW server_version").scalar_one()
    database_bytes = query_sql(
        connection, "SELECT pg_database_size(current_database())"
    ).scalar_one()
    slots, slot_wal = query_sql(
        connection,
        "SELECT count(*), COALESCE(SUM(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)), 0)"
        " FROM pg_replication_slots",
    ).one()
    tablespaces = query_sql(
        connection,
        "SELECT spcname, pg_tablespace_location(oid) FROM pg_tablespace"
        " WHERE pg_tablespace_location(oid) <> '' ORDER BY 1",
    ).all()
    directory = found.get("data_directory", ("", None))[0]
    free, source = free_disk_here(connection, directory, "PG_VERSION")
    archive = found.get("archive_mode", ("off", None))[0] in ("on", "always")
    keep_limit = found.get("max_slot_wal_keep_size", ("-1", "MB"))
    why = []
    if archive:
        why.append("archive_mode is on: WAL stays until archived")
    if slots:
        limit = setting_bytes(*keep_limit)
        why.append(
            f"{slots} replication slot(s) keep WAL until their consumers read it"
            + (" (max_slot_wal_keep_size -1: no limit)" if limit is None else "")
            + f"; {int(slot_wal) / 1024 / 1024:,.0f} MB kept now"
        )
    max_wal = found.get("max_wal_size")
    wal = LogFacts(
        "WAL",
        enabled=True,
        retained=bool(why),
        retained_why="; ".join(why) or "recycled after each checkpoint (no archiving, no slots)",
        soft_limit_bytes=setting_bytes(*max_wal) if max_wal else None,
        soft_limit_name="max_wal_size",
    )
    settings = [
        Setting(
            name, value + (unit if unit and unit[0].isalpha() else f" x {unit}" if unit else "")
        )
        for name, (value, unit) in sorted(found.items())
    ]
    settings += [
        Setting(f"tablespace {name}", str(location), "not covered by the free disk shown")
        for name, location in tablespaces
    ]
    unknown = [
        "PostgreSQL reports no free disk space through SQL"
        + ("" if free is None else " (the figure is read on this machine)"),
        "temporary files of index builds go to temp_tablespaces (default: the data directory)",
    ]
    return ServerFacts(
        label=f"PostgreSQL {version}",
        database_bytes=int(database_bytes),
        free_disk_bytes=free,
        free_disk_source=source,
        logs=(wal,),
        settings=tuple(settings),
        unknown=tuple(unknown),
    )


def planned_offline(connection: Connection, plan: PkMigrationPlan) -> list[Step]:
    """The offline strategy's statements (:func:`offline.planned_upgrade`)."""
    return offline.planned_upgrade(connection, plan)


def planned_locked(
    connection: Connection, plan: PkMigrationPlan
) -> tuple[list[Step], list[Step]] | None:
    """The online swap (tables locked) and contract, built over the catalog they
    will read: the swap carries over the comments, grants and unique
    constraints of the application's own columns and indexes, which the expand
    and the prepare leave as they are -- so the catalog read now is the one
    the swap will read (unless someone changes them meanwhile), views included."""
    catalog = online.read_catalog(connection, plan, views=True)
    dialect = connection.dialect
    swap: list[Step] = [online.lock_statement(dialect, plan, catalog.views)]
    swap += online.swap_statements(dialect, plan, catalog)
    contract: list[Step] = list(online.contract_statements(dialect, plan, catalog))
    return swap, contract
