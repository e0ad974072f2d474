"""The steps of ``sqla-ids demo``: build the shop, migrate it, use it, show it.

The order numbers are encrypted with a fixed, published sample key
(:data:`SAMPLE_KEY`), so that a number shown by the tour can be checked with
``sqla-ids order-number decode --key demo`` once ``SQLA_IDS_ORDER_KEY_DEMO``
and ``SQLA_IDS_ORDER_TWEAK_DEMO`` hold it: the tour prints the two ``export``
lines in full (a sample printed on the terminal, never logged; the same lines
are in docs/index.md, "The demo").

The tour works only on its own objects: its three tables, their mapping
tables, its sequence, its Alembic version table and its rows of the
migration state table. :func:`clean_up` removes them all, and the server-side
UUIDv7 function unless something else uses it (``sqla-ids demo --clean``).
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import URL, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from sqla_ids.cli.database import display_url
from sqla_ids.demo.alembic_env import (
    VERSION_TABLE,
    migration_source,
    upgrade_operations,
    write_environment,
)
from sqla_ids.demo.shop import CUSTOMERS, ORDER_LINES, ORDERS, TABLES, sample_rows, shop_metadata
from sqla_ids.dialects import for_dialect
from sqla_ids.identifiers import uuid7, uuid7_datetime
from sqla_ids.migration.core import state as migration_state
from sqla_ids.order_numbers import OrderNumberCodec, default_keyring, register_key
from sqla_ids.order_numbers.keyring import environment_variable_names
from sqla_ids.tools.report import format_table
from sqla_ids.types.order_number import FormattedOrderNumber
from sqla_ids.types.server_functions import remove_uuid7_function
from sqla_ids.types.uuid7 import UUIDv7

KEY_NAME = "demo"
"""Name of the demo's order-number key (``--key demo`` on the command line)."""
SAMPLE_KEY = "8D62B48C2008AD8A0479DC4AA8E20312"
"""SAMPLE key of the demo's order numbers (AES-128). Published: for this tour only,
never for real numbers."""
SAMPLE_TWEAK = "66E375FBEC5163"
"""SAMPLE FF3-1 tweak of the demo's order numbers (published, like :data:`SAMPLE_KEY`)."""
SEQUENCE = "demo_order_numbers"
Print = Callable[[str], None]


def _leftovers(engine: Engine) -> list[str]:
    """The demo's own tables an earlier run left, by name: never another
    table, however it is named (a user's ``demo_accounts`` stays)."""
    # By schema: PostgreSQL's default lists every table the search_path shows.
    with engine.connect() as conn:
        inspector = sa.inspect(conn)
        names = set(inspector.get_table_names(schema=inspector.default_schema_name))
        ours = {*TABLES, VERSION_TABLE, *(f"{table}_uuid7_map" for table in TABLES)}
        for table in TABLES:  # the mapping tables as the migration recorded them
            recorded = migration_state.load(conn, table)
            if recorded is not None:
                ours.add(recorded[1].mapping_table)
    return sorted(names & ours)


def start_fresh(engine: Engine, out: Print) -> None:
    """Drop what an earlier run left (tables, mapping tables, counters), saying so."""
    found = _leftovers(engine)
    if found:
        out(f"  found an earlier demo ({', '.join(found)}): starting fresh")
    _drop(engine, found)


def clean_up(engine: Engine, out: Print) -> None:
    """Remove everything the demo made: its tables, mapping tables, sequence,
    Alembic version table and migration records, and the server-side UUIDv7
    function unless something else uses it (the function is shared)."""
    found = _leftovers(engine)
    _drop(engine, found)
    with engine.begin() as conn:
        kept = remove_uuid7_function(conn)
    out(f"  removed {', '.join(found)}" if found else "  no demo tables found")
    out("  and the demo's order-number sequence and migration records")
    if kept:
        out(f"  kept the UUIDv7 function, still used by: {'; '.join(kept)}")


def _drop(engine: Engine, found: list[str]) -> None:
    with engine.begin() as conn:
        # Every name by its schema, the one the tour works in: an unqualified
        # name missing there would resolve further down PostgreSQL's
        # search_path, to another schema's object.
        schema = sa.inspect(conn).default_schema_name
        metadata = sa.MetaData(schema=schema)
        metadata.reflect(conn, only=found)
        metadata.drop_all(conn)
        for_dialect(conn.dialect).order_number_drop_sequence(conn, SEQUENCE, schema)
        if sa.inspect(conn).has_table(migration_state.STATE_TABLE):
            # The migration records what it did per table (for downgrade); the
            # tables are gone, so are their records.
            for table in TABLES:
                migration_state.forget(conn, table)


