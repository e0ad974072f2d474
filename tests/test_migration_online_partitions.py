"""Issue 29: a partitioned child migrated online on PostgreSQL, with the
application writing into it.

Two layouts of the same ``payment`` (partitioned by date, one partition
partitioned again, a default partition):

* ``each partition``: pagila's -- every partition declares its own foreign key
  to the customer (the sub-partitioned one on itself, as a partitioned
  table), and has an index of its own;
* ``partitioned table``: the foreign key (``ON DELETE CASCADE``) declared once,
  on ``payment``, and an index on ``payment`` (a piece on each partition);
* ``inheritance``: the same months as tables that inherit from ``payment``
  (February's second half from February's), each with its own foreign key,
  as before declarative partitioning (Sakila's PostgreSQL port); the
  application inserts into the month's table, reads and writes through
  ``payment``.

PostgreSQL builds neither an index ``CONCURRENTLY`` nor a foreign key ``NOT
VALID`` on a partitioned table: the online mode builds them on each partition
and joins them to the partitioned table in the catalog
(``sqla_ids/migration/backends/postgresql/partitions.py``). An application
pays, moves payments to other customers, refunds and opens and closes
customers (a delete cascading through the partitions) without a pause; each
payment must end with the customer it was last given, and an undo must give
the schema back exactly -- every piece's name included.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import date, timedelta

import pytest
import sqlalchemy as sa
from autovacuum import crawling, require_autovacuum, vacuumed
from dbsnapshot import structure
from online_app import Unpaced
from sqlalchemy.engine import Connection, Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7

CUSTOMER = 'cüst "o\'mer"'
CUSTOMER_ID = 'cust "id"'
PAYMENT = 'pay"ment'
LAYOUTS = ["each partition", "partitioned table", "inheritance"]
MONTHS = ["2007-01-01", "2007-02-01", "2007-02-15", "2007-03-01", "2007-05-01"]


def _q(conn: Connection | Engine, name: str) -> str:
    return str(conn.dialect.identifier_preparer.quote(name))


def _month(paid: str) -> str:
    """The table a payment of ``paid`` (``YYYY-MM-DD``) goes to, by inheritance."""
    if paid < MONTHS[0] or paid >= MONTHS[3]:
        return PAYMENT
    if paid < MONTHS[1]:
        return PAYMENT + " jan"
    return PAYMENT + (" feb 1" if paid < MONTHS[2] else " feb")


def _inheritance(conn: Connection) -> None:
    """``payment`` and its months by inheritance, each with its own foreign key
    (the parent's own rows: other months); 40 customers, 600 payments."""
    q = lambda name: _q(conn, name)  # noqa: E731
    cust, cid, pay = q(CUSTOMER), q(CUSTOMER_ID), q(PAYMENT)
    conn.exec_driver_sql(
        f"CREATE TABLE {cust} ({cid} serial PRIMARY KEY, name text NOT NULL UNIQUE)"
    )
    conn.exec_driver_sql(
        f"CREATE TABLE {pay} (payment_id serial PRIMARY KEY, {cid} integer NOT NULL"
        f" REFERENCES {cust}, amount numeric(5,2) NOT NULL, paid date NOT NULL)"
    )
    conn.exec_driver_sql(f"CREATE INDEX {q('pay by cüstomer')} ON {pay} ({cid}, amount)")
    months = {
        "jan": (PAYMENT, MONTHS[0], MONTHS[1]),
        "feb": (PAYMENT, MONTHS[1], MONTHS[3]),
        "feb 1": (PAYMENT + " feb", MONTHS[1], MONTHS[2]),
    }
    for suffix, (parent, low, high) in months.items():
        table = q(PAYMENT + " " + suffix)
        conn.exec_driver_sql(
            f"CREATE TABLE {table} (CHECK (paid >= '{low}' AND paid < '{high}'))"
            f" INHERITS ({q(parent)})"
        )
        conn.exec_driver_sql(
            f"ALTER TABLE {table} ADD CONSTRAINT {q(f'fk {suffix} cüstomer')} FOREIGN KEY"
            f" ({cid}) REFERENCES {cust} ({cid})"
            + (" ON DELETE RESTRICT" if suffix == "feb" else "")
        )
    conn.exec_driver_sql(f"CREATE INDEX {q('jan cüstomer')} ON {q(PAYMENT + ' jan')} ({cid})")
    conn.exec_driver_sql(f"INSERT INTO {cust} (name) SELECT 'c' || g FROM generate_series(1, 40) g")
    for g in range(1, 601):
        paid = str(date(2006, 12, 20) + timedelta(days=g % 120))
        conn.execute(
            sa.text(
                f"INSERT INTO {q(_month(paid))} ({cid}, amount, paid)"
                " VALUES (:c, :a, CAST(:d AS date))"
            ),
            {"c": 1 + g % 40, "a": g % 50 + 0.5, "d": paid},
        )


def _schema(engine: Engine, layout: str) -> None:
    """``payment``: January (a leaf), February (partitioned by halves), a default
    partition; 40 customers, 600 payments."""
    if layout == "inheritance":
        with engine.begin() as conn:
            _inheritance(conn)
        return
    with engine.begin() as conn:
        q = lambda name: _q(conn, name)  # noqa: E731
        cust, cid, pay = q(CUSTOMER), q(CUSTOMER_ID), q(PAYMENT)
        conn.exec_driver_sql(
            f"CREATE TABLE {cust} ({cid} serial PRIMARY KEY, name text NOT NULL UNIQUE)"
        )
        cascade = " ON DELETE CASCADE" if layout == "partitioned table" else ""
        reference = f" REFERENCES {cust}{cascade}" if layout == "partitioned table" else ""
        conn.exec_driver_sql(
            f"CREATE TABLE {pay} (payment_id serial, {cid} integer NOT NULL{reference},"
            " amount numeric(5,2) NOT NULL, paid date NOT NULL,"
            " PRIMARY KEY (paid, payment_id)) PARTITION BY RANGE (paid)"
        )
        conn.exec_driver_sql(f"CREATE INDEX {q('pay by cüstomer')} ON {pay} ({cid}, amount)")
        parts = {
            "jan": f"PARTITION OF {pay} FOR VALUES FROM ('{MONTHS[0]}') TO ('{MONTHS[1]}')",
            "feb": f"PARTITION OF {pay} FOR VALUES FROM ('{MONTHS[1]}') TO ('{MONTHS[3]}')"
            " PARTITION BY RANGE (paid)",
            "feb 1": f"PARTITION OF {q(PAYMENT + ' feb')}"
            f" FOR VALUES FROM ('{MONTHS[1]}') TO ('{MONTHS[2]}')",
            "feb 2": f"PARTITION OF {q(PAYMENT + ' feb')}"
            f" FOR VALUES FROM ('{MONTHS[2]}') TO ('{MONTHS[3]}')",
            "other": f"PARTITION OF {pay} DEFAULT",
        }
        for suffix, how in parts.items():
            conn.exec_driver_sql(f"CREATE TABLE {q(PAYMENT + ' ' + suffix)} {how}")
        # A partition's own index (pagila has one per partition).
        conn.exec_driver_sql(f"CREATE INDEX {q('jan cüstomer')} ON {q(PAYMENT + ' jan')} ({cid})")
        if layout == "each partition":
            for suffix, restrict in (("jan", ""), ("feb", " ON DELETE RESTRICT"), ("other", "")):
                conn.exec_driver_sql(
                    f"ALTER TABLE {q(PAYMENT + ' ' + suffix)} ADD CONSTRAINT"
                    f" {q(f'fk {suffix} cüstomer')} FOREIGN KEY ({cid})"
                    f" REFERENCES {cust} ({cid}){restrict}"
                )
        conn.exec_driver_sql(
            f"INSERT INTO {cust} (name) SELECT 'c' || g FROM generate_series(1, 40) g"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {pay} ({cid}, amount, paid) SELECT 1 + mod(g, 40), mod(g, 50) + 0.5,"
            " date '2006-12-20' + mod(g, 120) FROM generate_series(1, 600) g"
        )


class Payer(Unpaced):
    """The application, by customer name (keys pass through), with no pause
    between transactions: payments made, moved to another customer and
    refunded; customers of its own opened with a payment and closed."""

    def __init__(self, engine: Engine, layout: str) -> None:
        super().__init__()
        self.engine, self.cascade = engine, layout == "partitioned table"
        # Inheriting tables get their rows inserted into them, not their parent.
        self.into = _month if layout == "inheritance" else lambda paid: PAYMENT
        self.rng = random.Random(29)
        self.opened: list[str] = []
        with engine.connect() as conn:
            self.payments = _payments(conn)

    def _saved(self) -> Callable[[], None]:
        payments, opened = dict(self.payments), list(self.opened)

        def restore() -> None:
            self.payments, self.opened = payments, opened

        return restore

    def _one(self, n: int) -> None:
        q = lambda name: _q(self.engine, name)  # noqa: E731
        cust, cid, pay = q(CUSTOMER), q(CUSTOMER_ID), q(PAYMENT)
        key = f"(SELECT {cid} FROM {cust} WHERE name = :c)"
        name = f"c{self.rng.randint(1, 40)}"
        paid = f"2006-12-{self.rng.randint(20, 31)}" if n % 5 == 0 else None
        paid = paid or f"2007-0{self.rng.randint(1, 4)}-{self.rng.randint(10, 28)}"
        with self.engine.begin() as conn:
            kind = n % 6
            if kind == 5:
                if self.opened and n % 2:
                    gone = self.opened.pop(0)
                    if not self.cascade:
                        conn.execute(sa.text(f"DELETE FROM {pay} WHERE {cid} = {key}"), {"c": gone})
                    conn.execute(sa.text(f"DELETE FROM {cust} WHERE name = :c"), {"c": gone})
                    self.payments = {p: c for p, c in self.payments.items() if c != gone}
                else:
                    mine = f"own{n}"
                    conn.execute(sa.text(f"INSERT INTO {cust} (name) VALUES (:c)"), {"c": mine})
                    made = conn.execute(
                        sa.text(
                            f"INSERT INTO {q(self.into(paid))} ({cid}, amount, paid)"
                            f" SELECT {cid}, 1, :d FROM {cust} WHERE name = :c RETURNING payment_id"
                        ),
                        {"c": mine, "d": paid},
                    ).scalar_one()
                    self.opened.append(mine)
                    self.payments[made] = mine
            elif kind in (0, 1) or not self.payments:
                made = conn.execute(
                    sa.text(
                        f"INSERT INTO {q(self.into(paid))} ({cid}, amount, paid)"
                        f" VALUES ({key}, 9.5, :d) RETURNING payment_id"
                    ),
                    {"c": name, "d": paid},
                ).scalar_one()
                self.payments[made] = name
            elif kind in (2, 3):
                moved = self.rng.choice(sorted(self.payments))
                conn.execute(
                    sa.text(f"UPDATE {pay} SET {cid} = {key} WHERE payment_id = :p"),
                    {"c": name, "p": moved},
                )
                self.payments[moved] = name
            else:
                refunded = self.rng.choice(sorted(self.payments))
                conn.execute(sa.text(f"DELETE FROM {pay} WHERE payment_id = :p"), {"p": refunded})
                del self.payments[refunded]


def _payments(conn: Connection) -> dict[int, str]:
    """payment id -> its customer's name (an inner join: an orphan is missing)."""
    cust, cid, pay = _q(conn, CUSTOMER), _q(conn, CUSTOMER_ID), _q(conn, PAYMENT)
    rows = conn.exec_driver_sql(
        f"SELECT p.payment_id, c.name FROM {pay} p JOIN {cust} c USING ({cid})"
    ).all()
    return {int(p): str(c) for p, c in rows}


def _migrate(engine: Engine, phase: str, options: PkMigrationOptions) -> None:
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, CUSTOMER, options, phase=phase)  # type: ignore[arg-type]


