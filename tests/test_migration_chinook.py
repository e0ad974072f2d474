"""Chinook on SQLite, PostgreSQL and MariaDB: migrate every key to UUIDv7 and back.

Every join (invoice totals per customer, tracks per playlist, manager chains,
support reps, the track catalogue) must give the same result through the old
keys before and the new keys after; after the downgrade the whole database --
data and schema -- must equal the original.
"""

from __future__ import annotations

import random
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import requirements as requires
import sqlalchemy as sa
from online_app import one_transaction, running
from sqlalchemy.engine import URL, Engine

from sqla_ids import UUID192Type
from sqla_ids.migration import PkMigrationOptions, migrate_pk_to_uuid7, restore_pk_from_uuid7

pytestmark = pytest.mark.slow

CHINOOK = Path(__file__).resolve().parent / "data" / "chinook"  # vendored, MIT (LICENSE.md)
FILES = {
    "sqlite": "Chinook_Sqlite_AutoIncrementPKs.sql",
    "postgresql": "Chinook_PostgreSql_SerialPKs.sql",
    "mariadb": "Chinook_MySql_AutoIncrementPKs.sql",
}
# Tables with a single-column key, parents before children (any order works).
TABLES = [
    "Artist", "Album", "Employee", "Customer", "Invoice", "InvoiceLine",
    "Genre", "MediaType", "Playlist", "Track",
]  # fmt: skip


def _name(dialect: str, name: str) -> str:
    """Chinook's PostgreSQL script uses snake_case names."""
    if dialect != "postgresql":
        return name
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower().replace("_i_d", "_id")


def _script_body(path: Path, marker: str) -> str:
    text = path.read_text(encoding="utf-8")
    return text[text.index(marker) :].split("\n", 1)[1]


def _statements(body: str) -> list[str]:
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    parts = re.split(r";\s*\n(?=\s*(?:INSERT|CREATE|ALTER|$))", body)
    return [p.strip() for p in parts if p.strip()]


