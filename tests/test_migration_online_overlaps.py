"""Online migrations whose tables overlap, and keys MariaDB cannot loosen (issue 28).

* A child's unique index spanning references to two parents (Sakila's
  ``rental``: ``UNIQUE (rental_date, inventory_id, customer_id)``): two online
  migrations in progress at once would each rebuild it over the other's column
  as named then, and after both swaps it would sit on a parked column and go
  with it at the contract (MariaDB: error 1072; PostgreSQL: the index dropped
  silently). The second is refused by name with the way out, which works.
* MariaDB refuses to change the nullability of a column a foreign key with
  ``ON UPDATE CASCADE`` refers to (1833): the online undo keeps the key column
  NOT NULL (Sakila: every foreign key cascades updates), and a key that is not
  ``AUTO_INCREMENT`` -- whose old values would have to become nullable for the
  rows inserted after the swap -- is refused online, by name.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from dbsnapshot import rows, schema
from sqlalchemy.engine import Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7

pytestmark = pytest.mark.slow

ONLINE = PkMigrationOptions(online=True, batch_size=7)


def _schema(engine: Engine, key: str) -> None:
    with engine.begin() as conn:
        for t in ("inventory", "customer"):
            conn.exec_driver_sql(f"CREATE TABLE {t} (id {key} PRIMARY KEY, name VARCHAR(20))")
            conn.exec_driver_sql(f"INSERT INTO {t} (id, name) VALUES (1, 'x'), (2, 'y'), (3, 'z')")
        conn.exec_driver_sql(
            "CREATE TABLE rental (id BIGINT PRIMARY KEY, rented DATE NOT NULL,"
            " inventory_id BIGINT NOT NULL REFERENCES inventory (id) ON UPDATE CASCADE,"
            " customer_id BIGINT NOT NULL REFERENCES customer (id) ON UPDATE CASCADE,"
            " CONSTRAINT rental_once UNIQUE (rented, inventory_id, customer_id))"
        )
        conn.execute(
            sa.text("INSERT INTO rental VALUES (:i, :d, :a, :b)"),
            [
                {"i": 1, "d": "2020-01-01", "a": 1, "b": 2},
                {"i": 2, "d": "2020-01-01", "a": 2, "b": 3},
                {"i": 3, "d": "2020-01-02", "a": 1, "b": 2},
            ],
        )


def _by_name(engine: Engine) -> dict[str, list[tuple[object, ...]]]:
    """Every row, columns by name (whatever their position)."""
    with engine.connect() as conn:
        return {
            table: sorted(conn.exec_driver_sql(f"SELECT {columns} FROM {table}").all())
            for table, columns in (
                ("inventory", "id, name"),
                ("customer", "id, name"),
                ("rental", "id, rented, inventory_id, customer_id"),
            )
        }


def _run(engine: Engine, table: str, phase: str) -> None:
    with engine.connect() as conn:
        if phase == "undo":
            restore_pk_from_uuid7(conn, table)
            conn.commit()
        else:
            migrate_pk_to_uuid7(conn, table, ONLINE, phase=phase)  # type: ignore[arg-type]


def test_a_unique_index_over_two_migrated_parents(online_private_engine: Engine) -> None:
    engine = online_private_engine
    key = "BIGINT AUTO_INCREMENT" if engine.dialect.name != "postgresql" else "BIGINT"
    _schema(engine, key)
    with engine.connect() as conn:
        before = (schema(conn), rows(conn))
    _named_before = _by_name(engine)
    _run(engine, "inventory", "prepare")
    with pytest.raises(
        MigrationRefusedError,
        match=r"index rental_once on rental spans inventory_id, which the online migration"
        r" of inventory .* converts too.*contract that one first",
    ):
        _run(engine, "customer", "prepare")
    # The way out: the first contracted, the second migrated; and back.
    _run(engine, "inventory", "swap")
    _run(engine, "inventory", "contract")
    for phase in ("prepare", "swap"):
        _run(engine, "customer", phase)
    with engine.connect() as conn:
        unique = [
            ix
            for ix in sa.inspect(conn).get_unique_constraints("rental")
            + [i for i in sa.inspect(conn).get_indexes("rental") if i["unique"]]
            if ix["name"] == "rental_once"
        ]
        assert unique, "the unique index over both references survived"
        assert unique[0]["column_names"] == ["rented", "inventory_id", "customer_id"]
    _run(engine, "customer", "undo")
    _run(engine, "inventory", "undo")
    with engine.connect() as conn:
        after = (schema(conn), rows(conn))
    if engine.dialect.name == "postgresql":  # documented: columns at the end after a contract
        assert _by_name(engine) == _named_before
    else:
        assert after == before


def test_mariadb_undo_with_cascading_not_null_references(mariadb_private_engine: Engine) -> None:
    engine = mariadb_private_engine
    _schema(engine, "BIGINT AUTO_INCREMENT")
    with engine.connect() as conn:
        before = (schema(conn), rows(conn))
    _run(engine, "inventory", "prepare")
    _run(engine, "inventory", "swap")
    _run(engine, "inventory", "undo")  # 1833 before: the UUID key was made nullable
    with engine.connect() as conn:
        assert (schema(conn), rows(conn)) == before


def test_mariadb_refuses_a_natural_key_cascading_to_its_children(
    mariadb_private_engine: Engine,
) -> None:
    engine = mariadb_private_engine
    _schema(engine, "BIGINT")
    with pytest.raises(
        MigrationRefusedError,
        match=r"\w+[.]inventory[.]id is not AUTO_INCREMENT and \w+[.]rental[.]inventory_id refers"
        " to it ON"
        " UPDATE CASCADE.*migrate offline \\(online=False\\)",
    ):
        _run(engine, "inventory", "prepare")
