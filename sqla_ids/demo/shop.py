"""The demo's shop schema with classic ``bigint`` keys, and its sample data.

Customers place orders, orders have lines: two foreign keys, one of them
from a table that is itself referenced, so the migration has to rewrite
references in the right order. Data is deterministic (seeded) so every run
shows the same shop.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

CUSTOMERS = "demo_customers"
ORDERS = "demo_orders"
ORDER_LINES = "demo_order_lines"
TABLES = (ORDER_LINES, ORDERS, CUSTOMERS)  # children first: the drop order

_FIRST = ["Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Tim"]
_LAST = ["Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson"]
_PRODUCTS = ["keyboard", "mouse", "monitor", "cable", "dock", "headset", "webcam", "lamp"]


def _bigint() -> sa.types.TypeEngine[int]:
    # SQLite only auto-increments an INTEGER PRIMARY KEY (the rowid alias).
    return sa.BigInteger().with_variant(sa.Integer, "sqlite")


def bigint_key() -> sa.Column[int]:
    """An auto-incrementing ``bigint`` primary key."""
    return sa.Column("id", _bigint(), primary_key=True, autoincrement=True)


def bigint_reference(name: str, target: str, constraint: str) -> sa.Column[int]:
    """A required, indexed ``bigint`` foreign key to ``target.id`` (``ON DELETE CASCADE``)."""
    return sa.Column(
        name,
        _bigint(),
        sa.ForeignKey(f"{target}.id", name=constraint, ondelete="CASCADE"),
        nullable=False,
        index=True,
    )


def shop_metadata() -> sa.MetaData:
    """The three tables of the shop, as they are before the migration."""
    metadata = sa.MetaData()
    sa.Table(
        CUSTOMERS,
        metadata,
        bigint_key(),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    sa.Table(
        ORDERS,
        metadata,
        bigint_key(),
        bigint_reference("customer_id", CUSTOMERS, "fk_demo_orders_customer"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("total_cents", sa.Integer, nullable=False),
    )
    sa.Table(
        ORDER_LINES,
        metadata,
        bigint_key(),
        bigint_reference("order_id", ORDERS, "fk_demo_lines_order"),
        sa.Column("product", sa.String(40), nullable=False),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("price_cents", sa.Integer, nullable=False),
    )
    return metadata


def sample_rows(
    customers: int, orders: int, *, now: datetime | None = None, seed: int = 7
) -> dict[str, list[dict[str, object]]]:
    """Deterministic rows for the three tables, with explicit ``id`` values."""
    rng = random.Random(seed)
    now = now or datetime.now(UTC).replace(microsecond=0)
    start = now - timedelta(days=90)
    customer_rows = [
        {
            "id": number,
            "name": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
            "created_at": start + timedelta(hours=number),
        }
        for number in range(1, customers + 1)
    ]
    order_rows: list[dict[str, object]] = []
    line_rows: list[dict[str, object]] = []
    step = (now - start - timedelta(days=1)) / max(1, orders)
    for number in range(1, orders + 1):
        total = 0
        for _ in range(rng.randint(1, 4)):
            quantity, price = rng.randint(1, 4), rng.randint(5, 300) * 100 - 1
            total += quantity * price
            line_rows.append(
                {
                    "id": len(line_rows) + 1,
                    "order_id": number,
                    "product": rng.choice(_PRODUCTS),
                    "quantity": quantity,
                    "price_cents": price,
                }
            )
        order_rows.append(
            {
                "id": number,
                "customer_id": rng.randint(1, customers),
                "created_at": start + timedelta(days=1) + step * number,
                "total_cents": total,
            }
        )
    return {CUSTOMERS: customer_rows, ORDERS: order_rows, ORDER_LINES: line_rows}
