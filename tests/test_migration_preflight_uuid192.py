"""The preflight's disk and log estimates for a UUID192 target.

The estimate model's coefficients were fitted on UUIDv7 runs, whose new keys
each database stores its own way (16 bytes on PostgreSQL and MariaDB, 32 hex
digits on SQLite). A UUID192 key is stored raw: 16 bytes, or 24 with its
segment -- wider than a UUIDv7 on the servers, narrower on SQLite. The
estimates follow that width (in every row and one index entry per converted
value, and in the mapping table); a rollback journal keeps the old pages, so
its volume does not. docs/migration.md has the runs this was checked on.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, preflight
from sqla_ids.migration.core.estimate import CostModel, estimate
from sqla_ids.migration.core.sizing import LogFacts, ServerFacts, Shape, TableSize

MB = 1024 * 1024


def _models() -> dict[str, tuple[CostModel, ServerFacts]]:
    from sqla_ids.migration.backends.mysql import preflight as mariadb
    from sqla_ids.migration.backends.postgresql import preflight as postgresql
    from sqla_ids.migration.backends.sqlite import preflight as sqlite

    servers = {
        "postgresql": ServerFacts("PostgreSQL", logs=(LogFacts("WAL"),)),
        "mariadb": ServerFacts(
            "MariaDB", logs=(LogFacts("redo log"), LogFacts("binary log", format="ROW"))
        ),
        "sqlite": ServerFacts("SQLite", logs=(LogFacts("rollback journal"),)),
    }
    found = {}
    for name, module in (("postgresql", postgresql), ("mariadb", mariadb), ("sqlite", sqlite)):
        model = module.cost_model(False, servers[name])
        assert model is not None
        found[name] = (model.central(), servers[name])
    return found


@pytest.mark.parametrize("database", ["postgresql", "mariadb", "sqlite"])
def test_a_uuid192_key_changes_the_disk_and_log_estimates_by_its_width(database: str) -> None:
    model, server = _models()[database]
    tables = (TableSize("p", 100_000, 10 * MB, 2 * MB), TableSize("c", 200_000, 20 * MB, 4 * MB))
    columns = {"p": 1, "c": 1}
    uuid7 = estimate(model, "offline", Shape(8, 100_000, tables, columns), server)
    for raw in (16, 24):
        uuid192 = estimate(
            model, "offline", Shape(8, 100_000, tables, columns, new_key_bytes=raw), server
        )
        wider = raw - model.uuid7_bytes
        # Every converted value and one index entry each, and the mapping's new key
        # and its index.
        extra = 300_000 * wider * 2 + 100_000 * wider * 2
        assert uuid192.peak_disk.high - uuid7.peak_disk.high == pytest.approx(extra)
        assert uuid192.kept_disk.high - uuid7.kept_disk.high == pytest.approx(extra)
        assert uuid192.seconds == uuid7.seconds
        for old, new in zip(uuid7.logs, uuid192.logs, strict=True):
            line = next(line for line in model.logs if line.name == old.facts.name)
            change = new.bytes.high - old.bytes.high
            if line.new_values:
                written = 300_000 * wider * 2 * line.per_byte
                mapped = 100_000 * wider * 2 * line.per_mapping_byte
                assert change == pytest.approx(written + mapped), line.name
            else:  # the old pages: the same tables, only the mapping differs
                assert change == pytest.approx(100_000 * wider * 2 * line.per_mapping_byte)
    if database == "sqlite":  # 24 raw bytes against 32 hex digits
        assert uuid192.peak_disk.high < uuid7.peak_disk.high
    else:
        assert uuid192.peak_disk.high > uuid7.peak_disk.high


def test_the_preflight_reads_the_width_from_the_options(sqlite_engine: Engine) -> None:
    """Through the library: a segment makes 24-byte keys, none 16; UUIDv7 the
    database's own (the plan says which)."""
    metadata = sa.MetaData()
    parent = sa.Table("pf192 parent", metadata, sa.Column("id", sa.Integer, primary_key=True))
    sa.Table(
        "pf192 child",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("parent_id", sa.ForeignKey(parent.c.id)),
    )
    metadata.create_all(sqlite_engine)
    try:
        with sqlite_engine.begin() as conn:
            conn.execute(parent.insert(), [{"id": n} for n in range(1, 501)])
        seen = {}
        for label, options in (
            ("uuid7", PkMigrationOptions()),
            ("none", PkMigrationOptions(target="uuid192")),
            ("segment", PkMigrationOptions(target="uuid192", segment_sql="7")),
        ):
            with sqlite_engine.connect() as conn:
                report = preflight(conn, "pf192 parent", options)
            [entry] = report.tables
            assert entry.plan is not None and entry.estimate is not None
            seen[label] = (entry.plan.new_key_bytes, entry.estimate.peak_disk.high)
        assert [seen[k][0] for k in ("uuid7", "none", "segment")] == [None, 16, 24]
        # On SQLite both raw widths are narrower than 32 hex digits.
        assert seen["none"][1] < seen["segment"][1] < seen["uuid7"][1]
    finally:
        metadata.drop_all(sqlite_engine)
