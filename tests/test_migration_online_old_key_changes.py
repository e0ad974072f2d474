"""An old key changed between the swap and the contract (PostgreSQL, MariaDB).

After the swap the foreign keys are on the UUID columns; the old columns stay in
step for the undo and, with ``versions``, for the old code. A change of a
parent's old key (``<key>_old``) must do to the children's old values what
their foreign key's ``ON UPDATE`` rule did before the swap: ``CASCADE``
follows, ``SET NULL`` empties, ``NO ACTION`` refuses while referenced -- and
the undo must then give the changed key back with its children.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7

PARENT = "sh`op s"


def _q(engine: Engine, name: str) -> str:
    return engine.dialect.identifier_preparer.quote(name)


@pytest.fixture
def shop(online_private_engine: Engine) -> Engine:
    engine = online_private_engine
    p = _q(engine, PARENT)
    serial = (
        "bigserial PRIMARY KEY"
        if engine.dialect.name == "postgresql"
        else "BIGINT AUTO_INCREMENT PRIMARY KEY"
    )
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE {p} (id {serial}, name VARCHAR(20) NOT NULL)")
        for child, rule in (("part", "ON UPDATE CASCADE"), ("tag", "ON UPDATE SET NULL")):
            nullable = "NULL" if child == "tag" else "NOT NULL"
            conn.exec_driver_sql(
                f"CREATE TABLE {child} (id {serial}, shop_id BIGINT {nullable},"
                f" FOREIGN KEY (shop_id) REFERENCES {p} (id) {rule})"
            )
        conn.exec_driver_sql(
            f"CREATE TABLE item (id {serial}, shop_id BIGINT NOT NULL,"
            f" FOREIGN KEY (shop_id) REFERENCES {p} (id))"
        )
        conn.exec_driver_sql(f"INSERT INTO {p} (name) VALUES ('a'), ('b')")
        conn.exec_driver_sql("INSERT INTO part (shop_id) VALUES (1), (1), (2)")
        conn.exec_driver_sql("INSERT INTO tag (shop_id) VALUES (1), (2)")
        conn.exec_driver_sql("INSERT INTO item (shop_id) VALUES (2)")
    return engine


def _old_values(engine: Engine, table: str) -> list[object]:
    """The child's old values (its parked column), in row order."""
    with engine.connect() as conn:
        (column,) = [
            c["name"]
            for c in sa.inspect(conn).get_columns(table)
            if str(c["name"]).startswith("sqla_ids_old_")
        ]
        return list(
            conn.exec_driver_sql(f"SELECT {_q(engine, column)} FROM {table} ORDER BY id").scalars()
        )


def test_an_old_key_changed_after_the_swap_follows_each_rule_and_comes_back(shop: Engine) -> None:
    engine, p = shop, _q(shop, PARENT)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, PARENT, PkMigrationOptions(online=True), phase="swap")
    with engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE {p} SET id_old = 100 WHERE name = 'a'")
    assert _old_values(engine, "part") == [100, 100, 2]  # CASCADE
    assert _old_values(engine, "tag") == [None, 2]  # SET NULL
    # b is referenced by item (NO ACTION): its old key cannot change, as before.
    refused = pytest.raises(sa.exc.DBAPIError, match="still referenced from item")
    with refused, engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE {p} SET id_old = 200 WHERE name = 'b'")
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, PARENT)
        conn.commit()
        parts = conn.exec_driver_sql(
            f"SELECT s.name, s.id FROM part c JOIN {p} s ON s.id = c.shop_id ORDER BY c.id"
        ).all()
        tags = conn.exec_driver_sql("SELECT shop_id FROM tag ORDER BY id").scalars().all()
    assert [tuple(r) for r in parts] == [("a", 100), ("a", 100), ("b", 2)]
    assert tags == [None, 2]
