"""Issue 29: foreign keys declared on each partition (pagila's ``payment_p2007_01``
...), unpopulated materialized views, and refusals that name every blocker of
every table in one message, schema-qualified, each with the way out."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from sqla_ids.errors import MigrationRefusedError
from sqla_ids.migration import migrate_pk_to_uuid7, preflight, restore_pk_from_uuid7
from tests import dbsnapshot

# Hostile names: quotes, spaces, unicode.
CUSTOMER = 'cüst "o\'mer"'
STAFF = "st aff"
PAYMENT = 'pay"ment'
CUSTOMER_ID = 'cust "id"'
MATVIEW = "mv 'ünpopulated'"


def _q(conn: Connection, name: str) -> str:
    return str(conn.dialect.identifier_preparer.quote(name))


def _partition(n: int) -> str:
    return f'{PAYMENT}_p2007_0{n} "x"'


def _pagila_like(conn: Connection) -> None:
    """``payment`` partitioned by date, each partition with its own foreign keys to
    ``customer`` and ``staff`` (none on ``payment`` itself), as pagila declares them."""
    q = lambda name: _q(conn, name)  # noqa: E731
    conn.exec_driver_sql(
        f"CREATE TABLE {q(CUSTOMER)} ({q(CUSTOMER_ID)} serial PRIMARY KEY, name text NOT NULL)"
    )
    conn.exec_driver_sql(f"CREATE TABLE {q(STAFF)} (staff_id serial PRIMARY KEY, name text)")
    conn.exec_driver_sql(
        f"CREATE TABLE {q(PAYMENT)} (payment_id serial, {q(CUSTOMER_ID)} integer NOT NULL,"
        " staff_id integer NOT NULL, amount numeric(5,2) NOT NULL,"
        " payment_date timestamptz NOT NULL, PRIMARY KEY (payment_date, payment_id))"
        " PARTITION BY RANGE (payment_date)"
    )
    conn.exec_driver_sql(f"CREATE INDEX ix_payment_customer ON {q(PAYMENT)} ({q(CUSTOMER_ID)})")
    for n in (1, 2, 3):
        part = q(_partition(n))
        conn.exec_driver_sql(
            f"CREATE TABLE {part} PARTITION OF {q(PAYMENT)}"
            f" FOR VALUES FROM ('2007-0{n}-01') TO ('2007-0{n + 1}-01')"
        )
        # Each partition's own foreign keys, each with its own options.
        conn.exec_driver_sql(
            f"ALTER TABLE {part} ADD CONSTRAINT {q(f'fk {n} cüstomer')} FOREIGN KEY"
            f" ({q(CUSTOMER_ID)}) REFERENCES {q(CUSTOMER)} ({q(CUSTOMER_ID)})"
            + (" ON UPDATE CASCADE ON DELETE RESTRICT" if n == 2 else "")
        )
        conn.exec_driver_sql(
            f"ALTER TABLE {part} ADD CONSTRAINT {q(f'fk {n} staff')} FOREIGN KEY (staff_id)"
            f" REFERENCES {q(STAFF)} (staff_id)"
        )
    conn.exec_driver_sql(
        f"INSERT INTO {q(CUSTOMER)} (name) SELECT 'c' || g FROM generate_series(1, 30) g"
    )
    conn.exec_driver_sql(f"INSERT INTO {q(STAFF)} (name) VALUES ('a'), ('b')")
    conn.exec_driver_sql(
        f"INSERT INTO {q(PAYMENT)} ({q(CUSTOMER_ID)}, staff_id, amount, payment_date)"
        " SELECT 1 + mod(g, 30), 1 + mod(g, 2), mod(g, 10) + 0.99,"
        " timestamptz '2007-01-01' + mod(g, 85) * interval '1 day' FROM generate_series(1, 200) g"
    )


@pytest.fixture
def pagila(postgresql_private_engine: Engine) -> Iterator[Engine]:
    with postgresql_private_engine.begin() as conn:
        _pagila_like(conn)
    yield postgresql_private_engine


def _partition_fks(conn: Connection) -> list[tuple[str, str, str]]:
    return [
        tuple(r)
        for r in conn.exec_driver_sql(
            "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k"
            " JOIN pg_class c ON c.oid = k.conrelid WHERE k.contype = 'f'"
            " AND c.relnamespace = quote_ident(current_schema())::regnamespace ORDER BY 1, 2"
        ).all()
    ]


def _types(conn: Connection, column: str) -> set[tuple[str, str]]:
    return {
        tuple(r)
        for r in conn.execute(
            sa.text(
                "SELECT c.relname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
                " JOIN pg_class c ON c.oid = a.attrelid WHERE a.attname = :c AND c.relkind IN"
                " ('r', 'p') AND c.relnamespace = quote_ident(current_schema())::regnamespace"
            ),
            {"c": column},
        ).all()
    }


@pytest.mark.slow
def test_per_partition_foreign_keys_are_carried(pagila: Engine) -> None:
    """Migrating ``customer`` converts ``payment``'s column (every partition) and puts
    each partition's foreign key back exactly as declared; the undo restores the
    whole schema and every row."""
    with pagila.connect() as conn:
        q = lambda name: _q(conn, name)  # noqa: E731
        conn.exec_driver_sql(
            f"CREATE MATERIALIZED VIEW {q(MATVIEW)} AS SELECT c.{q(CUSTOMER_ID)}, count(*) AS n"
            f" FROM {q(CUSTOMER)} c JOIN {q(PAYMENT)} p USING ({q(CUSTOMER_ID)})"
            f" GROUP BY 1 WITH NO DATA"
        )
        conn.exec_driver_sql(f"CREATE UNIQUE INDEX {q('ix mv')} ON {q(MATVIEW)} ({q(CUSTOMER_ID)})")
        conn.exec_driver_sql(f"COMMENT ON MATERIALIZED VIEW {q(MATVIEW)} IS 'kept ünpopulated'")
        conn.commit()
        schema_before = dbsnapshot.schema(conn)
        rows_before = dbsnapshot.rows(conn)
        relations_before = dbsnapshot.relations(conn)
        fks_before = _partition_fks(conn)
        assert len([fk for fk in fks_before if "cüstomer" in fk[1]]) == 3
        plan = migrate_pk_to_uuid7(conn, CUSTOMER, recreate_views=True)
        conn.commit()
        assert {(r.table, r.via) for r in plan.references} == {
            *((_partition(n), PAYMENT) for n in (1, 2, 3)),
            (PAYMENT, None),
        }
        # Every partition's column converted (through the partitioned table), every
        # foreign key back as it was declared, on its partition.
        assert _types(conn, CUSTOMER_ID) == {
            (t, "uuid") for t in [CUSTOMER, PAYMENT, *map(_partition, (1, 2, 3))]
        }
        assert _partition_fks(conn) == fks_before
        assert dbsnapshot.relations(conn) == relations_before
        populated = conn.execute(
            sa.text("SELECT relispopulated FROM pg_class WHERE relname = :m"), {"m": MATVIEW}
        ).scalar_one()
        assert populated is False
        assert "ix mv" in {i["name"] for i in sa.inspect(conn).get_indexes(MATVIEW)}
        restore_pk_from_uuid7(conn, CUSTOMER)
        conn.commit()
        assert dbsnapshot.schema(conn) == schema_before
        assert dbsnapshot.rows(conn) == rows_before


def test_every_blocker_in_one_message(pagila: Engine) -> None:
    """A rule on the partitioned table, a view of another schema that shares a
    table's name, a populated materialized view: all named in one refusal,
    schema-qualified, each with its way out -- nothing changed."""
    legacy = f"h5_legacy '{secrets.token_hex(3)}'"
    with pagila.connect() as conn:
        q = lambda name: _q(conn, name)  # noqa: E731
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        conn.exec_driver_sql(f"CREATE SCHEMA {q(legacy)}")
        try:
            conn.exec_driver_sql(
                f"CREATE RULE {q('payment pk update')} AS ON UPDATE TO {q(PAYMENT)}"
                " DO INSTEAD NOTHING"
            )
            conn.exec_driver_sql(
                f"CREATE VIEW {q(legacy)}.{q(CUSTOMER)} AS SELECT * FROM {q(schema)}.{q(CUSTOMER)}"
            )
            conn.exec_driver_sql(
                f"CREATE MATERIALIZED VIEW {q('mv full')} AS SELECT {q(CUSTOMER_ID)}"
                f" FROM {q(PAYMENT)}"
            )
            conn.commit()
            before = dbsnapshot.schema(conn)
            with pytest.raises(MigrationRefusedError) as error:
                migrate_pk_to_uuid7(conn, CUSTOMER)
            conn.rollback()
            message = str(error.value)
            assert "nothing was changed" in message
            assert "partition" not in message.replace("partitioned", "")  # carried, not refused
            assert (
                f"rule {q('payment pk update')} on {q(schema)}.{q(PAYMENT)} uses {q(CUSTOMER_ID)}"
                f" of {q(schema)}.{q(PAYMENT)}; drop it first"
                f" (DROP RULE {q('payment pk update')} ON {q(schema)}.{q(PAYMENT)})"
            ) in message
            assert f"view {q(legacy)}.{q(CUSTOMER)} depends on {q(schema)}.{q(CUSTOMER)}" in message
            assert "recreate_views=True" in message
            assert f"DROP MATERIALIZED VIEW {q(schema)}.{q('mv full')}" in message
            assert dbsnapshot.schema(conn) == before
            # Online: the planner's blockers, in one message (the partitions' foreign
            # keys, once the online mode's own refusal, are carried now).
            conn.exec_driver_sql(f"DROP RULE {q('payment pk update')} ON {q(PAYMENT)}")
            conn.commit()
            with pytest.raises(MigrationRefusedError) as error:
                migrate_pk_to_uuid7(conn, CUSTOMER, online=True)
            message = str(error.value)
            # Online, the swap refreshes a populated materialized view: it is
            # recreated as the other views are (recreate_views=True), not refused.
            assert f"DROP MATERIALIZED VIEW {q(schema)}.{q('mv full')}" not in message
            assert f"view {q(schema)}.{q('mv full')} depends on" in message
            # The partitions' own foreign keys are carried online too.
            assert "partition" not in message.replace("partitioned", "")
            assert f"view {q(legacy)}.{q(CUSTOMER)} depends on" in message
            # The preflight refuses as the run would: the same one message.
            report = preflight(conn, CUSTOMER, online=True)
            conn.rollback()
            assert report.tables[0].refused == [message]
        finally:
            conn.rollback()
            conn.exec_driver_sql(f"DROP SCHEMA {q(legacy)} CASCADE")
            conn.commit()


def test_mariadb_every_blocker_in_one_message(mariadb_private_engine: Engine) -> None:
    """MariaDB: a CHECK constraint over the reference and a view -- one message,
    ``db``-qualified, each with the SQL that removes it; online, the online mode's
    own refusals join them. An UPDATE trigger on a child is none (set aside
    offline, guarded online). Running the SQL given (and passing the option
    named) lets the migration through, the trigger kept."""
    engine = mariadb_private_engine
    parent, child, view = "pä`rent 'x'", 'chi"ld `y`', "v `ü` 'w'"
    trigger, check = "trg `u` 'v'", "ck `c` 'd'"
    with engine.begin() as conn:
        q = lambda name: _q(conn, name)  # noqa: E731
        db = q(conn.exec_driver_sql("SELECT DATABASE()").scalar_one())
        conn.exec_driver_sql(f"CREATE TABLE {q(parent)} (id INT AUTO_INCREMENT PRIMARY KEY)")
        conn.exec_driver_sql(
            f"CREATE TABLE {q(child)} (id INT AUTO_INCREMENT PRIMARY KEY, pid INT NOT NULL,"
            f" note VARCHAR(9), CONSTRAINT {q(check)} CHECK (pid > 0),"
            f" CONSTRAINT fk_c FOREIGN KEY (pid) REFERENCES {q(parent)} (id))"
        )
        conn.exec_driver_sql(
            f"CREATE TRIGGER {q(trigger)} BEFORE UPDATE ON {q(child)} FOR EACH ROW"
            " SET NEW.note = 'u'"
        )
        conn.exec_driver_sql(f"CREATE VIEW {q(view)} AS SELECT pid FROM {q(child)}")
        conn.exec_driver_sql(f"INSERT INTO {q(parent)} (id) VALUES (1), (2)")
        conn.exec_driver_sql(f"INSERT INTO {q(child)} (pid) VALUES (1), (2), (2)")
    with engine.connect() as conn:
        before = dbsnapshot.schema(conn)
        with pytest.raises(MigrationRefusedError) as error:
            migrate_pk_to_uuid7(conn, parent)
        conn.rollback()
        message = str(error.value)
        # (Offline, the UPDATE trigger is set aside while the migration writes.)
        assert message.startswith("cannot migrate: 2 problems: (1) ")
        assert f"view {db}.{q(view)} depends on" in message
        assert "recreate_views=True" in message
        drop_trigger = f"DROP TRIGGER {q(trigger)}"
        drop_check = f"ALTER TABLE {db}.{q(child)} DROP CONSTRAINT {q(check)}"
        assert drop_trigger not in message and drop_check in message
        assert "nothing was changed" in message
        with pytest.raises(MigrationRefusedError) as error:
            migrate_pk_to_uuid7(conn, parent, online=True)
        conn.rollback()
        online = str(error.value)
        assert drop_trigger not in online and drop_check in online
        # Online as offline: the view is recreated when asked (recreate_views=True).
        assert f"view {db}.{q(view)} depends on" in online and "recreate_views=True" in online
        assert dbsnapshot.schema(conn) == before
        # The way out, as given.
        conn.exec_driver_sql(drop_check)
        migrate_pk_to_uuid7(conn, parent, recreate_views=True)
        conn.commit()
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {q(view)}").scalar_one() == 3
        triggers = conn.exec_driver_sql(
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()"
        ).scalars()
        assert trigger in list(triggers)


def test_a_partitioned_childs_key_over_the_reference_is_refused_online(
    postgresql_private_engine: Engine,
) -> None:
    """A partitioned child is migrated online (tests/test_migration_online_partitions.py),
    but not one whose primary key contains the reference (a partitioned link
    table): its key is built again over the new column, and PostgreSQL makes
    no index a constraint of a partitioned table (``USING INDEX``). Refused by
    name before anything changes; the offline mode converts it in place."""
    engine = postgresql_private_engine
    with engine.begin() as conn:
        q = lambda name: _q(conn, name)  # noqa: E731
        conn.exec_driver_sql(
            f"CREATE TABLE {q(CUSTOMER)} ({q(CUSTOMER_ID)} serial PRIMARY KEY, name text)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {q(PAYMENT)} ({q(CUSTOMER_ID)} integer NOT NULL"
            f" REFERENCES {q(CUSTOMER)} ON DELETE CASCADE, paid date NOT NULL,"
            f" CONSTRAINT {q('pay key')} PRIMARY KEY ({q(CUSTOMER_ID)}, paid))"
            " PARTITION BY RANGE (paid)"
        )
        conn.exec_driver_sql(
            f"CREATE TABLE {q(_partition(1))} PARTITION OF {q(PAYMENT)}"
            " FOR VALUES FROM ('2007-01-01') TO ('2008-01-01')"
        )
        conn.exec_driver_sql(f"INSERT INTO {q(CUSTOMER)} (name) VALUES ('a'), ('b')")
        conn.exec_driver_sql(
            f"INSERT INTO {q(PAYMENT)} ({q(CUSTOMER_ID)}, paid) VALUES (1, '2007-02-01')"
        )
    with engine.connect() as conn:
        before = (dbsnapshot.schema(conn), dbsnapshot.rows(conn))
        conn.rollback()  # (online: no transaction open)
        with pytest.raises(MigrationRefusedError) as refused:
            migrate_pk_to_uuid7(conn, CUSTOMER, online=True)
        conn.rollback()
        message = str(refused.value)
        schema = q(conn.exec_driver_sql("SELECT current_schema()").scalar_one())
        here = f"{schema}.{q(PAYMENT)}"  # schema-qualified, quoted as SQL would
        assert f"the primary key {q('pay key')} of the partitioned table {here}" in message
        assert "USING INDEX" in message and "online=False" in message
        assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before
        # Offline, it goes through (and back).
        migrate_pk_to_uuid7(conn, CUSTOMER)
        conn.commit()
        restore_pk_from_uuid7(conn, CUSTOMER)
        conn.commit()
        assert (dbsnapshot.schema(conn), dbsnapshot.rows(conn)) == before
