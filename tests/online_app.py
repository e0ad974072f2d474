"""The application of the online-migration tests: a writer thread and the final check.

The writer inserts parents and children, moves children to other parents,
changes an old key (ON UPDATE CASCADE) and deletes parents (ON DELETE CASCADE /
SET NULL); its statements never name a key's type, so they work before and
after the swap, as application code must (docs/migration.md).
"""

from __future__ import annotations

import random
import threading
import time

import sqlalchemy as sa
from sqlalchemy.engine import Engine

SHOPS = 300


class Writer(threading.Thread):
    """The application: mixed writes, each its own transaction, all recorded."""

    def __init__(
        self, engine: Engine, key_updates: bool, prefix: str = "", shops: str = '"shop s"'
    ) -> None:
        super().__init__(daemon=True)
        self.prefix = prefix
        self.shops = shops  # the parent table, quoted for the database
        self.engine = engine
        self.key_updates = key_updates
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.statements = 0
        self.item_shop: dict[str, str | None] = {}  # label -> shop name it must point at
        self.review_shop: dict[str, str | None] = {}
        self.deleted: set[str] = set()
        self.rekeyed: set[str] = set()  # shops whose old key the writer changed
        self.rng = random.Random(7)

    def _shop(self) -> str:
        return f"s{self.rng.randint(1, SHOPS)}"

    def _live_shop(self) -> str:
        while True:
            shop = self._shop()
            if shop not in self.deleted:
                return shop

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                self._one(n, f"{self.prefix}{n}")
                self.statements += 1
            except sa.exc.DBAPIError as error:
                self.failures.append(f"{n}: {str(error.orig).splitlines()[0]}")
            time.sleep(0.002)

    def _one(self, n: int, tag: str) -> None:
        shop_of = f"SELECT id FROM {self.shops} WHERE name = :s"
        action = n % 7
        with self.engine.begin() as conn:
            if action == 0:
                conn.execute(
                    sa.text(f"INSERT INTO {self.shops} (name) VALUES (:s)"), {"s": f"new{tag}"}
                )
                conn.execute(
                    sa.text(f"INSERT INTO item (shop_id, label) VALUES (({shop_of}), :l)"),
                    {"s": f"new{tag}", "l": f"w{tag}"},
                )
                self.item_shop[f"w{tag}"] = f"new{tag}"
            elif action in (1, 2):
                shop = self._live_shop()
                conn.execute(
                    sa.text(f"INSERT INTO item (shop_id, label) VALUES (({shop_of}), :l)"),
                    {"s": shop, "l": f"w{tag}"},
                )
                self.item_shop[f"w{tag}"] = shop
            elif action == 3:  # a child moves to another parent
                label = f"i{self.rng.randint(1, 2000)}"
                shop = self._live_shop()
                moved = conn.execute(
                    sa.text(f"UPDATE item SET shop_id = ({shop_of}) WHERE label = :l"),
                    {"s": shop, "l": label},
                ).rowcount
                if moved:
                    self.item_shop[label] = shop
            elif action == 4:
                shop = self._live_shop()
                conn.execute(
                    sa.text(f"INSERT INTO review (shop_id, body) VALUES (({shop_of}), :b)"),
                    {"s": shop, "b": f"w{tag}"},
                )
                self.review_shop[f"w{tag}"] = shop
            elif action == 5 and n % 5 == 0 and len(self.deleted) < SHOPS // 2:
                # a parent goes: cascade / set null (half of them at most, so
                # that _live_shop always finds one)
                shop = self._live_shop()
                conn.execute(sa.text(f"DELETE FROM {self.shops} WHERE name = :s"), {"s": shop})
                self.deleted.add(shop)
            elif action == 6 and self.key_updates:  # the old key itself changes
                # (to a negative value: MariaDB's AUTO_INCREMENT would follow a larger one)
                shop = self._live_shop()
                conn.execute(
                    sa.text(f"UPDATE {self.shops} SET id = -id WHERE name = :s AND id > 0"),
                    {"s": shop},
                )
                self.rekeyed.add(shop)
            else:
                conn.execute(
                    sa.text(f"SELECT note FROM {self.shops} WHERE id = ({shop_of})"),
                    {"s": self._shop()},
                ).all()


def check_relations(engine: Engine, writer: Writer) -> None:
    """Every relationship the writer made (and the seed data's) holds under the new keys."""
    assert writer.failures == [], writer.failures[:5]
    assert writer.statements > 50
    s = writer.shops
    with engine.connect() as conn:
        items = dict(
            conn.exec_driver_sql(
                f"SELECT i.label, s.name FROM item i JOIN {s} s ON s.id = i.shop_id"
            ).all()
        )
        reviews = dict(
            conn.exec_driver_sql(
                f"SELECT r.body, s.name FROM review r LEFT JOIN {s} s ON s.id = r.shop_id"
            ).all()
        )
        orphans = conn.exec_driver_sql(
            f"SELECT count(*) FROM item i WHERE NOT EXISTS (SELECT 1 FROM {s} s"
            " WHERE s.id = i.shop_id)"
        ).scalar_one()
    assert orphans == 0
    for label, shop in writer.item_shop.items():
        if shop in writer.deleted:
            assert label not in items  # cascaded away
        else:
            assert items[label] == shop, label
    seed = {f"i{n}": f"s{1 + n % 300}" for n in range(1, 2001)}
    for label, shop in seed.items():
        if label not in writer.item_shop and shop not in writer.deleted:
            assert items[label] == shop, label
    for body, shop in writer.review_shop.items():
        assert reviews[body] == (None if shop in writer.deleted else shop)


class Flood:
    """An application inserting children faster than a backfill batch takes:
    ``per_pause`` new items (of shop ``s5``) committed in every pause between
    two backfill batches. A backfill that walks on to the table's end chases
    them for ever; ``limit`` pauses end such a run with an assertion."""

    def __init__(self, engine: Engine, per_pause: int, shops: str, limit: int = 300) -> None:
        self.engine = engine
        self.per_pause = per_pause
        self.shops = shops
        self.limit = limit
        self.pauses = 0
        self.labels: list[str] = []

    def pause(self) -> None:
        self.pauses += 1
        assert self.pauses <= self.limit, "the backfill chases the application's inserts"
        rows = [{"l": f"flood{len(self.labels) + k}"} for k in range(self.per_pause)]
        with self.engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO item (shop_id, label) VALUES"
                    f" ((SELECT id FROM {self.shops} WHERE name = 's5'), :l)"
                ),
                rows,
            )
        self.labels.extend(row["l"] for row in rows)

    def check(self) -> None:
        """Every flood item points at ``s5`` under the new keys."""
        with self.engine.connect() as conn:
            shops = dict(
                conn.execute(
                    sa.text(
                        f"SELECT i.label, s.name FROM item i JOIN {self.shops} s"
                        " ON s.id = i.shop_id WHERE i.label LIKE 'flood%'"
                    )
                ).all()
            )
        assert shops == dict.fromkeys(self.labels, "s5")
