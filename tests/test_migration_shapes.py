"""Every foreign-key shape on SQLite, PostgreSQL and MariaDB, and the refusals.

One schema holds them all: a self-reference with ``ON DELETE SET NULL``, a
child whose composite primary key contains the reference (``ON DELETE
CASCADE``), a unique reference (deferrable on PostgreSQL), a composite FK to
a composite unique key, a plain column without FK (``extra_references``), and
indexes on the referencing columns. The migration must keep every relationship,
constraint and index; the downgrade must give back the original database.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from sqla_ids.identifiers import uuid7_datetime
from sqla_ids.migration import migrate_pk_to_uuid7, plan_pk_migration, restore_pk_from_uuid7


def _schema(metadata: sa.MetaData, engine: Engine, p: str) -> dict[str, sa.Table]:
    pg = engine.dialect.name == "postgresql"
    customer = sa.Table(
        f"{p}customer",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(40), nullable=False),
    )
    order = sa.Table(
        f"{p}order",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("customer_id", sa.Integer, sa.ForeignKey(customer.c.id), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True)),
        sa.Column("parent_id", sa.Integer),
        sa.Column("note", sa.String(40)),
        sa.ForeignKeyConstraint(
            ["parent_id"], [f"{p}order.id"], name=f"{p}fk_parent", ondelete="SET NULL"
        ),
        sa.UniqueConstraint("customer_id", "id", name=f"{p}uq_customer_order"),
        sa.Index(f"{p}ix_parent", "parent_id"),
    )
    line = sa.Table(
        f"{p}line",
        metadata,
        sa.Column("order_id", sa.Integer, nullable=False),
        sa.Column("line_no", sa.Integer, nullable=False),
        sa.Column("sku", sa.String(20), nullable=False),
        sa.PrimaryKeyConstraint("order_id", "line_no", name=f"{p}pk_line"),
        # A partial index whose definition holds '%' (PostgreSQL; plain index elsewhere).
        sa.Index(f"{p}ix_line_sku", "order_id", postgresql_where=sa.text("sku LIKE 's%'")),
        sa.ForeignKeyConstraint(
            ["order_id"],
            [order.c.id],
            name=f"{p}fk_line_order",
            ondelete="CASCADE",
            onupdate="CASCADE",
        ),
    )
    shipment = sa.Table(
        f"{p}shipment",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("order_id", sa.Integer, nullable=False),
        sa.UniqueConstraint("order_id", name=f"{p}uq_shipment_order"),
        sa.ForeignKeyConstraint(
            ["order_id"],
            [order.c.id],
            name=f"{p}fk_shipment_order",
            **({"deferrable": True, "initially": "DEFERRED"} if pg else {}),
        ),
    )
    invoice = sa.Table(
        f"{p}invoice",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("customer_id", sa.Integer, nullable=False),
        sa.Column("order_id", sa.Integer),
        sa.ForeignKeyConstraint(
            ["customer_id", "order_id"],
            [order.c.customer_id, order.c.id],
            name=f"{p}fk_invoice_order",
        ),
        sa.Index(f"{p}ix_invoice_order", "order_id", "customer_id"),
    )
    audit = sa.Table(
        f"{p}audit",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("order_ref", sa.Integer),
        sa.Column("what", sa.String(20)),
    )
    metadata.create_all(engine)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(sa.insert(customer), [{"id": i, "name": f"c{i}"} for i in range(1, 6)])
        orders = []
        for i in range(1, 41):
            # created_at goes back now and then: the running maximum keeps key order.
            when = start + timedelta(minutes=i if i % 7 else i - 10)
            orders.append(
                {
                    "id": i * 3,
                    "customer_id": i % 5 + 1,
                    "created_at": when if i % 11 else None,
                    "parent_id": (i - 1) * 3 if i % 4 == 0 else None,
                    "note": f"o{i}",
                }
            )
        conn.execute(sa.insert(order), orders)
        conn.execute(
            sa.insert(line),
            [
                {"order_id": o["id"], "line_no": n, "sku": f"s{o['id']}-{n}"}
                for o in orders
                for n in (1, 2)
            ],
        )
        conn.execute(
            sa.insert(shipment),
            [{"id": k, "order_id": o["id"]} for k, o in enumerate(orders[:25], 1)],
        )
        conn.execute(
            sa.insert(invoice),
            [
                {"id": k, "customer_id": o["customer_id"], "order_id": o["id"] if k % 5 else None}
                for k, o in enumerate(orders, 1)
            ],
        )
        conn.execute(
            sa.insert(audit),
            [
                {"id": k, "order_ref": o["id"] if k % 3 else None, "what": f"a{k}"}
                for k, o in enumerate(orders, 1)
            ],
        )
    return {"customer": customer, "order": order, "line": line, "shipment": shipment,
            "invoice": invoice, "audit": audit}  # fmt: skip


def _relations(engine: Engine, p: str) -> dict[str, list[Any]]:
    """Each relationship as payload pairs (notes, SKUs...), independent of key values."""
    q = engine.dialect.identifier_preparer.quote
    o = q(f"{p}order")
    queries = {
        "parent": f"SELECT c.note, pa.note FROM {o} c LEFT JOIN {o} pa ON pa.id = c.parent_id",
        "line": f"SELECT o.note, l.line_no, l.sku FROM {q(p + 'line')} l"
        f" JOIN {o} o ON o.id = l.order_id",
        "shipment": f"SELECT o.note, s.id FROM {q(p + 'shipment')} s"
        f" JOIN {o} o ON o.id = s.order_id",
        "invoice": f"SELECT i.id, o.note FROM {q(p + 'invoice')} i LEFT JOIN {o} o"
        " ON o.id = i.order_id AND o.customer_id = i.customer_id",
        "audit": f"SELECT a.what, o.note FROM {q(p + 'audit')} a"
        f" LEFT JOIN {o} o ON o.id = a.order_ref",
    }
    with engine.connect() as conn:
        return {
            k: sorted(map(tuple, conn.exec_driver_sql(v)), key=repr) for k, v in queries.items()
        }


def _schema_snapshot(engine: Engine, p: str) -> dict[str, Any]:
    inspector = sa.inspect(engine)
    snap: dict[str, Any] = {}
    with engine.connect() as conn:
        for t in sorted(n for n in inspector.get_table_names() if n.startswith(p)):
            cols = sorted(c["name"] for c in inspector.get_columns(t))
            rows = conn.execute(sa.select(*map(sa.column, cols)).select_from(sa.table(t)))
            snap[t] = (
                sorted(map(tuple, rows), key=repr),
                sorted(
                    (c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(t)
                ),
                inspector.get_pk_constraint(t),
                sorted(map(repr, inspector.get_foreign_keys(t))),
                sorted(map(repr, inspector.get_indexes(t))),
                sorted(map(repr, inspector.get_unique_constraints(t))),
            )
    return snap


# quick cover: the [postgresql] and [sqlite] cases (the shapes' plan is the
# engine's own); MariaDB's offline migration and restore of a reference inside
# a child's primary key, cascades and unique keys: tests/test_migration_refusals.py::
#   test_fk_to_a_child_key_is_refused[mariadb] (the way out followed),
#   tests/test_migration_mariadb_offline.py::test_views_over_views_recreated_bases_first
@pytest.mark.slow_on("mariadb")
def test_every_fk_shape_round_trip(engine: Engine, metadata: sa.MetaData) -> None:
    p = f"s{secrets.token_hex(2)}_"
    tables = _schema(metadata, engine, p)
    original = _schema_snapshot(engine, p)
    relations = _relations(engine, p)
    inspector = sa.inspect(engine)
    fks_before = {
        t: inspector.get_foreign_keys(f"{p}{t}") for t in ("order", "line", "shipment", "invoice")
    }
    with engine.connect() as conn:
        plan = plan_pk_migration(conn, f"{p}order", extra_references=[(f"{p}audit", "order_ref")])
        text = plan.describe()
        assert f"{p}fk_invoice_order" in text and f"{p}audit.order_ref" in text
        conn.rollback()
        migrate_pk_to_uuid7(
            conn,
            f"{p}order",
            timestamp_column="created_at",
            extra_references=[(f"{p}audit", "order_ref")],
            batch_size=7,
            seed=1,
        )
        conn.commit()
    assert _relations(engine, p) == relations
    inspector = sa.inspect(engine)
    for t, before in fks_before.items():
        after = inspector.get_foreign_keys(f"{p}{t}")
        assert sorted(map(repr, after)) == sorted(map(repr, before)), t
    pk_cols = inspector.get_pk_constraint(f"{p}line")["constrained_columns"]
    assert pk_cols == ["order_id", "line_no"]
    with engine.connect() as conn:
        o = tables["order"]
        rows = conn.execute(
            sa.select(
                sa.column("id", sa.Uuid()),
                sa.column("id_old"),
                sa.column("created_at", sa.DateTime(timezone=True)),
            )
            .select_from(sa.table(o.name))
            .order_by(sa.column("id"))
        ).all()
        assert [r.id_old for r in rows] == sorted(r.id_old for r in rows)
        # The key's timestamp follows created_at (running maximum) where it is set.
        running = datetime.min.replace(tzinfo=UTC)
        for row in rows:
            if row.created_at is not None:
                created = (
                    row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
                )
                running = max(running, created)
            assert uuid7_datetime(row.id) >= running
        # ON DELETE CASCADE still works through the new keys.
        first = rows[0].id
        conn.rollback()
        with conn.begin() as transaction:
            q = engine.dialect.identifier_preparer.quote
            key = sa.bindparam("key", first, type_=sa.Uuid())
            for table, column in (("invoice", "order_id"), ("shipment", "order_id")):
                conn.execute(
                    sa.text(f"DELETE FROM {q(p + table)} WHERE {column} = :key").bindparams(key)
                )
            conn.execute(
                sa.text(
                    f"UPDATE {q(o.name)} SET parent_id = NULL WHERE parent_id = :key"
                ).bindparams(key)
            )
            conn.execute(sa.text(f"DELETE FROM {q(o.name)} WHERE id = :key").bindparams(key))
            left = conn.execute(
                sa.text(f"SELECT count(*) FROM {q(p + 'line')} WHERE order_id = :key").bindparams(
                    key
                )
            ).scalar()
            # SQLite enforces FKs only with PRAGMA foreign_keys=ON (off here): no cascade.
            assert left == (2 if engine.dialect.name == "sqlite" else 0)
            transaction.rollback()
    with engine.connect() as conn:
        restore_pk_from_uuid7(conn, f"{p}order")
        conn.commit()
    assert _schema_snapshot(engine, p) == original
