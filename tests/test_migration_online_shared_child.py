"""Two parents sharing a child, migrated online one after the other, each
swapped before either is contracted -- the deploy sequence of a revision that
swaps several tables and a later one that contracts them -- while an
application writes to all three tables.

Each migration names the child's new column, and after its swap the child's
old values, after itself, so the second does not collide with the first; each
migration's triggers on the child leave the other's columns alone, so
MariaDB's refusal of ``UPDATE`` triggers does not apply to them. Names carry a
double quote, a backtick, an apostrophe, spaces and a non-ASCII letter.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from functools import partial

import pytest
import requirements as requires
import sqlalchemy as sa
from online_app import CURRENT_SCHEMA, one_transaction, running
from sqlalchemy.engine import Engine

from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7
from sqla_ids.migration.core.state import steps

pytestmark = pytest.mark.slow

A, B = 'cust"omer', "pro`duct ü"
CHILD = "order line's"
REF = {A: 'cust"omer id', B: "pro`duct id"}
SEED = 100


def _tables() -> tuple[sa.Table, sa.Table, sa.Table]:
    md = sa.MetaData()
    a, b = (
        sa.Table(
            name,
            md,
            sa.Column("id", sa.BigInteger, primary_key=True),
            sa.Column("name", sa.String(40), nullable=False, unique=True),
        )
        for name in (A, B)
    )
    child = sa.Table(
        CHILD,
        md,
        sa.Column("id", sa.BigInteger, primary_key=True),
        sa.Column(REF[A], sa.BigInteger, sa.ForeignKey(a.c.id, ondelete="CASCADE"), nullable=False),
        sa.Column(REF[B], sa.BigInteger, sa.ForeignKey(b.c.id), nullable=True),
        sa.Column("label", sa.String(40), nullable=False, unique=True),
    )
    sa.Index("by a", child.c[REF[A]], child.c.label)
    return a, b, child


def _light(table: sa.Table) -> sa.TableClause:
    """``table`` without column types: the application passes keys through."""
    return sa.table(table.name, *(sa.column(c.name) for c in table.columns))


@pytest.fixture
def shop(online_private_engine: Engine) -> Engine:
    engine = online_private_engine
    a, b, child = _tables()
    assert a.metadata is not None
    a.metadata.create_all(engine)
    with engine.begin() as conn:
        for parent in (a, b):
            conn.execute(parent.insert(), [{"name": f"p{n}"} for n in range(SEED)])
        ids = {t.name: dict(conn.execute(sa.select(t.c.name, t.c.id)).all()) for t in (a, b)}
        conn.execute(
            child.insert(),
            [
                {
                    REF[A]: ids[A][f"p{n % SEED}"],
                    REF[B]: None if n % 7 == 0 else ids[B][f"p{(n * 3) % SEED}"],
                    "label": f"c{n}",
                }
                for n in range(500)
            ],
        )
    return engine


class _App(threading.Thread):
    """New parents with a child of both, children added, moved to other parents
    and read by label: each its own transaction; ``expected`` is what the
    database must say afterwards (label -> names of its two parents)."""

    def __init__(
        self, engine: Engine, expected: dict[str, tuple[str, str | None]], prefix: str
    ) -> None:
        super().__init__(daemon=True)
        self.engine, self.expected, self.prefix = engine, expected, prefix
        a, b, child = _tables()
        self.a, self.b, self.child = _light(a), _light(b), _light(child)
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.steps = 0
        self.rng = random.Random(5)

    def _key(self, table: sa.TableClause, name: str) -> sa.ScalarSelect[object]:
        return sa.select(table.c.id).where(table.c.name == name).scalar_subquery()

    def run(self) -> None:
        # Stopped, it still makes the 51 steps the checks need, at any pace.
        while not (self.stop.is_set() and self.steps > 50):
            self.steps += 1
            try:
                one_transaction(partial(self._transaction, self.steps), self._saved)
            except sa.exc.DBAPIError as error:
                self.failures.append(f"{self.steps}: {str(error.orig).splitlines()[0]}")
            time.sleep(0.002)

    def _transaction(self, n: int) -> None:
        with self.engine.begin() as conn:
            self._one(conn, n)

    def _saved(self) -> Callable[[], None]:
        expected = dict(self.expected)

        def restore() -> None:
            self.expected = expected

        return restore

    def _one(self, conn: sa.Connection, n: int) -> None:
        label, pa, pb = f"{self.prefix}{n}", f"p{self.rng.randrange(SEED)}", None
        if n % 4 == 0:  # new parents, and a child of both
            pa = pb = f"new {self.prefix}{n}"
            conn.execute(self.a.insert().values(name=pa))
            conn.execute(self.b.insert().values(name=pb))
        elif n % 4 == 1:
            pb = f"p{self.rng.randrange(SEED)}"
        elif n % 4 == 2:  # a child moves to other parents
            label = self.rng.choice(sorted(self.expected))
            pb = f"p{self.rng.randrange(SEED)}"
            conn.execute(
                self.child.update()
                .where(self.child.c.label == label)
                .values({REF[A]: self._key(self.a, pa), REF[B]: self._key(self.b, pb)})
            )
            self.expected[label] = (pa, pb)
            return
        else:
            conn.execute(
                sa.select(self.child.c.label).where(self.child.c[REF[A]] == self._key(self.a, pa))
            ).all()
            return
        values = {"label": label, REF[A]: self._key(self.a, pa)}
        values[REF[B]] = self._key(self.b, pb) if pb else None
        conn.execute(self.child.insert().values(values))
        self.expected[label] = (pa, pb)


def _state(engine: Engine) -> tuple[dict[str, tuple[str, str | None]], dict[str, str]]:
    """Every child's parents by name, and the key columns' types."""
    a, b, child = (_light(t) for t in _tables())
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(child.c.label, a.c.name, b.c.name)
            .join(a, a.c.id == child.c[REF[A]])
            .outerjoin(b, b.c.id == child.c[REF[B]])
        ).all()
        # (information_schema: SQLAlchemy's MariaDB reflection cannot parse a
        # foreign key whose column name holds a backtick)
        here = CURRENT_SCHEMA[requires.database_name(engine)]
        columns = conn.execute(
            sa.text(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                f" WHERE table_schema = {here} AND table_name IN :t"
            ).bindparams(sa.bindparam("t", expanding=True)),
            {"t": [A, B, CHILD]},
        ).all()
    types = {f"{t}.{c}": str(kind).lower() for t, c, kind in columns}
    return {label: (x, y) for label, x, y in rows}, types


def test_two_parents_of_one_child_swapped_then_undone_and_contracted_out_of_order(
    shop: Engine,
) -> None:
    expected, before_types = _state(shop)
    opts = PkMigrationOptions(online=True, batch_size=53)
    app = _App(shop, expected, "up")
    with running(app, app.stop), shop.connect() as conn:
        for phase in ("prepare", "swap"):  # both prepared, then both swapped
            for parent in (A, B):
                migrate_pk_to_uuid7(conn, parent, opts, phase=phase)  # type: ignore[arg-type]
    assert app.failures == [], app.failures[:5]
    found, types = _state(shop)
    assert found == expected
    for column in (f"{A}.id", f"{B}.id", f"{CHILD}.{REF[A]}", f"{CHILD}.{REF[B]}"):
        assert types[column] == "uuid", column
    # Each migration keeps its own copy of the child's old values.
    parked = [c for c in types if c.startswith(f"{CHILD}.sqla_ids_old_")]
    assert len(parked) == 2, types

    # The first one undone while the second stays swapped, then the second
    # contracted: neither order of the deploy sequence is forced.
    app = _App(shop, expected, "down")
    with running(app, app.stop), shop.connect() as conn:
        restore_pk_from_uuid7(conn, A)
        migrate_pk_to_uuid7(conn, B, opts, phase="contract")
    assert app.failures == [], app.failures[:5]
    assert app.steps > 50
    found, types = _state(shop)
    assert found == expected
    assert len(expected) > 500
    assert types[f"{A}.id"] == before_types[f"{A}.id"]
    assert types[f"{CHILD}.{REF[A]}"] == before_types[f"{CHILD}.{REF[A]}"]
    assert types[f"{B}.id"] == "uuid"
    assert sorted(c for c in types if c.startswith(f"{CHILD}.")) == sorted(
        c for c in before_types if c.startswith(f"{CHILD}.")
    )
    with shop.connect() as conn:
        recorded = steps(conn)
    assert A not in recorded and recorded[B] == "done"
