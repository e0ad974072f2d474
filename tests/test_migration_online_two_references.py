"""A child referencing the migrated table twice (Sakila's ``film.language_id`` and
``original_language_id``; a transfer from one shop to another), online.

MariaDB exchanges a child's columns one statement per reference; the first
one's statement also swapped the second one's indexes, and coming down it
dropped an index the second column's foreign key still needed ("Cannot drop
index ...: needed in a foreign key constraint"), so the undo after the swap
failed. Checked on both databases with an online undo from after the swap
and a full run: the schema (column order, indexes, constraints) comes back
exactly, and every transfer keeps both its shops.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from dbsnapshot import relations, structure
from online_app import quoted
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7

# Batches of 500: nothing writes during these backfills (a few per table).
ONLINE = PkMigrationOptions(online=True, batch_size=500)


def _transfers(engine: Engine) -> None:
    """``transfer "x"`` from one shop to another, each reference indexed, one
    nullable and ``SET NULL``, a composite index over both."""
    integer = "bigint" if engine.dialect.name == "postgresql" else "BIGINT"
    q = engine.dialect.identifier_preparer.quote
    t, to_shop, shop = q('transfer "x"'), q("to shop"), quoted(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {t} (id INT PRIMARY KEY, from_shop {integer} NOT NULL,"
            f" {to_shop} {integer}, note VARCHAR(20),"
            f" CONSTRAINT tr_from FOREIGN KEY (from_shop) REFERENCES {shop} (id),"
            f" CONSTRAINT tr_to FOREIGN KEY ({to_shop}) REFERENCES {shop} (id)"
            " ON DELETE SET NULL)"
        )
        conn.exec_driver_sql(f"CREATE INDEX tr_from_ix ON {t} (from_shop)")
        conn.exec_driver_sql(f"CREATE INDEX tr_to_ix ON {t} ({to_shop})")
        conn.exec_driver_sql(f"CREATE INDEX tr_both ON {t} (from_shop, {to_shop})")
        conn.execute(
            sa.text(f"INSERT INTO {t} (id, from_shop, {to_shop}, note) VALUES (:i, :f, :t, :n)"),
            [
                {
                    "i": n,
                    "f": 1 + n % 300,
                    "t": None if n % 7 == 0 else 1 + n * 13 % 300,
                    "n": f"t{n}",
                }
                for n in range(1, 121)
            ],
        )


def _fingerprint(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return structure(conn)


@pytest.mark.slow_on("mariadb")  # quick loop: MariaDB with a writer is test_migration_online
@pytest.mark.parametrize(
    "way", ["undo after the swap", pytest.param("contract", marks=pytest.mark.slow)]
)
def test_a_child_referencing_the_parent_twice(online_shop: Engine, way: str) -> None:
    engine = online_shop
    _transfers(engine)
    before = _fingerprint(engine)
    with engine.connect() as conn:
        related = relations(conn)
    with engine.connect() as conn:
        plan = migrate_pk_to_uuid7(conn, "shop s", ONLINE, phase="swap")
    assert {(r.table, r.column) for r in plan.references} >= {
        ('transfer "x"', "from_shop"),
        ('transfer "x"', "to shop"),
    }
    with engine.connect() as conn:
        if way == "contract":
            migrate_pk_to_uuid7(conn, "shop s", ONLINE, phase="contract")
        else:
            restore_pk_from_uuid7(conn, "shop s")
    with engine.connect() as conn:
        assert relations(conn) == related
    if way != "contract":
        assert _fingerprint(engine) == before