WAYS = ["undo after the swap", "contract", "undo before the swap"]


def _paying(engine: Engine, layout: str, way: str, options: PkMigrationOptions) -> Payer:
    """The migration, to the swap (or the prepare) and on ``way``, while a
    :class:`Payer` writes; not one of its transactions failed."""
    payer = Payer(engine, layout)
    payer.start()
    try:
        _migrate(engine, "prepare" if way == "undo before the swap" else "swap", options)
        if way == "contract":
            _migrate(engine, "contract", options)
        else:
            with engine.connect() as conn:
                restore_pk_from_uuid7(conn, CUSTOMER)
                conn.commit()
    finally:
        payer.stop.set()
        payer.join()
    assert payer.failures == [], payer.failures[:5]
    return payer


@pytest.mark.parametrize(
    ("layout", "way"),
    [
        # The quick loop: the first layout undone after the swap; CI: every one.
        (LAYOUTS[0], WAYS[0]),
        *(
            pytest.param(layout, way, marks=pytest.mark.slow)
            for layout in LAYOUTS
            for way in WAYS
            if (layout, way) != (LAYOUTS[0], WAYS[0])
        ),
    ],
)
def test_a_partitioned_child_online_with_the_application_writing(
    postgresql_private_engine: Engine, layout: str, way: str
) -> None:
    engine = postgresql_private_engine
    _schema(engine, layout)
    with engine.connect() as conn:
        before = structure(conn)
    payer = _paying(engine, layout, way, PkMigrationOptions(online=True, batch_size=97))
    print(f"\n{layout}, {way}: {payer.done} transactions, longest {payer.longest:.3f} s")
    with engine.connect() as conn:
        count = conn.exec_driver_sql(f"SELECT count(*) FROM {_q(conn, PAYMENT)}").scalar_one()
        assert _payments(conn) == payer.payments
        assert count == len(payer.payments)  # no payment lost its customer
        after = structure(conn)
    if way != "contract":
        assert after == before
        return

    # Every piece over the new column under the name the old one had: the
    # same lines, but the types.
    def untyped(lines: list[str]) -> list[str]:
        return sorted(
            line.replace("'uuid'", "'integer'").replace("gen_random_uuid()", "")
            for line in lines
            if "_old" not in line and "nextval" not in line and "sqla_ids" not in line
        )

    changed = set(untyped(after)) ^ set(untyped(before))
    assert all(CUSTOMER_ID not in line or line.startswith("column") for line in changed), changed
    with engine.connect() as conn:
        kinds = conn.exec_driver_sql(
            "SELECT DISTINCT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid WHERE a.attname = %(c)s"
            " AND c.relnamespace = quote_ident(current_schema())::regnamespace"
            " AND c.relkind IN ('r', 'p')",
            {"c": CUSTOMER_ID},
        ).scalars()
        assert set(kinds) == {"uuid"}


