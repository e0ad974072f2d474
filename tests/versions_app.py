"""The application of the rolling-deploy tests (``versions``), both servers.

Two instances -- the old code (``BigInteger`` keys, tag ``O``) and the new code
(UUIDv7 keys made in Python, tag ``N``) -- each creating shops with two items,
reading them by key, moving an item to the other's shop and deleting every
fifth shop, all through the SQLAlchemy ORM over the tables a :class:`Names`
names (each test module its hostile names); :class:`World` is what they did.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship

from sqla_ids import UUIDv7, uuid7


@dataclass(frozen=True)
class Names:
    """The shop's tables and columns (names are data: quotes, backticks, spaces)."""

    parent: str
    key: str
    child: str
    ref: str


NEW_READY = ("online:prepared", "online:swapped", "done")
"""The phases in which the new code is ready (its readiness check)."""


def models(names: Names, new: bool) -> tuple[Any, Any]:
    """The application's ORM models over the tables ``names`` names: the old
    code's (``BigInteger`` keys: a sequence's or an ``AUTO_INCREMENT``'s value read
    back) or the new code's (UUIDv7 keys, made in Python)."""

    class Base(DeclarativeBase):
        pass

    key_type: Any = UUIDv7() if new else sa.BigInteger()
    key_default: dict[str, Any] = {"default": uuid7} if new else {}

    class Shop(Base):
        __tablename__ = names.parent
        id: Mapped[Any] = mapped_column(names.key, key_type, primary_key=True, **key_default)
        name: Mapped[str] = mapped_column(sa.String(100), unique=True)
        items: Mapped[list[Item]] = relationship(
            back_populates="shop", cascade="all, delete-orphan", passive_deletes=True
        )

    class Item(Base):
        __tablename__ = names.child
        id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True)
        shop_id: Mapped[Any] = mapped_column(
            names.ref, key_type, sa.ForeignKey(Shop.__table__.c[names.key])
        )
        label: Mapped[str] = mapped_column(sa.String(100), unique=True)
        shop: Mapped[Shop] = relationship(back_populates="items")

    return Shop, Item