def build_shop(engine: Engine, customers: int, orders: int, out: Print) -> dict[str, int]:
    """Create the shop with bigint keys and fill it; return row counts."""
    rows = sample_rows(customers, orders)
    with engine.begin() as conn:
        shop_metadata().create_all(conn)
        tables = shop_metadata().tables
        for name in reversed(TABLES):  # parents first
            conn.execute(tables[name].insert(), rows[name])
    counts = {name: len(rows[name]) for name in TABLES}
    out(
        f"  {counts[CUSTOMERS]} customers, {counts[ORDERS]} orders, "
        f"{counts[ORDER_LINES]} order lines, keys: bigint"
    )
    return counts


def totals_by_customer_name(engine: Engine) -> dict[str, int]:
    """Sum of order lines per customer name, through whatever the keys are now."""
    query = sa.text(
        f"SELECT c.name, SUM(l.quantity * l.price_cents) FROM {CUSTOMERS} c "
        f"JOIN {ORDERS} o ON o.customer_id = c.id JOIN {ORDER_LINES} l ON l.order_id = o.id "
        "GROUP BY c.name"
    )
    with engine.connect() as conn:
        return {name: int(total) for name, total in conn.execute(query)}


def migrate(engine: Engine, batch_size: int, out: Print) -> None:
    """Run the demo's Alembic migration (UUIDv7 keys + order numbers)."""
    operations = upgrade_operations(migration_source(key_name=KEY_NAME, batch_size=batch_size))
    out("  versions/0001_uuid7_keys.py, upgrade():")
    for operation in operations:
        out(f"    {operation}")
    with tempfile.TemporaryDirectory(prefix="sqla_ids_demo_") as folder:
        config = write_environment(Path(folder), key_name=KEY_NAME, batch_size=batch_size)
        # A connection outside any transaction: Alembic then owns it, which the
        # migration needs on MariaDB (autocommit blocks around implicit DDL commits).
        with engine.connect() as conn:
            config.attributes["connection"] = conn
            command.upgrade(config, "head")
    out("  alembic upgrade head: done")


class Base(DeclarativeBase):
    """The shop's ORM classes, as they are after the migration."""


class Customer(Base):
    """A customer, keyed by UUIDv7 now."""

    __tablename__ = CUSTOMERS
    id: Mapped[uuid.UUID] = mapped_column(UUIDv7, primary_key=True, default=uuid7)
    name: Mapped[str] = mapped_column(sa.String(80))
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))


class Order(Base):
    """An order: UUIDv7 key, and a customer-facing number drawn from a sequence."""

    __tablename__ = ORDERS
    id: Mapped[uuid.UUID] = mapped_column(UUIDv7, primary_key=True, default=uuid7)
    customer_id: Mapped[uuid.UUID] = mapped_column(UUIDv7, sa.ForeignKey(Customer.id))
    created_at: Mapped[datetime] = mapped_column(sa.DateTime(timezone=True))
    total_cents: Mapped[int] = mapped_column(sa.Integer)
    number: Mapped[str] = mapped_column(
        FormattedOrderNumber(KEY_NAME, sequence=SEQUENCE, check_constraint=False)
    )


class OrderLine(Base):
    """One line of an order."""

    __tablename__ = ORDER_LINES
    id: Mapped[uuid.UUID] = mapped_column(UUIDv7, primary_key=True, default=uuid7)
    order_id: Mapped[uuid.UUID] = mapped_column(UUIDv7, sa.ForeignKey(Order.id))
    product: Mapped[str] = mapped_column(sa.String(40))
    quantity: Mapped[int] = mapped_column(sa.Integer)
    price_cents: Mapped[int] = mapped_column(sa.Integer)


def add_orders(engine: Engine, count: int, out: Print) -> list[uuid.UUID]:
    """Insert ``count`` new orders through the ORM; return their ids."""
    with Session(engine) as session:
        customers = session.scalars(sa.select(Customer).order_by(Customer.id).limit(count)).all()
        orders = [
            Order(customer_id=customer.id, created_at=datetime.now(UTC), total_cents=2 * 4999)
            for customer in customers
        ]
        session.add_all(orders)
        session.flush()  # ids come from the client-side default, numbers from the sequence
        session.add_all(
            OrderLine(order_id=order.id, product="keyboard", quantity=2, price_cents=4999)
            for order in orders
        )
        session.commit()
        new = [order.id for order in orders]
    out(f"  inserted {len(new)} orders through the ORM: ids and numbers filled in by defaults")
    return new


def show_before(engine: Engine, out: Print) -> None:
    """The first orders, as bigint rows."""
    query = sa.text(
        f"SELECT o.id, o.customer_id, o.created_at, o.total_cents FROM {ORDERS} o "
        "ORDER BY o.id LIMIT 5"
    )
    with engine.connect() as conn:
        rows = [(i, c, str(t)[:16], f"{cents / 100:.2f}") for i, c, t, cents in conn.execute(query)]
    out(format_table(("id", "customer_id", "created_at", "total"), rows, indent="  "))