@pytest.fixture(scope="module", params=["sqlite", "postgresql", "mariadb"])
def chinook(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """An engine on a fresh Chinook database (one per dialect and module)."""
    with _loaded(request.param, request, tmp_path_factory) as engine:
        yield engine


@contextmanager
def _loaded(
    dialect: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    """An engine on a new Chinook database of ``dialect``, dropped afterwards."""
    path = CHINOOK / FILES[dialect]
    if dialect == "sqlite":
        file = tmp_path_factory.mktemp("chinook") / "chinook.sqlite3"
        raw = sqlite3.connect(file)
        raw.executescript(path.read_text(encoding="utf-8"))
        raw.close()
        engine = sa.create_engine(f"sqlite:///{file}")
        try:
            yield engine
        finally:
            engine.dispose()
        return
    base: URL = request.getfixturevalue(f"{dialect}_url")
    name = f"chinook_{secrets.token_hex(3)}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    if dialect == "postgresql":
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{name}"')
        engine = sa.create_engine(base.set(query={"options": f"-csearch_path={name}"}))
        with engine.begin() as conn:
            conn.exec_driver_sql(_script_body(path, "\\c chinook_serial;").replace("%", "%%"))
        drop = f'DROP SCHEMA "{name}" CASCADE'
    else:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        engine = sa.create_engine(base.set(database=name))
        with engine.begin() as conn:
            for statement in _statements(_script_body(path, "USE `Chinook_AutoIncrement`;")):
                conn.exec_driver_sql(statement.replace("%", "%%"))
        drop = f"DROP DATABASE `{name}`"
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(drop)
        admin.dispose()


def _dialect(engine: Engine) -> str:
    return "mariadb" if engine.dialect.name == "mysql" else engine.dialect.name


def _joins(engine: Engine) -> dict[str, list[Any]]:
    """Results of joins that follow every relationship in Chinook."""
    d = _dialect(engine)

    def n(name: str) -> str:
        return _name(d, name)

    queries = {
        "invoice totals per customer": f"""
            SELECT c.{n("Email")}, count(*), sum(il.{n("UnitPrice")} * il.{n("Quantity")})
            FROM {n("Customer")} c
            JOIN {n("Invoice")} i ON i.{n("CustomerId")} = c.{n("CustomerId")}
            JOIN {n("InvoiceLine")} il ON il.{n("InvoiceId")} = i.{n("InvoiceId")}
            GROUP BY c.{n("Email")} ORDER BY 1""",
        "tracks per playlist": f"""
            SELECT p.{n("Name")}, t.{n("Name")}, t.{n("Composer")} FROM {n("Playlist")} p
            JOIN {n("PlaylistTrack")} pt ON pt.{n("PlaylistId")} = p.{n("PlaylistId")}
            JOIN {n("Track")} t ON t.{n("TrackId")} = pt.{n("TrackId")} ORDER BY 1, 2, 3""",
        "manager chains": f"""
            SELECT e.{n("Email")}, m.{n("Email")}, mm.{n("Email")} FROM {n("Employee")} e
            LEFT JOIN {n("Employee")} m ON m.{n("EmployeeId")} = e.{n("ReportsTo")}
            LEFT JOIN {n("Employee")} mm ON mm.{n("EmployeeId")} = m.{n("ReportsTo")}
            ORDER BY 1""",
        "support reps": f"""
            SELECT c.{n("Email")}, e.{n("Email")} FROM {n("Customer")} c
            LEFT JOIN {n("Employee")} e ON e.{n("EmployeeId")} = c.{n("SupportRepId")}
            ORDER BY 1""",
        "catalogue": f"""
            SELECT t.{n("Name")}, a.{n("Title")}, ar.{n("Name")}, g.{n("Name")}, mt.{n("Name")},
                   t.{n("Milliseconds")}
            FROM {n("Track")} t JOIN {n("Album")} a ON a.{n("AlbumId")} = t.{n("AlbumId")}
            JOIN {n("Artist")} ar ON ar.{n("ArtistId")} = a.{n("ArtistId")}
            LEFT JOIN {n("Genre")} g ON g.{n("GenreId")} = t.{n("GenreId")}
            JOIN {n("MediaType")} mt ON mt.{n("MediaTypeId")} = t.{n("MediaTypeId")}
            ORDER BY 1, 2, 3, 4, 5, 6""",
        "sales per track": f"""
            SELECT t.{n("Name")}, t.{n("Milliseconds")}, il.{n("Quantity")}, i.{n("BillingCity")}
            FROM {n("InvoiceLine")} il JOIN {n("Track")} t ON t.{n("TrackId")} = il.{n("TrackId")}
            JOIN {n("Invoice")} i ON i.{n("InvoiceId")} = il.{n("InvoiceId")}
            ORDER BY 1, 2, 3, 4""",
    }
    # Compared as sorted lists (multisets): under MariaDB's case- and
    # accent-insensitive collation ORDER BY leaves ties in arbitrary order.
    with engine.connect() as conn:
        return {
            k: sorted((tuple(r) for r in conn.exec_driver_sql(q)), key=repr)
            for k, q in queries.items()
        }


def _snapshot(engine: Engine) -> dict[str, Any]:
    """Every table's rows (by column name, sorted) and schema (columns, keys, indexes)."""
    inspector = sa.inspect(engine)
    result: dict[str, Any] = {}
    with engine.connect() as conn:
        for table in sorted(inspector.get_table_names()):
            cols = inspector.get_columns(table)
            names = sorted(c["name"] for c in cols)
            rows = conn.execute(
                sa.select(*[sa.column(c) for c in names]).select_from(sa.table(table))
            )
            result[table] = {
                "rows": sorted(map(tuple, rows), key=repr),
                "columns": sorted((c["name"], str(c["type"]), c["nullable"]) for c in cols),
                "pk": inspector.get_pk_constraint(table),
                "fks": sorted(map(repr, inspector.get_foreign_keys(table))),
                "indexes": sorted(map(repr, inspector.get_indexes(table))),
                "uniques": sorted(map(repr, inspector.get_unique_constraints(table))),
            }
    return result


def test_every_key_migrates_and_comes_back(chinook: Engine) -> None:
    _there_and_back(chinook, lambda table: {}, lambda kind: isinstance(kind, sa.Uuid | sa.CHAR))


def test_every_key_migrates_to_uuid192_and_comes_back(chinook: Engine) -> None:
    """Issue 31: the same with UUID192 keys -- a track's segment its length in
    milliseconds (a column), an employee's none, the others a type tag (an
    expression); every reference holds its parent's whole 24 bytes."""
    d = _dialect(chinook)

    def options(table: str) -> dict[str, Any]:
        if table == "Track":
            return {"target": "uuid192", "segment_column": _name(d, "Milliseconds")}
        if table == "Employee":
            return {"target": "uuid192"}
        return {"target": "uuid192", "segment_sql": "7"}

    track, key, ms = _name(d, "Track"), _name(d, "TrackId"), _name(d, "Milliseconds")
    line = _name(d, "InvoiceLine")

    def segments(conn: sa.Connection) -> None:
        t = sa.table(track, sa.column(key, UUID192Type()), sa.column(ms))
        made = conn.execute(sa.select(t.c[key], t.c[ms])).all()
        assert len(made) == 3503 and all(k.segment == length for k, length in made)
        sold = sa.table(line, sa.column(key, UUID192Type()))
        keys = {k for k, _ in made}
        assert set(conn.execute(sa.select(sold.c[key])).scalars()) <= keys

    _there_and_back(chinook, options, lambda kind: kind.python_type is bytes, segments)


def _there_and_back(
    chinook: Engine,
    options_of: Callable[[str], dict[str, Any]],
    new_type: Callable[[Any], bool],
    while_migrated: Callable[[sa.Connection], None] = lambda conn: None,
) -> None:
    """Every key migrated (``options_of(table)``: the options beyond the shared
    ones), checked (``new_type(reflected type)``, ``while_migrated``), then
    restored: the joins the same all along, the database exactly the original
    at the end."""
    d = _dialect(chinook)
    original = _snapshot(chinook)
    joins_before = _joins(chinook)
    old_orders: dict[str, list[Any]] = {}
    with chinook.connect() as conn:
        for table in TABLES:
            t = _name(d, table)
            options: dict[str, Any] = {"batch_size": 97, "seed": "chinook", **options_of(table)}
            if table == "Invoice":
                options["timestamp_column"] = _name(d, "InvoiceDate")
            migrate_pk_to_uuid7(conn, t, **options)
            conn.commit()
    inspector = sa.inspect(chinook)
    with chinook.connect() as conn:
        for table in TABLES:
            t, key = _name(d, table), _name(d, f"{table}Id")
            column = {c["name"]: c for c in inspector.get_columns(t)}[key]
            assert new_type(column["type"]), (t, column["type"])
            assert inspector.get_pk_constraint(t)["constrained_columns"] == [key]
            # New keys sort exactly like the old ones.
            old = (
                conn.execute(
                    sa.select(sa.column(f"{key}_old"))
                    .select_from(sa.table(t))
                    .order_by(sa.column(key))
                )
                .scalars()
                .all()
            )
            assert old == sorted(old)
            old_orders[t] = old
        # Every FK still exists, now between UUID columns.
        fks = inspector.get_foreign_keys(_name(d, "PlaylistTrack"))
        assert sorted(fk["referred_table"] for fk in fks) == sorted(
            [_name(d, "Playlist"), _name(d, "Track")]
        )
        while_migrated(conn)
    assert _joins(chinook) == joins_before
    with chinook.connect() as conn:
        for table in reversed(TABLES):
            restore_pk_from_uuid7(conn, _name(d, table))
            conn.commit()
    assert _snapshot(chinook) == original
    assert _joins(chinook) == joins_before


class _ChinookApp(threading.Thread):
    """A shop's application writing to Chinook while its keys migrate online: new
    invoices with their lines, invoices moved to another customer or deleted, new
    artists with an album, new employees under a manager. Keys are only passed
    through (read, then sent back), as code that works across the swap must."""

    def __init__(self, engine: Engine, emails: list[str], managers: list[str]) -> None:
        super().__init__(daemon=True)
        self.engine, self.emails, self.managers = engine, emails, managers
        self.n = {name: _name(_dialect(engine), name) for name in _WORDS}
        self.stop = threading.Event()
        self.failures: list[str] = []
        self.retried = 0  # transactions run again (online_app.SNAPSHOT_TOO_OLD)
        self.longest = 0.0  # the slowest transaction, seconds (the longest stall)
        self.invoices: dict[str, str] = {}  # BillingAddress tag -> customer email
        self.albums: dict[str, str] = {}  # album title -> artist name
        self.staff: dict[str, str] = {}  # employee email -> manager email
        self.rng = random.Random(11)
        with engine.connect() as conn:  # names only one track has
            self.track_names = list(
                conn.execute(
                    sa.text(
                        f"SELECT {self.n['Name']} FROM {self.n['Track']}"
                        f" GROUP BY {self.n['Name']} HAVING COUNT(*) = 1 ORDER BY 1"
                    )
                ).scalars()
            )

    def _enough(self) -> bool:
        # What _check_app needs (or failures to report), reached at any pace.
        wrote = len(self.invoices) > 10 and len(self.albums) > 5 and len(self.staff) > 5
        return wrote or len(self.failures) > 10

    def run(self) -> None:
        step = 0
        while not (self.stop.is_set() and self._enough()):
            step += 1
            started = time.monotonic()
            try:
                self.retried += one_transaction(partial(self._transaction, step), self._saved)
            except sa.exc.DBAPIError as error:
                self.failures.append(f"{step}: {str(error.orig).splitlines()[0]}")
            self.longest = max(self.longest, time.monotonic() - started)
            time.sleep(0.003)
        self.engine.dispose()

    def _transaction(self, step: int) -> None:
        with self.engine.begin() as conn:
            self._one(conn, step)

    def _saved(self) -> Callable[[], None]:
        """What puts this application's bookkeeping back as it is now."""
        invoices, albums, staff = dict(self.invoices), dict(self.albums), dict(self.staff)

        def restore() -> None:
            self.invoices, self.albums, self.staff = invoices, albums, staff

        return restore

    def _one(self, conn: sa.Connection, step: int) -> None:
        n, q = self.n, sa.text
        action = step % 5
        if action in (0, 1):
            tag, email = f"w:{step}", self.rng.choice(self.emails)
            customer = conn.execute(
                q(f"SELECT {n['CustomerId']} FROM {n['Customer']} WHERE {n['Email']} = :e"),
                {"e": email},
            ).scalar_one()
            conn.execute(
                q(
                    f"INSERT INTO {n['Invoice']} ({n['CustomerId']}, {n['InvoiceDate']},"
                    f" {n['BillingAddress']}, {n['Total']}) VALUES (:c, :d, :t, 0.99)"
                ),
                {"c": customer, "d": datetime(2026, 11, 24), "t": tag},
            )
            invoice = conn.execute(
                q(f"SELECT {n['InvoiceId']} FROM {n['Invoice']} WHERE {n['BillingAddress']} = :t"),
                {"t": tag},
            ).scalar_one()
            # A track chosen by the customer, its key read and passed through
            # (Track's own key migrates too).
            track = conn.execute(
                q(f"SELECT {n['TrackId']} FROM {n['Track']} WHERE {n['Name']} = :name"),
                {"name": self.track_names[step % len(self.track_names)]},
            ).scalar_one()
            conn.execute(
                q(
                    f"INSERT INTO {n['InvoiceLine']} ({n['InvoiceId']}, {n['TrackId']},"
                    f" {n['UnitPrice']}, {n['Quantity']}) VALUES (:i, :tr, 0.99, 1)"
                ),
                {"i": invoice, "tr": track},
            )
            self.invoices[tag] = email
        elif action == 2 and self.invoices:  # an invoice moves to another customer
            tag, email = self.rng.choice(sorted(self.invoices)), self.rng.choice(self.emails)
            conn.execute(
                q(
                    f"UPDATE {n['Invoice']} SET {n['CustomerId']} = (SELECT {n['CustomerId']}"
                    f" FROM {n['Customer']} WHERE {n['Email']} = :e)"
                    f" WHERE {n['BillingAddress']} = :t"
                ),
                {"e": email, "t": tag},
            )
            self.invoices[tag] = email
        elif action == 3:
            artist, title = f"artist {step}", f"album {step}"
            conn.execute(q(f"INSERT INTO {n['Artist']} ({n['Name']}) VALUES (:a)"), {"a": artist})
            key = conn.execute(
                q(f"SELECT {n['ArtistId']} FROM {n['Artist']} WHERE {n['Name']} = :a"),
                {"a": artist},
            ).scalar_one()
            conn.execute(
                q(f"INSERT INTO {n['Album']} ({n['Title']}, {n['ArtistId']}) VALUES (:t, :a)"),
                {"t": title, "a": key},
            )
            self.albums[title] = artist
        else:
            manager = self.rng.choice(self.managers)
            boss = conn.execute(
                q(f"SELECT {n['EmployeeId']} FROM {n['Employee']} WHERE {n['Email']} = :m"),
                {"m": manager},
            ).scalar_one()
            email = f"staff{step}@chinook.test"
            conn.execute(
                q(
                    f"INSERT INTO {n['Employee']} ({n['LastName']}, {n['FirstName']},"
                    f" {n['Email']}, {n['ReportsTo']}) VALUES ('New', :f, :e, :b)"
                ),
                {"f": f"N{step}", "e": email, "b": boss},
            )
            self.staff[email] = manager


_WORDS = [
    "Customer", "CustomerId", "Email", "Invoice", "InvoiceId", "InvoiceDate", "BillingAddress",
    "Total", "InvoiceLine", "TrackId", "UnitPrice", "Quantity", "Artist", "ArtistId", "Name",
    "Album", "Title", "Employee", "EmployeeId", "LastName", "FirstName", "ReportsTo", "Track",
]  # fmt: skip


ONLINE = ("Employee", "Customer", "Invoice", "Artist", "Album", "Track")
"""The tables the online cases migrate, parents before children."""


def _app(engine: Engine) -> _ChinookApp:
    n = {name: _name(_dialect(engine), name) for name in _WORDS}
    with engine.connect() as conn:
        emails = list(conn.exec_driver_sql(f"SELECT {n['Email']} FROM {n['Customer']}").scalars())
        managers = list(conn.exec_driver_sql(f"SELECT {n['Email']} FROM {n['Employee']}").scalars())
    if engine.dialect.name == "postgresql":
        # As docs/migration.md says: no server-side prepared statements across
        # the swap (PostgreSQL: "cached plan must not change result type").
        engine = sa.create_engine(engine.url, connect_args={"prepare_threshold": None})
    return _ChinookApp(engine, emails, managers)


def _check_app(engine: Engine, app: _ChinookApp, before: dict[str, list[Any]]) -> None:
    """No statement of ``app`` failed; the seed data's relationships are
    unchanged and every invoice, album and employee it wrote points where it
    was sent, under whatever keys the tables have now."""
    n = app.n
    assert app.failures == [], app.failures[:5]
    assert len(app.invoices) > 10 and len(app.albums) > 5 and len(app.staff) > 5
    after = _joins(engine)
    for unchanged in ("tracks per playlist", "catalogue", "support reps"):
        assert after[unchanged] == before[unchanged], unchanged
    assert set(before["manager chains"]) <= set(after["manager chains"])
    with engine.connect() as conn:
        invoices = dict(
            conn.exec_driver_sql(
                f"SELECT i.{n['BillingAddress']}, c.{n['Email']} FROM {n['Invoice']} i"
                f" JOIN {n['Customer']} c ON c.{n['CustomerId']} = i.{n['CustomerId']}"
                f" JOIN {n['InvoiceLine']} il ON il.{n['InvoiceId']} = i.{n['InvoiceId']}"
                f" WHERE i.{n['BillingAddress']} LIKE 'w:%%'"
            ).all()
        )
        albums = dict(
            conn.exec_driver_sql(
                f"SELECT al.{n['Title']}, ar.{n['Name']} FROM {n['Album']} al"
                f" JOIN {n['Artist']} ar ON ar.{n['ArtistId']} = al.{n['ArtistId']}"
            ).all()
        )
        staff = dict(
            conn.exec_driver_sql(
                f"SELECT e.{n['Email']}, m.{n['Email']} FROM {n['Employee']} e"
                f" JOIN {n['Employee']} m ON m.{n['EmployeeId']} = e.{n['ReportsTo']}"
            ).all()
        )
    assert invoices == app.invoices
    assert {t: albums[t] for t in app.albums} == app.albums
    assert {e: staff[e] for e in app.staff} == app.staff


def test_online_while_the_shop_keeps_selling(chinook: Engine) -> None:
    """Six tables (a self-reference among them, and Track, whose reference is part
    of PlaylistTrack's primary key) migrated online, one after the other, while
    the application writes."""
    requires.online.skip_unless(chinook)
    d = _dialect(chinook)
    before = _joins(chinook)
    app = _app(chinook)
    with running(app, app.stop), chinook.connect() as conn:
        for table in ONLINE:
            migrate_pk_to_uuid7(
                conn, _name(d, table), PkMigrationOptions(online=True, batch_size=97)
            )
    _check_app(chinook, app, before)


@pytest.mark.parametrize("dialect", requires.online.databases())
def test_online_there_and_back_while_the_shop_keeps_selling(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, dialect: str
) -> None:
    """The same six tables swapped online one after the other -- each later
    one while the earlier ones still keep their old values in sync -- then
    each downgraded online, last first, with the application writing all
    along. Afterwards the schema is Chinook's own again, every original row is
    there byte for byte, and the rows written meanwhile keep their
    relationships under the old keys."""
    with _loaded(dialect, request, tmp_path_factory) as engine:
        original, before = _snapshot(engine), _joins(engine)
        app = _app(engine)
        with running(app, app.stop), engine.connect() as conn:
            for table in ONLINE:
                migrate_pk_to_uuid7(
                    conn,
                    _name(dialect, table),
                    PkMigrationOptions(online=True, batch_size=97),
                    phase="swap",
                )
            swapped = _snapshot(engine)
            for table in reversed(ONLINE):
                restore_pk_from_uuid7(conn, _name(dialect, table))
        _check_app(engine, app, before)
        after = _snapshot(engine)
    key = _name(dialect, "InvoiceId")
    types = {c[0]: c[1] for c in swapped[_name(dialect, "Invoice")]["columns"]}
    assert types[key] in ("UUID", "CHAR(36)", "uuid"), types  # the run did swap
    assert sorted(after) == sorted(original)
    for table, was in original.items():
        now = after[table]
        assert {k: v for k, v in now.items() if k != "rows"} == {
            k: v for k, v in was.items() if k != "rows"
        }, table
        missing = set(was["rows"]) - set(now["rows"])
        assert sorted(missing, key=repr)[:3] == [], table