@dataclass
class World:
    """What the applications did, as they saw it (shared; under ``lock``)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    phase: str = "before the expand"
    shop_of: dict[str, str] = field(default_factory=dict)
    """Item label -> the name of its shop."""
    alive: set[str] = field(default_factory=set)
    keys: dict[str, dict[str, Any]] = field(default_factory=lambda: {"O": {}, "N": {}})
    """Application -> shop name -> the key it got back."""
    targets: dict[str, list[str]] = field(default_factory=lambda: {"O": [], "N": []})
    """Application -> its shops never deleted (the other one moves items there)."""
    created_in: dict[str, str] = field(default_factory=dict)
    """Shop name -> the phase its insert began in."""


class App(threading.Thread):
    """One application instance: creates a shop with two items, reads it by key,
    moves an item to a shop of the other application (found by name, read by
    key), deletes every fifth shop it made. Every failed statement is counted.
    ``engine`` may be replaced while it runs (the instance re-pointed)."""

    def __init__(
        self,
        tag: str,
        engine: Engine,
        world: World,
        ready: Callable[[Session], bool],
        names: Names,
    ) -> None:
        super().__init__(daemon=True)
        self.tag, self.engine, self.world, self.ready = tag, engine, world, ready
        self.shop, self.item = models(names, new=tag == "N")
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.ops: dict[str, int] = {}
        self.random = random.Random(tag)

    def done(self) -> int:
        return sum(self.ops.values())

    def run(self) -> None:
        n = 0
        ready = False
        while not self.stop.is_set():
            phase = self.world.phase
            try:
                if not ready:
                    # The instance's readiness check.
                    with Session(self.engine) as session:
                        ready = self.ready(session)
                    if not ready:
                        time.sleep(0.05)
                        continue
                n += 1
                self._one(n)
                self.ops[phase] = self.ops.get(phase, 0) + 1
            except Exception as error:  # every failure is the finding
                self.failures.append(f"{phase}: {type(error).__name__}: {str(error)[:300]}")
            time.sleep(0.003)

    def _one(self, n: int) -> None:
        Shop, Item = self.shop, self.item
        world, name = self.world, f"{self.tag}{n}"
        world.created_in[name] = world.phase
        engine = self.engine
        with Session(engine) as session:
            shop = Shop(name=name, items=[Item(label=f"{name}a"), Item(label=f"{name}b")])
            session.add(shop)
            session.commit()
            key = shop.id
        with world.lock:
            world.alive.add(name)
            world.shop_of.update({f"{name}a": name, f"{name}b": name})
            world.keys[self.tag][name] = key
            if n % 5:
                world.targets[self.tag].append(name)
            other = "N" if self.tag == "O" else "O"
            choices = world.targets[other] or world.targets[self.tag]
            target_name = self.random.choice(choices) if choices else None
        with Session(engine) as session:
            got = session.get(Shop, key)
            assert got is not None and got.name == name, (key, got)
            # (The other application may have moved one of its items here already.)
            assert {f"{name}a", f"{name}b"} <= {i.label for i in got.items}
            if target_name is not None:
                target_key = session.scalars(
                    sa.select(Shop.id).where(Shop.name == target_name)
                ).one()
                target = session.get(Shop, target_key)
                assert target is not None
                moved = next(i for i in got.items if i.label == f"{name}b")
                moved.shop = target
                session.commit()
                with world.lock:
                    world.shop_of[f"{name}b"] = target_name
            if n % 5 == 0:
                session.delete(session.get(Shop, key))
                session.commit()
                with world.lock:
                    world.alive.discard(name)
                    for label in [lb for lb, s in world.shop_of.items() if s == name]:
                        del world.shop_of[label]


def until(apps: list[App], more: int) -> None:
    """Wait until each application did ``more`` operations more (or fails)."""
    goals = [app.done() + more for app in apps]
    deadline = time.monotonic() + 120
    while any(app.done() < goal for app, goal in zip(apps, goals, strict=True)):
        if time.monotonic() > deadline or any(len(app.failures) > 50 for app in apps):
            return
        time.sleep(0.02)


def check_rows(engine: Engine, world: World, names: Names, mapped: Callable[[str], bool]) -> None:
    """Every item either application made is under its shop (new keys); every
    shop has the old key it got (or was given) in ``<key>_old`` and, where
    ``mapped(shop name)`` (made while the triggers ran), in the mapping."""
    q = engine.dialect.identifier_preparer.quote
    p, c, k, r = q(names.parent), q(names.child), q(names.key), q(names.ref)
    with engine.connect() as conn:
        found = dict(
            conn.execute(
                sa.text(
                    f"SELECT i.label, s.name FROM {c} i JOIN {p} s ON s.{k} = i.{r}"
                    " WHERE i.label LIKE 'O%' OR i.label LIKE 'N%'"
                )
            ).all()
        )
        assert found == world.shop_of
        shops = {
            name: (key, old_key, mapped_old)
            for name, key, old_key, mapped_old in conn.execute(
                sa.text(
                    f"SELECT s.name, s.{k}, s.{q(names.key + '_old')}, m.old_key FROM {p} s"
                    f" LEFT JOIN {q(names.parent + '_uuid7_map')} m ON m.new_key = s.{k}"
                    " WHERE s.name LIKE 'O%' OR s.name LIKE 'N%'"
                ).columns(sa.column("name"), sa.column(names.key, UUIDv7()))
            ).all()
        }
    assert set(shops) == world.alive
    for name, (key, old_key, mapped_old) in shops.items():
        assert isinstance(key, uuid.UUID) and isinstance(old_key, int), name
        if mapped(name):
            assert mapped_old == old_key, name
        if name.startswith("O"):
            assert world.keys["O"][name] == old_key
        else:
            assert world.keys["N"][name] == key