@pytest.mark.parametrize(
    "layout", [LAYOUTS[0], *(pytest.param(x, marks=pytest.mark.slow) for x in LAYOUTS[1:])]
)
def test_two_versions_over_partitioned_children(
    postgresql_private_engine: Engine, layout: str
) -> None:
    """``versions`` with the child partitioned (or inheriting): *before* keeps its
    indexes on the old values through the swap and its undo -- built on each
    partition, dropped likewise -- and the old code reads the months' payments
    by old key through *before* after the swap."""
    engine = postgresql_private_engine
    _schema(engine, layout)
    with engine.connect() as conn:
        before = structure(conn)
        schema = str(conn.exec_driver_sql("SELECT current_schema()").scalar_one())
    prefix = f"{schema} v"
    options = PkMigrationOptions(online=True, versions=prefix, batch_size=97)
    with engine.connect() as conn:
        migrate_pk_to_uuid7(conn, CUSTOMER, options, phase="swap")
    with engine.connect() as conn:
        conn.exec_driver_sql(
            f"SET search_path = {_q(conn, prefix + '_before')}, {_q(conn, schema)}"
        )
        paid = conn.exec_driver_sql(
            f"SELECT count(*) FROM {_q(conn, PAYMENT)} WHERE {_q(conn, CUSTOMER_ID)} = 7"
        ).scalar_one()
        assert paid == 15  # every 40th of 600 payments, old key 7
        conn.rollback()
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, CUSTOMER)
    with engine.connect() as conn:
        assert structure(conn) == before


