"""The online deploy sequence as Alembic revisions (docs/migration.md, "The deploy
sequence"): A prepares, B swaps, C contracts, each with ``op.restore_pk_from_uuid7``
as its downgrade. ``alembic downgrade`` from any of them back to the base must
give the original tables back: the latest revision's downgrade undoes the
whole migration, and the earlier ones then find nothing left to undo."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from dbsnapshot import relations, schema
from online_app import alembic_project
from sqlalchemy.engine import Engine

from sqla_ids.migration.core.state import steps

PHASES = {"0001": "prepare", "0002": "swap", "0003": "contract"}


OPERATIONS = {
    "one": (
        'op.migrate_pk_to_uuid7("shop s", online=True, batch_size=97, phase="{phase}")',
        'op.restore_pk_from_uuid7("shop s")',
    ),
    "uuid192": (
        'op.migrate_pk_to_uuid7("shop s", online=True, batch_size=97, phase="{phase}",'
        ' target="uuid192", segment_sql="LENGTH(name)")',
        'op.restore_pk_from_uuid7("shop s")',
    ),
    "many": (
        'op.migrate_pks_to_uuid7([("shop s", PkMigrationOptions(online=True, batch_size=97))],'
        ' phase="{phase}")',
        'op.restore_pks_from_uuid7([("shop s", PkMigrationOptions(online=True))])',
    ),
}


@pytest.fixture(params=list(OPERATIONS))
def project(
    online_shop: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> Config:
    """``sqla-ids alembic init`` and the three revisions of the online migration,
    written with ``op.migrate_pk_to_uuid7`` or ``op.migrate_pks_to_uuid7``."""
    up, down = OPERATIONS[request.param]
    monkeypatch.chdir(tmp_path)
    return alembic_project(
        online_shop, tmp_path, [(up.format(phase=p), down) for p in PHASES.values()]
    )


def _fingerprint(engine: Engine) -> tuple[list[str], object, object]:
    """Schema, rows (by column name) and relationships of the application's tables.
    Without the columns' positions where the snapshot has them (PostgreSQL's
    ``column:`` lines; MariaDB's list columns by name): on PostgreSQL a column
    the online swap replaced stays last (docs/migration.md: PostgreSQL cannot
    reorder columns), and the offline restore after the contract keeps it there."""
    with engine.connect() as conn:
        mine = sorted(
            re.sub(r"^(column: \(\"'[^']*'\"), '\d+',", r"\1,", line)
            for line in schema(conn)
            if "alembic_version" not in line
        )
        data = {}
        for table in ("shop s", "item", "review"):
            names = sorted(c["name"] for c in sa.inspect(conn).get_columns(table))
            query = sa.select(*map(sa.column, names)).select_from(sa.table(table))
            data[table] = sorted(map(repr, conn.execute(query)))
        return mine, data, relations(conn)


def _key_type(engine: Engine) -> str:
    columns = sa.inspect(engine).get_columns("item")
    return str(next(c["type"] for c in columns if c["name"] == "shop_id")).lower()


@pytest.mark.slow
@pytest.mark.parametrize("upto", list(PHASES))
def test_each_revision_then_downgrade_to_base(
    online_shop: Engine, project: Config, upto: str
) -> None:
    shop = online_shop
    before = _fingerprint(shop)
    command.upgrade(project, upto)
    with shop.connect() as conn:
        step = steps(conn)["shop s"]
    assert step == {"0001": "online:prepared", "0002": "online:swapped", "0003": "done"}[upto]
    assert ("bigint" not in _key_type(shop)) == (upto != "0001")  # uuid, bytea, varbinary
    command.downgrade(project, "base")
    with shop.connect() as conn:
        assert "shop s" not in steps(conn)
    after = _fingerprint(shop)
    changed = sorted(set(after[0]) ^ set(before[0]))
    assert changed == [], "\n".join(changed)
    assert after[0] == before[0]
    assert after[1:] == before[1:]
    assert "bigint" in _key_type(shop)


def test_the_phase_of_several_tables_is_rendered_and_reversed() -> None:
    from alembic.autogenerate import render_python_code
    from alembic.operations import ops

    from sqla_ids.alembic.migrate_pk import MigratePksToUUID7Op
    from sqla_ids.migration import PkMigrationOptions

    op = MigratePksToUUID7Op([("orders", PkMigrationOptions(online=True))], phase="swap")
    code = render_python_code(ops.UpgradeOps([op]))
    assert (
        "op.migrate_pks_to_uuid7([('orders', sqla_ids.migration.PkMigrationOptions(online=True))],"
        " phase='swap')"
    ) in code, code
    back = op.reverse()
    assert "phase='swap'" in render_python_code(ops.UpgradeOps([back]))
    assert back.reverse().phase == "swap"


def test_several_tables_in_one_mode_or_refused_first(sqlite_engine: Engine) -> None:
    from sqla_ids.migration import PkMigrationOptions, migrate_pks_to_uuid7

    online = PkMigrationOptions(online=True)
    with sqlite_engine.connect() as conn:
        with pytest.raises(ValueError, match=r"phase='swap' needs online=True .*\(b offline\)"):
            migrate_pks_to_uuid7(conn, [("a", online), "b"], phase="swap")
        with pytest.raises(ValueError, match=r"separate calls.*offline here: b"):
            migrate_pks_to_uuid7(conn, [("a", online), "b"])
