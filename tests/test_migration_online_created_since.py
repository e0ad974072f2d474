"""Objects the application creates between two phases of an online migration
(issue 28, defect 15).

An Alembic revision runs the prepare, a later one the swap, another the
contract: in between, the application's own revisions add an index on a
child's reference, a view, a trigger, a generated column, a new child
table. The plan was made without them; the swap would park them with the old
column and the contract drop them (an index silently), or fail half-way (a
view). Each phase compares what depends on the columns it renames away or
drops with what the plan recorded, and refuses what is new by name, before
anything changes; once the object is dropped, the migration goes on. The
same holds for the undo after the swap (it drops the UUID columns).
A generated column computed from a converted column is refused at the plan.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from dbsnapshot import rows, schema
from online_app import migrate_online, quoted
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import restore_pk_from_uuid7
from sqla_ids.migration.core.state import steps

# (what is created, the statement per database, how it is named in the refusal,
# how it is dropped)
Created = tuple[dict[str, str], str, dict[str, str]]

CREATED: dict[str, Created] = {
    "index on a child's reference": (
        {
            "postgresql": "CREATE INDEX item_shop_label ON item (shop_id, label)",
            "mariadb": "CREATE INDEX item_shop_label ON item (shop_id, label)",
        },
        "index item_shop_label",
        {
            "postgresql": "DROP INDEX item_shop_label",
            "mariadb": "DROP INDEX item_shop_label ON item",
        },
    ),
    "view over a child's reference": (
        {
            "postgresql": "CREATE VIEW item_v AS SELECT id, shop_id FROM item",
            "mariadb": "CREATE VIEW item_v AS SELECT id, shop_id FROM item",
        },
        "view item_v",
        {"postgresql": "DROP VIEW item_v", "mariadb": "DROP VIEW item_v"},
    ),
    "trigger naming a child's reference": (
        {
            "postgresql": "CREATE FUNCTION item_f() RETURNS trigger LANGUAGE plpgsql AS"
            " $$BEGIN RETURN NEW; END$$\n"
            " CREATE TRIGGER item_t BEFORE UPDATE OF shop_id ON item"
            " FOR EACH ROW EXECUTE FUNCTION item_f()",
            "mariadb": "CREATE TRIGGER item_t BEFORE UPDATE ON item FOR EACH ROW"
            " SET NEW.label = IF(NEW.shop_id <> OLD.shop_id, CONCAT(NEW.label, '!'), NEW.label)",
        },
        "trigger item_t",
        {
            "postgresql": "DROP TRIGGER item_t ON item\n DROP FUNCTION item_f()",
            "mariadb": "DROP TRIGGER item_t",
        },
    ),
    "generated column from a child's reference": (
        {
            "postgresql": "ALTER TABLE item ADD COLUMN twice bigint"
            " GENERATED ALWAYS AS (shop_id * 2) STORED",
            "mariadb": "ALTER TABLE item ADD COLUMN twice BIGINT AS (shop_id * 2) STORED",
        },
        "generated column twice",
        {
            "postgresql": "ALTER TABLE item DROP COLUMN twice",
            "mariadb": "ALTER TABLE item DROP COLUMN twice",
        },
    ),
    "new child table": (
        {
            "postgresql": "CREATE TABLE coupon (id serial PRIMARY KEY,"
            ' shop_id bigint REFERENCES "shop s" (id))'
            "\n INSERT INTO coupon (shop_id) VALUES (3)",
            "mariadb": "CREATE TABLE coupon (id INT AUTO_INCREMENT PRIMARY KEY, shop_id BIGINT,"
            " CONSTRAINT coupon_shop FOREIGN KEY (shop_id) REFERENCES `shop s` (id))"
            "\n INSERT INTO coupon (shop_id) VALUES (3)",
        },
        "coupon",
        {"postgresql": "DROP TABLE coupon", "mariadb": "DROP TABLE coupon"},
    ),
}


def _name(engine: Engine) -> str:
    return engine.dialect.name if engine.dialect.name == "postgresql" else "mariadb"


def _run(engine: Engine, sql: str) -> None:
    with engine.begin() as conn:
        for statement in sql.split("\n"):
            conn.exec_driver_sql(statement.strip())


def _state(engine: Engine) -> tuple[object, object, object]:
    with engine.connect() as conn:
        return schema(conn), rows(conn), steps(conn).get("shop s")


@pytest.mark.slow
@pytest.mark.parametrize("created", list(CREATED), ids=lambda c: c.replace(" ", "-"))
@pytest.mark.parametrize("before", ["swap", "contract-after-undo"])
def test_created_between_phases_is_refused_by_name_then_the_migration_goes_on(
    online_shop: Engine, created: str, before: str
) -> None:
    engine = online_shop
    db = _name(engine)
    if db == "mariadb" and created.startswith("generated"):
        pytest.skip(
            "MariaDB refuses a generated column over a foreign key column with ON UPDATE"
            " CASCADE (1901), which each of the shop's references has"
        )
    create, named, drop = CREATED[created]
    migrate_online(engine, "prepare")
    _run(engine, create[db])
    unchanged = _state(engine)
    goal = "swap" if before == "swap" else "all"
    with pytest.raises(MigrationRefusedError) as refused:
        migrate_online(engine, goal)
    message = str(refused.value)
    assert named in message and "created after it was planned" in message, message
    assert "nothing was changed" in message
    assert _state(engine) == unchanged
    _run(engine, drop[db])
    if before == "swap":
        migrate_online(engine, "all")
        with engine.connect() as conn:
            assert steps(conn)["shop s"] == "done"
    else:
        with engine.connect() as conn:
            restore_pk_from_uuid7(conn, "shop s")
            conn.commit()
        with engine.connect() as conn:
            assert "shop s" not in steps(conn)


@pytest.mark.slow_on("mariadb")  # the quick loop runs the PostgreSQL case
def test_created_on_the_uuid_columns_after_the_swap_stops_the_undo(online_shop: Engine) -> None:
    """After the swap the UUID columns hold the original names; the undo drops
    them: an index the application put on one since is named, not dropped."""
    engine = online_shop
    migrate_online(engine, "swap")
    _run(engine, "CREATE INDEX item_shop_label ON item (shop_id, label)")
    unchanged = _state(engine)
    with engine.connect() as conn, pytest.raises(MigrationRefusedError) as refused:
        restore_pk_from_uuid7(conn, "shop s")
    message = str(refused.value)
    assert "index item_shop_label" in message and "drops those columns" in message, message
    assert _state(engine) == unchanged
    # Kept, the contract carries it (it is on the UUID column already).
    migrate_online(engine, "contract")
    with engine.connect() as conn:
        indexes = {i["name"] for i in sa.inspect(conn).get_indexes("item")}
    assert "item_shop_label" in indexes


@pytest.mark.slow_on("mariadb")  # the quick loop runs the PostgreSQL case
def test_what_the_plan_recorded_is_carried_without_a_word(online_shop: Engine) -> None:
    """An index on a reference that existed at the plan is the migration's own
    business: no refusal at any phase."""
    engine = online_shop
    _run(engine, "CREATE INDEX item_shop_label ON item (shop_id, label)")
    migrate_online(engine, "all")
    with engine.connect() as conn:
        assert steps(conn)["shop s"] == "done"
        indexes = {i["name"]: i["column_names"] for i in sa.inspect(conn).get_indexes("item")}
    assert indexes["item_shop_label"] == ["shop_id", "label"]


@pytest.mark.parametrize("on", ["key", "reference"])
def test_a_generated_column_from_a_converted_column_is_refused_at_the_plan(
    online_shop: Engine, on: str
) -> None:
    engine = online_shop
    q = quoted(engine)
    if _name(engine) == "postgresql":
        generated = "bigint GENERATED ALWAYS AS ({} * 2) STORED"
    elif on == "key":
        pytest.skip("MariaDB refuses a generated column over an AUTO_INCREMENT key (1901)")
    else:
        generated = "BIGINT AS ({} * 2) STORED"
    if on == "key":
        _run(engine, f"ALTER TABLE {q} ADD COLUMN twice {generated.format('id')}")
    else:  # a child whose foreign key does not cascade (MariaDB refuses it then)
        _run(
            engine,
            f"CREATE TABLE gift (id INT PRIMARY KEY, shop_id BIGINT REFERENCES {q} (id),"
            f" twice {generated.format('shop_id')})",
        )
    unchanged = _state(engine)
    for online in (True, False):
        with pytest.raises(MigrationRefusedError, match="generated column twice"):
            migrate_online(engine, "all") if online else _offline(engine)
        assert _state(engine) == unchanged


def _offline(engine: Engine) -> None:
    from sqla_ids.migration import migrate_pk_to_uuid7

    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, "shop s")
