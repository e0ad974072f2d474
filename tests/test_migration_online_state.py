"""The state table must match the tables: an online migration recorded for a
table that was since dropped and created again is refused -- continuing it
and undoing it alike -- before anything changes, with the way out named."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from dbsnapshot import rows, schema
from online_app import shop_schema
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration.core.state import STATE_TABLE, steps

pytestmark = pytest.mark.slow


def _reset(engine: Engine) -> None:
    """What a test suite's database reset does: the application's tables
    dropped and created again, sqla_ids' own tables left as they are."""
    q = engine.dialect.identifier_preparer.quote
    with engine.begin() as conn:
        for table in ("item", "review", "shop s"):
            conn.exec_driver_sql(f"DROP TABLE {q(table)}")
    shop_schema(engine)


@pytest.mark.parametrize("phase", ["prepare", "swap"])
def test_a_recreated_table_is_not_taken_for_the_migrated_one(
    online_shop: Engine, phase: str
) -> None:
    shop = online_shop
    with shop.connect() as conn:
        migrate_pk_to_uuid7(
            conn,
            "shop s",
            PkMigrationOptions(online=True),
            phase=phase,  # type: ignore[arg-type]
        )
    _reset(shop)
    with shop.connect() as conn:
        before, data = schema(conn), rows(conn)
        conn.rollback()
    step = "online:prepared" if phase == "prepare" else "online:swapped"
    missing = "shop s.sqla_ids_tmp_" if phase == "prepare" else "shop s.id_old or "
    attempts = [lambda c: migrate_pk_to_uuid7(c, "shop s", PkMigrationOptions(online=True))]
    if phase == "swap":  # (before the swap an undo only drops what is there: nothing)
        attempts.append(lambda c: restore_pk_from_uuid7(c, "shop s"))
    for attempt in attempts:
        with shop.connect() as conn, pytest.raises(MigrationRefusedError) as refused:
            attempt(conn)
        message = str(refused.value)
        assert f"records its online migration at {step}" in message, message
        assert missing in message and f"from {STATE_TABLE} to start over" in message, message
        with shop.connect() as conn:
            assert schema(conn) == before and rows(conn) == data
            assert steps(conn)["shop s"] == step
    # The way out the message names, then the migration runs from the start.
    # (The mapping table of the earlier run goes too: a new run creates its own.)
    q = shop.dialect.identifier_preparer.quote
    with shop.begin() as conn:
        conn.execute(
            sa.text(f"DELETE FROM {q(STATE_TABLE)} WHERE table_name = :t"), {"t": "shop s"}
        )
        conn.exec_driver_sql(f"DROP TABLE {q('shop s_uuid7_map')}")
    with shop.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s", PkMigrationOptions(online=True))
        assert steps(conn)["shop s"] == "done"