def show_after(engine: Engine, new_ids: Sequence[uuid.UUID], out: Print) -> str:
    """The same first orders and the new ones: UUIDv7 ids, their timestamps, numbers.

    Returns the number of the last order shown.
    """
    codec = OrderNumberCodec(KEY_NAME)
    orders = sa.table(
        ORDERS,
        sa.column("id", UUIDv7()),
        sa.column("id_old"),
        sa.column("number"),
        sa.column("total_cents"),
    )
    base = sa.select(orders.c.id, orders.c.id_old, orders.c.number, orders.c.total_cents)
    with engine.connect() as conn:
        old = conn.execute(base.order_by(orders.c.id).limit(5)).all()
        new = conn.execute(base.where(orders.c.id.in_(list(new_ids))).order_by(orders.c.id)).all()
    rows = [
        (
            key,
            uuid7_datetime(key).strftime("%Y-%m-%d %H:%M"),
            "" if old_key is None else old_key,
            number,
            codec.decode(number),
            f"{cents / 100:.2f}",
        )
        for key, old_key, number, cents in [*old, *new]
    ]
    header = ("id (UUIDv7)", "created (from id)", "id_old", "number", "seq", "total")
    out(format_table(header, rows, indent="  "))
    return str(rows[-1][3])


def show_decode_command(number: str, out: Print) -> None:
    """How to check ``number`` with ``sqla-ids order-number decode``, and what it prints.

    The sample key and tweak are printed whole, as ``export`` lines to copy:
    they are published (docs/index.md), for this tour only.
    """
    key_variable, tweak_variable = environment_variable_names(KEY_NAME)
    codec = OrderNumberCodec(KEY_NAME)
    out(
        f"  the numbers use the demo's published SAMPLE key {KEY_NAME!r} (for this tour "
        "only, never for real numbers). To check one yourself:"
    )
    out(f"    export {key_variable}={SAMPLE_KEY}  # demo SAMPLE key")
    out(f"    export {tweak_variable}={SAMPLE_TWEAK}  # demo SAMPLE tweak")
    out(f"    sqla-ids order-number decode --key {KEY_NAME} {number}")
    out("  which prints the number and its sequence value:")
    out(f"    {codec.normalize(number)}\t{codec.decode(number)}")


class _TourNotes(logging.Handler):
    """sqla_ids' warnings during the migration, as ``note:`` lines of the tour,
    each said once: a note that differs only by the demo table it names
    (``demo_orders.id gets no server default: …``) names them all in one line."""

    def __init__(self, out: Print) -> None:
        super().__init__(logging.WARNING)
        self.out = out
        self.notes: dict[str, list[str]] = {}  # note without its table -> tables

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        tables = [table for table in TABLES if message.startswith(f"{table}.")]
        if tables:
            message = message.removeprefix(f"{tables[0]}.")
        self.notes.setdefault(message, []).extend(tables)

    def flush(self) -> None:
        """Say the notes gathered so far."""
        for message, tables in self.notes.items():
            named = sorted(set(tables), key=TABLES[::-1].index)
            self.out(f"  note ({', '.join(named)}): {message}" if named else f"  note: {message}")
        self.notes.clear()


def _tour_logging(out: Print) -> tuple[logging.Logger, _TourNotes]:
    """Warnings as tour lines, and no raw log lines: Alembic's INFO lines stay off."""
    handler = _TourNotes(out)
    logger = logging.getLogger("alembic.sqla_ids")
    logger.addHandler(handler)
    return logger, handler


def run_tour(url: str | URL, *, customers: int, orders: int, out: Print = print) -> None:
    """Run the whole demo against ``url``."""
    engine = sa.create_engine(url)
    logger, handler = _tour_logging(out)
    register_key(KEY_NAME, SAMPLE_KEY, SAMPLE_TWEAK)
    try:
        out(f"\n== 1. a shop with bigint keys ({display_url(engine.url)})")
        start_fresh(engine, out)
        build_shop(engine, customers, orders, out)
        show_before(engine, out)
        before = totals_by_customer_name(engine)

        out("\n== 2. alembic migration: keys to UUIDv7 (old keys kept), order numbers added")
        migrate(engine, batch_size=max(50, orders // 4), out=out)
        handler.flush()

        out("\n== 3. new orders through the ORM")
        new_ids = add_orders(engine, 3, out)

        out("\n== 4. after: ids are UUIDv7 in creation order, numbers decode to the sequence")
        last_number = show_after(engine, new_ids, out)
        after = totals_by_customer_name(engine)
        new_total = 3 * 2 * 4999
        unchanged = sum(after.values()) - new_total == sum(before.values())
        out(
            f"\n  relationships kept: revenue per customer through the new keys "
            f"{'matches' if unchanged else 'DOES NOT MATCH'} the bigint keys "
            f"({len(before)} customers)"
        )
        if not unchanged:
            raise RuntimeError("the migrated shop does not add up; please report this")

        out("\n== 5. check an order number yourself")
        show_decode_command(last_number, out)
    finally:
        handler.flush()
        logger.removeHandler(handler)
        default_keyring.forget(KEY_NAME)
        engine.dispose()