# The tables autovacuum crawls over (those with rows of their own), and where
# 20,000 more payments go: (table, first day, days).
_VACUUMED = {
    "inheritance": [
        (PAYMENT, "2006-12-20", 12),
        (PAYMENT + " jan", MONTHS[0], 31),
        (PAYMENT + " feb 1", MONTHS[1], 14),
        (PAYMENT + " feb", MONTHS[2], 14),
    ],
    "partitioned": [
        (PAYMENT + " jan", MONTHS[0], 31),
        (PAYMENT + " feb 1", MONTHS[1], 14),
        (PAYMENT + " feb 2", MONTHS[2], 14),
        (PAYMENT + " other", "2006-12-20", 12),
    ],
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_application_is_never_the_deadlock_victim_of_a_step_outlasting_autovacuum(
    postgresql_private_engine: Engine, caplog: pytest.LogCaptureFixture, layout: str
) -> None:
    """Autovacuum crawling over every partition (inheriting table) while the
    application pays, moves, refunds and closes, from the expand to the undo
    after the swap.

    CI (PostgreSQL 16) once met it: attaching the indexes of the partitions,
    a step of several statements, found a partition being vacuumed; its next
    attempt waited past the deadlock check (which cancels the vacuum) while
    holding the partitions' indexes attached before, and an application
    transaction that had written to the vacuumed partition and waited for one
    of those was PostgreSQL's deadlock victim. A step now waits out a vacuum
    first, holding nothing (a ``SHARE UPDATE EXCLUSIVE`` lock on the vacuumed
    tables, which the application's reads and writes never wait for), then
    runs under its own short lock timeout: the migration is the one that
    yields to the application, never the other way round. Before the fix,
    two runs in five failed with pagila's layout, and one in four of the
    other two layouts' runs."""
    engine = postgresql_private_engine
    require_autovacuum(engine)
    _schema(engine, layout)
    vacuumed_tables = _VACUUMED["inheritance" if layout == "inheritance" else "partitioned"]
    leaves = [table for table, _, _ in vacuumed_tables]
    with engine.begin() as conn:
        # Enough pages for a crawling vacuum to hold each table for seconds.
        for table, first, days in vacuumed_tables:
            conn.execute(
                sa.text(
                    f"INSERT INTO {_q(conn, table)} ({_q(conn, CUSTOMER_ID)}, amount, paid)"
                    " SELECT 1 + mod(g, 40), 1, CAST(:first AS date) + mod(g, :days)"
                    " FROM generate_series(1, 5000) g"
                ),
                {"first": first, "days": days},
            )
        crawling(conn, leaves, dead="amount = amount")
    with engine.connect() as conn:
        before = structure(conn)
    vacuumed(engine, leaves)
    options = PkMigrationOptions(online=True, batch_size=997, lock_timeout=0.2)
    with caplog.at_level("INFO", logger="alembic.sqla_ids.migration"):
        payer = _paying(engine, layout, WAYS[0], options)
    met = [r.getMessage() for r in caplog.records if "being vacuumed" in r.getMessage()]
    print(f"\n{payer.done} transactions, {len(met)} steps met autovacuum")
    with engine.connect() as conn:
        assert _payments(conn) == payer.payments
        assert structure(conn) == before
